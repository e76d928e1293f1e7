"""Seeded random snapshots: invariants every decision must keep, whatever the input.

drf's Preemptable is switched off, as production confs do: with it on, a tier-1 plugin that
offers no victim (priority, for an equal- or higher-priority victim) hands the decision to
tier 2, where drf alone may evict below minMember (Volcano's behaviour, see test_preempt).
"""

from __future__ import annotations

import numpy as np
import pytest

from hyperjob.schedcore import Scheduler, parse_conf
from hyperjob.schedcore.testing import advance, job, node, queue, snapshot

CONF = """
actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: overcommit}, {name: drf, enablePreemptable: false}, {name: predicates}, {name: proportion},
            {name: nodeorder}, {name: binpack}]
"""


def random_snapshot(seed: int):
    rng = np.random.default_rng(seed)
    nodes = [
        node(f"n{i}").cpu(int(rng.integers(4, 17))).mem("64Gi").gpus(int(rng.integers(0, 3)))
        for i in range(int(rng.integers(2, 7)))
    ]
    queues = [
        queue("a").weight(int(rng.integers(1, 4))).reclaimable(bool(rng.integers(0, 2))),
        queue("b").weight(int(rng.integers(1, 4))),
    ]
    jobs = []
    for k in range(int(rng.integers(3, 10))):
        n = int(rng.integers(1, 5))
        cpu = int(rng.integers(1, 5))
        b = job(f"j{k}", "ab"[k % 2]).priority(int(rng.integers(0, 3))).min(int(rng.integers(1, n + 1)))
        b.created(k).min_resources(cpu=cpu).phase("Pending").tasks(n, cpu=cpu, preemptable=bool(rng.integers(0, 4)))
        jobs.append(b)
    return snapshot(nodes, queues, jobs)


def check_decision(snap, decision):
    jobs = {j.name: j for j in snap.jobs}
    tasks = {t.name: t for j in snap.jobs for t in j.tasks}
    queues = {q.name: q for q in snap.queues}
    assert all(tasks[b.task].status == "Pending" for b in decision.binds)
    assert all(tasks[p.task].status == "Pending" for p in decision.pipelined)
    assert not {b.task for b in decision.binds} & {p.task for p in decision.pipelined}
    for e in decision.evictions:
        t = tasks[e.task]
        assert t.preemptable and t.node == e.node
        assert t.status == "Running" if e.reason == "reclaim" else t.status in ("Running", "Bound")
        if e.reason == "reclaim":
            assert queues[jobs[e.job].queue].reclaimable
    evicted = {e.task for e in decision.evictions}
    bound = {b.task for b in decision.binds}
    for j in snap.jobs:
        # Ready inside the session: what ran before plus what this cycle binds.
        ready = sum(1 for t in j.tasks if t.status in ("Running", "Bound") or t.name in bound)
        lost = sum(1 for t in j.tasks if t.name in evicted)
        preempted = any(e.reason == "preempt" for e in decision.evictions if e.job == j.name)
        if lost and preempted and ready >= j.min_member:
            assert ready - lost >= j.min_member, f"preempt broke gang {j.name}"
    used: dict[str, float] = {}
    for j in snap.jobs:
        for t in j.tasks:
            if t.status in ("Running", "Bound") and t.name not in evicted:
                used[t.node] = used.get(t.node, 0.0) + t.request.get("cpu", 0.0)  # type: ignore[index]
    for b in decision.binds:
        task = next(t for t in jobs[b.job].tasks if t.name == b.task)
        used[b.node] = used.get(b.node, 0.0) + task.request.get("cpu", 0.0)
    caps = {n.name: n.allocatable["cpu"] for n in snap.nodes}
    assert all(used[n] <= caps[n] + 1e-9 for n in used), "a node is overcommitted"


@pytest.mark.parametrize("seed", range(25), ids=lambda s: f"seed-{s}")
def test_random_cycles_keep_invariants_and_are_deterministic(seed):
    snap = random_snapshot(seed)
    sched = Scheduler(parse_conf(CONF))
    for _ in range(4):
        decision = sched.cycle(snap)
        assert decision == sched.cycle(snap)
        check_decision(snap, decision)
        snap = advance(snap, decision)


@pytest.mark.parametrize("seed", range(5), ids=lambda s: f"seed-{s}")
def test_job_sort_key_orders_exactly_like_the_plugin_chain(seed):
    import functools

    snap = advance(random_snapshot(seed), Scheduler(parse_conf(CONF)).cycle(random_snapshot(seed)))
    ssn = Scheduler(parse_conf(CONF)).open(snap)
    jobs = list(ssn.jobs.values())
    key = ssn.job_key()
    assert key is not None
    by_cmp = sorted(jobs, key=functools.cmp_to_key(lambda a, b: -1 if ssn.job_before(a, b) else 1))
    assert [j.name for j in sorted(jobs, key=key)] == [j.name for j in by_cmp]
