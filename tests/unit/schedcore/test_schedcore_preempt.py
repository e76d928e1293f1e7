"""preempt: within a queue, by job priority, never breaking a gang below minMember."""

from __future__ import annotations

import pytest

from hyperjob.schedcore import Scheduler, parse_conf
from hyperjob.schedcore.testing import job, node, queue, snapshot
from tests.unit.schedcore.schedcore_helpers import PREEMPT_CONF, cycles, placement


def full_node():
    return node("n1").cpu(4).mem("16Gi").pods(10)


def low(min_member=1, q="default", **kw):
    return job("low", q).priority(1).min(min_member).phase("Running").running(["n1"] * 4, cpu=1, **kw)


def high(q="default", prio=10, **kw):
    return job("high", q).priority(prio).min(1).created(5).tasks(1, cpu=2, **kw)


def evicted(conf, jobs, queues=("default",)):
    snap = snapshot([full_node()], [queue(q) for q in queues], jobs)
    return sorted(e.task for e in Scheduler(parse_conf(conf)).cycle(snap).evictions)


@pytest.mark.parametrize(
    ("jobs", "queues", "expected"),
    [
        # gang offers the first 3 of 4 (keeping minMember 1); they go in reverse task order.
        ([low(), high()], ("default",), ["low-task-1", "low-task-2"]),
        ([low(q="other"), high()], ("default", "other"), []),
        # priority offers nothing, so tier 2 decides: drf lets the smaller share preempt (Volcano).
        ([low(), high(prio=1)], ("default",), ["low-task-0", "low-task-1"]),
        ([low(min_member=4), high()], ("default",), []),
        ([low(min_member=3), high()], ("default",), []),
        ([low(min_member=2), high()], ("default",), ["low-task-0", "low-task-1"]),
        ([low(), high(preemption_policy="Never")], ("default",), []),
        ([low(preemptable=False), high()], ("default",), []),
        ([low(priority_class="system-node-critical"), high()], ("default",), []),
    ],
    ids=[
        "lower-priority-job-evicted-just-enough",
        "never-across-queues",
        "equal-priority-drf-decides",
        "gang-at-min-member-protected",
        "gang-would-break-so-nothing",
        "gang-keeps-min-member",
        "preemption-policy-never",
        "non-preemptable-pod",
        "conformance-protects-critical",
    ],
)
def test_preempt_victims(jobs, queues, expected):
    assert evicted(PREEMPT_CONF, jobs, queues) == expected


def test_equal_priority_without_drf_preemptable_evicts_nothing():
    conf = PREEMPT_CONF.replace("{name: drf}", "{name: drf, enablePreemptable: false}")
    assert evicted(conf, [low(), high(prio=1)]) == []


def test_preemptor_runs_after_victims_are_gone():
    snap = snapshot([full_node()], [queue("default")], [low(), high()])
    decisions, last = cycles(PREEMPT_CONF, snap, 2)
    assert [p.task for p in decisions[0].pipelined] == ["high-task-0"]
    assert [b.task for b in decisions[1].binds] == ["high-task-0"]
    assert placement(last)["high-task-0"] == "n1"


def test_within_job_higher_priority_task_evicts_lower_one():
    conf = PREEMPT_CONF.replace("{name: gang}", "{name: gang, enablePreemptable: false}")
    j = (
        job("j")
        .min(2)
        .phase("Running")
        .tasks(1, role="a", status="Running", nodes=["n1"], cpu=4, priority=1)
        .tasks(1, role="b", cpu=4, priority=5)
    )
    d = Scheduler(parse_conf(conf)).cycle(snapshot([full_node()], [queue("default")], [j]))
    assert [(e.task, e.reason) for e in d.evictions] == [("j-a-0", "preempt")]


def test_jobs_with_network_topology_do_not_preempt():
    assert evicted(PREEMPT_CONF, [low(), high().topology("hard", 1)]) == []


def test_tier_one_without_victims_hands_over_to_drf():
    """Volcano's tier rule: priority (first in tier 1) offers no higher-priority victim, so the
    tier yields nothing and tier 2 decides; drf alone then evicts, even below minMember. This is
    why production confs set ``enablePreemptable: false`` on drf."""
    victim = job("big").priority(5).min(4).phase("Running").running(["n1"] * 4, cpu=1)
    assert evicted(PREEMPT_CONF, [victim, high(prio=1)]) == ["big-task-0", "big-task-1"]
    conf = PREEMPT_CONF.replace("{name: drf}", "{name: drf, enablePreemptable: false}")
    assert evicted(conf, [victim, high(prio=1)]) == []


def gpu_node():
    return node("n1").cpu(16).mem("64Gi").pods(10).gpus(4)


@pytest.mark.parametrize("gpus", [1, 2], ids=["one-gpu", "two-gpus"])
def test_a_whole_gpu_preemptor_counts_the_devices_its_victims_release(gpus):
    """The last fit check counts a victim's GPU devices as free once it is gone (issue 28): before,
    only devices free now counted, so the victims were found and every eviction undone."""
    low_job = job("low", "default").priority(1).min(1).phase("Running").running(["n1"] * 4, cpu=1, gpu=1)
    high_job = job("high", "default").priority(10).min(1).created(5).tasks(1, cpu=1, gpu=gpus)
    snap = snapshot([gpu_node()], [queue("default")], [low_job, high_job])
    decisions, last = cycles(PREEMPT_CONF, snap, 2)
    assert len(decisions[0].evictions) == gpus
    assert [p.task for p in decisions[0].pipelined] == ["high-task-0"]
    assert placement(last)["high-task-0"] == "n1"


def test_two_gpu_preemptors_do_not_count_the_same_released_device():
    """A pipelined pod takes the released devices first: one victim's GPU is one preemptor's."""
    low_job = job("low", "default").priority(1).min(1).phase("Running").running(["n1"] * 4, cpu=1, gpu=1)
    high_job = job("high", "default").priority(10).min(2).created(5).tasks(2, cpu=1, gpu=1)
    snap = snapshot([gpu_node()], [queue("default")], [low_job, high_job])
    decision = Scheduler(parse_conf(PREEMPT_CONF)).cycle(snap)
    assert len(decision.evictions) == 2
    assert sorted(p.task for p in decision.pipelined) == ["high-task-0", "high-task-1"]
