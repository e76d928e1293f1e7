"""Actions, run in the conf's order: enqueue, allocate, preempt, reclaim, backfill."""
