"""The acceptance seeds (shared/scenarios/seed) reproduced at the snapshot level, cycle by cycle."""

from __future__ import annotations

import msgspec
import pytest

from hyperjob.schedcore import Scheduler, Snapshot, parse_conf
from hyperjob.schedcore.testing import advance, job, node, queue, snapshot
from tests.unit.schedcore.schedcore_helpers import ARTICLE_CONF, RECLAIM_CONF, cycles, placement, status


def n1():
    return node("n1").cpu(4).mem("16Gi").pods(110)


def nginx(name: str, q: str, cpu: float, phase: str = "Pending"):
    return job(name, q).min(1).min_resources(cpu=cpu).phase(phase).tasks(1, role="nginx", cpu=cpu)


def test_seed01_weights_1_to_3_give_deserved_1_and_3():
    snap = snapshot(
        [n1()], [queue("default"), queue("test").weight(3)], [nginx("job1", "default", 1), nginx("job2", "test", 3)]
    )
    decisions, last = cycles(ARTICLE_CONF, snap, 2)
    assert placement(last) == {"job1-nginx-0": "n1", "job2-nginx-0": "n1"}
    assert decisions[0].queues["default"].deserved == {"cpu": 1.0}
    assert decisions[0].queues["test"].deserved == {"cpu": 3.0}
    assert decisions[1].podgroup_phases == {"job1": "Running", "job2": "Running"}


def test_seed01_pods_created_only_after_admission():
    """A driver that creates pods once the podgroup is Inqueue (as Volcano's controller does)."""
    jobs = [nginx("job1", "default", 1), nginx("job2", "test", 3)]
    built = [j.build() for j in jobs]
    snap = snapshot(
        [n1()], [queue("default"), queue("test").weight(3)], [msgspec.structs.replace(j, tasks=[]) for j in built]
    )
    sched = Scheduler(parse_conf(ARTICLE_CONF))
    first = sched.cycle(snap)
    assert first.podgroup_phases == {"job1": "Inqueue", "job2": "Inqueue"} and not first.binds
    snap = msgspec.structs.replace(snap, jobs=[msgspec.structs.replace(j, phase="Inqueue") for j in built])
    second = sched.cycle(snap)
    assert sorted((b.task, b.node) for b in second.binds) == [("job1-nginx-0", "n1"), ("job2-nginx-0", "n1")]
    assert second.queues["test"].deserved == {"cpu": 3.0}


def test_seed02_reclaim_evicts_only_job2_and_job3_runs():
    # Stage 1: only the default queue; job1 and job2 fill the node.
    snap = snapshot([n1()], [queue("default")], [nginx("job1", "default", 1), nginx("job2", "default", 3)])
    _, snap = cycles(RECLAIM_CONF, snap, 2)
    assert placement(snap) == {"job1-nginx-0": "n1", "job2-nginx-0": "n1"}
    # Stage 2: queue test (weight 3) appears; empty, so nothing is evicted.
    snap = msgspec.structs.replace(snap, queues=[*snap.queues, queue("test").weight(3).created(10).build()])
    decisions, snap = cycles(RECLAIM_CONF, snap, 1)
    assert not decisions[0].evictions
    # Stage 3: job3 in test reclaims.
    snap = msgspec.structs.replace(snap, jobs=[*snap.jobs, nginx("job3", "test", 3).created(20).build()])
    decisions, snap = cycles(RECLAIM_CONF, snap, 4)
    evicted = [e.task for d in decisions for e in d.evictions]
    assert evicted == ["job2-nginx-0"]
    assert all(e.reason == "reclaim" for d in decisions for e in d.evictions)
    assert placement(snap) == {"job1-nginx-0": "n1", "job2-nginx-0": None, "job3-nginx-0": "n1"}
    assert status(snap)["job2-nginx-0"] == "Pending"
    assert decisions[-1].queues["default"].deserved == {"cpu": 1.0}
    assert decisions[-1].queues["test"].deserved == {"cpu": 3.0}


def test_seed03_capability_makes_enqueue_reject():
    snap = snapshot(
        [n1()],
        [queue("default"), queue("test").capability(cpu=2)],
        [nginx("job1", "test", 1), nginx("job2", "test", 3).created(5)],
    )
    decisions, last = cycles(ARTICLE_CONF, snap, 3)
    assert placement(last) == {"job1-nginx-0": "n1", "job2-nginx-0": None}
    assert decisions[-1].podgroup_phases["job2"] == "Pending"
    assert "job2" in decisions[-1].unschedulable


@pytest.mark.parametrize(
    ("reclaimable", "evicted", "expected"),
    [
        (False, [], {"job1-nginx-0": "n1", "job2-nginx-0": None}),
        (True, ["job1-nginx-0"], {"job1-nginx-0": None, "job2-nginx-0": "n1"}),
    ],
    ids=["seed04a-reclaimable-false-protects", "seed04b-reclaimable-true-control"],
)
def test_seed04_reclaimable_flag(reclaimable, evicted, expected):
    snap = snapshot([n1()], [queue("default"), queue("test").reclaimable(reclaimable)], [nginx("job1", "test", 3)])
    _, snap = cycles(RECLAIM_CONF, snap, 2)
    snap = msgspec.structs.replace(snap, jobs=[*snap.jobs, nginx("job2", "default", 2).created(10).build()])
    decisions, snap = cycles(RECLAIM_CONF, snap, 4)
    assert [e.task for d in decisions for e in d.evictions] == evicted
    assert placement(snap) == expected


@pytest.mark.parametrize(
    ("min_member", "first", "second"),
    [
        (3, ("nginx2", 2, 0.2, 1.0), ("nginx", 4, 0.1, 0.5)),
        (6, ("nginx2", 2, 0.2, 1.0), ("nginx", 4, 0.1, 0.5)),
        (3, ("nginx", 4, 0.1, 0.5), ("nginx2", 2, 0.2, 1.0)),
    ],
    ids=["seed05-minavailable3", "seed06-default-minavailable", "seed07-task-order-swapped"],
)
def test_seed05_to_07_gangs_with_min_resources_run(min_member, first, second):
    b = job("nginx-job3", "weight").min(min_member).phase("Pending")
    for role, n, cpu, mem in (first, second):
        b.tasks(n, role=role, cpu=cpu, memory=mem)
    snap = snapshot([node("n1").cpu(8).mem("16Gi").pods(110)], [queue("default"), queue("weight")], [b])
    decisions, last = cycles(ARTICLE_CONF, snap, 2)
    assert all(n == "n1" for n in placement(last).values())
    assert decisions[-1].podgroup_phases["nginx-job3"] == "Running"


def test_seed08_nginx_job_min3_runs():
    snap: Snapshot = snapshot(
        [node("n1").cpu(8).mem("16Gi").pods(110)],
        [queue("weight")],
        [
            job("nginx-job", "weight")
            .min(3)
            .min_resources(cpu=0.3, memory=1.5)
            .phase("Pending")
            .tasks(3, role="nginx", cpu=0.1, memory=0.5)
        ],
    )
    d = Scheduler(parse_conf(ARTICLE_CONF)).cycle(snap)
    assert len(d.binds) == 3
    assert Scheduler(parse_conf(ARTICLE_CONF)).cycle(advance(snap, d)).podgroup_phases["nginx-job"] == "Running"
