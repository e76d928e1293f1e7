"""job-controller: the lifecycle of every Volcano Job dispatched to one cluster.

Owns ``job@<cluster>`` (jobcore's JobRecord) and ``podgroup@<cluster>``. Every decision is
``jobcore.decide``; this service only delivers events to it (dispatches, podgroup phases,
bindings, evictions, pod phases, timers) and carries out the effects: pods to start or stop on
nodes, podgroups to create or delete, phase changes to announce. One instance per cluster; a
per-job lock serializes events of one job inside the process, and versioned writes make a second
replica safe.
"""
