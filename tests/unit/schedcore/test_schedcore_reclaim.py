"""reclaim: across queues, only from reclaimable queues over their share, only as much as needed."""

from __future__ import annotations

import pytest

from hyperjob.schedcore import Scheduler, parse_conf
from hyperjob.schedcore.plugins.quota import QueueAttr, reclaim_victims
from hyperjob.schedcore.testing import job, node, queue, snapshot
from tests.unit.schedcore.schedcore_helpers import RECLAIM_CONF


def reclaim(jobs, queues, nodes=None, conf=RECLAIM_CONF):
    snap = snapshot(nodes or [node("n1").cpu(4).mem("16Gi").pods(10)], queues, jobs)
    return Scheduler(parse_conf(conf)).cycle(snap)


def hog(q="a", n=4, status="Running", **kw):
    return job("hog", q).min(1).phase("Running").tasks(n, status=status, nodes=["n1"] * n, cpu=1, **kw)


def want(cpu=2, q="b"):
    return job("want", q).min(1).created(5).tasks(1, cpu=cpu)


@pytest.mark.parametrize(
    ("jobs", "queues", "expected"),
    [
        # gang (tier 1) offers the first three of hog's four pods; reverse task order evicts.
        ([hog(), want()], [queue("a"), queue("b")], ["hog-task-2", "hog-task-1"]),
        ([hog(), want(cpu=1)], [queue("a"), queue("b")], ["hog-task-2"]),
        ([hog(), want()], [queue("a").reclaimable(False), queue("b")], []),
        ([hog(status="Bound"), want()], [queue("a"), queue("b")], []),
        ([hog(preemptable=False), want()], [queue("a"), queue("b")], []),
        ([hog(), want(cpu=3)], [queue("a"), queue("b")], []),
        ([hog(), want()], [queue("a").weight(3), queue("b")], []),
    ],
    ids=[
        "stops-as-soon-as-it-fits",
        "one-victim-for-one-cpu",
        "reclaimable-false-protects",
        "bound-is-not-running",
        "non-preemptable",
        "reclaimer-above-deserved",
        "victim-queue-within-deserved",
    ],
)
def test_reclaim(jobs, queues, expected):
    d = reclaim(jobs, queues)
    assert [e.task for e in d.evictions] == expected
    assert all(e.reason == "reclaim" for e in d.evictions)
    if expected:
        assert [p.task for p in d.pipelined] == ["want-task-0"]


def test_reclaim_takes_from_one_node_only_when_that_is_enough():
    nodes = [node("n1").cpu(2).mem("8Gi"), node("n2").cpu(2).mem("8Gi")]
    jobs = [
        job("hog", "a").min(1).phase("Running").running(["n1", "n1", "n2", "n2"], cpu=1),
        job("want", "b").min(1).created(5).tasks(1, cpu=2),
    ]
    d = reclaim(jobs, [queue("a"), queue("b")], nodes)
    assert sorted(e.node for e in d.evictions) == ["n1", "n1"]


def test_gang_offers_nothing_at_min_member_so_proportion_decides():
    # hog needs all 4 (minMember 4): gang offers nothing in tier 1, so tier 2 (proportion)
    # decides, exactly as in seed-02; proportion offers pods only until queue a is back within
    # its deserved 2 cpu, i.e. the first two on the node, evicted in reverse task order.
    jobs = [job("hog", "a").min(4).phase("Running").running(["n1"] * 4, cpu=1), want()]
    d = reclaim(jobs, [queue("a"), queue("b")])
    assert [e.task for e in d.evictions] == ["hog-task-1", "hog-task-0"]


def test_gang_protection_holds_when_tier_one_already_answered():
    # priority registers no Reclaimable; with conformance first in tier 1 the tier has answered,
    # and gang's empty answer then leaves no victims at all (Volcano keeps the intersection).
    conf = RECLAIM_CONF.replace(
        "[{name: priority}, {name: gang}, {name: conformance}]", "[{name: priority}, {name: conformance}, {name: gang}]"
    )
    jobs = [job("hog", "a").min(4).phase("Running").running(["n1"] * 4, cpu=1), want()]
    assert reclaim(jobs, [queue("a"), queue("b")], conf=conf).evictions == []


@pytest.mark.parametrize(
    ("deserved_cpu", "expected"),
    [(1, ["a-task-0", "a-task-1"]), (3, []), (0, ["a-task-0", "a-task-1", "a-task-2"])],
    ids=["gives-up-only-down-to-deserved", "within-deserved-keeps-all", "nothing-deserved-gives-all"],
)
def test_reclaim_victims_stops_once_the_queue_is_back_within_what_it_keeps(deserved_cpu, expected):
    ssn = Scheduler(parse_conf(RECLAIM_CONF)).open(
        snapshot([node("n1").cpu(8).mem("16Gi")], [queue("a")], [job("a", "a").min(1).running(["n1"] * 3, cpu=1)])
    )
    attr = QueueAttr("a", ssn.space)
    attr.allocated = ssn.space.vec({"cpu": 3, "pods": 3})
    attr.deserved = ssn.space.vec({"cpu": deserved_cpu, "pods": 3})
    tasks = ssn.jobs["a"].tasks

    def above_deserved(a, allocated, _):
        return not ssn.space.less_equal(allocated, a.deserved)

    got = reclaim_victims({"a": attr}, tasks, above_deserved)
    assert [t.name for t in got] == expected
    assert attr.allocated[0] == 3  # the running figure is a copy: the queue's own is untouched


def test_a_whole_gpu_reclaimer_counts_the_devices_its_victims_release():
    """The last fit check counts the victims' GPU devices (issue 28): before, reclaim found the
    victim and undid the eviction, as the devices were not free yet."""
    nodes = [node("n1").cpu(16).mem("64Gi").pods(10).gpus(4)]
    hog_job = job("hog", "a").min(1).phase("Running").tasks(4, status="Running", nodes=["n1"] * 4, cpu=1, gpu=1)
    want_job = job("want", "b").min(1).created(5).tasks(1, cpu=1, gpu=2)
    d = reclaim([hog_job, want_job], [queue("a"), queue("b")], nodes=nodes)
    assert [e.task for e in d.evictions] == ["hog-task-2", "hog-task-1"]
    assert [p.task for p in d.pipelined] == ["want-task-0"]
