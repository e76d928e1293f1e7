"""Shared helpers for schedcore tests: confs by name and a multi-cycle driver (no fixtures)."""

from __future__ import annotations

from hyperjob.schedcore import Decision, Scheduler, Snapshot, parse_conf
from hyperjob.schedcore.testing import advance

RECLAIM_CONF = """
actions: "enqueue, allocate, reclaim, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}, {name: binpack}]
"""

ARTICLE_CONF = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
"""

PREEMPT_CONF = """
actions: "enqueue, allocate, preempt, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]
"""


def cycles(conf_text: str, snap: Snapshot, n: int) -> tuple[list[Decision], Snapshot]:
    """Run ``n`` cycles, applying each decision like a driver; return decisions and last snapshot."""
    scheduler = Scheduler(parse_conf(conf_text))
    out = []
    for _ in range(n):
        d = scheduler.cycle(snap)
        out.append(d)
        snap = advance(snap, d)
    return out, snap


def placement(snap: Snapshot) -> dict[str, str | None]:
    return {t.name: t.node for j in snap.jobs for t in j.tasks}


def status(snap: Snapshot) -> dict[str, str]:
    return {t.name: t.status for j in snap.jobs for t in j.tasks}
