"""enqueue with overcommit and proportion votes; votes combine across tiers."""

from __future__ import annotations

import pytest

from hyperjob.schedcore import DEFAULT_CONF_TEXT, Scheduler, parse_conf
from hyperjob.schedcore.testing import job, node, queue, snapshot


def phases(conf_text, nodes, jobs, queues=None):
    return Scheduler(parse_conf(conf_text)).cycle(snapshot(nodes, queues or [queue("default")], jobs)).podgroup_phases


def busy(cpu_used, declared=True):
    b = job("busy").min(1).phase("Running").running(["n1"], cpu=cpu_used)
    return b.min_resources(cpu=cpu_used) if declared else b


@pytest.mark.parametrize(
    ("used", "min_cpu", "factor", "expected"),
    [
        (4, 1, None, "Pending"),  # 4*1.2 - 4 = 0.8 < 1
        (3, 1.5, None, "Pending"),  # 4*1.2 - 3 = 1.8 >= 1.5 ... but proportion's realCapability: 1.5+3 > 4
        (0, 4.5, None, "Pending"),  # overcommit admits 4.5 <= 4.8, proportion rejects 4.5 > 4 (same tier)
        (2, 1, None, "Inqueue"),
        (4, 3, 2.0, "Pending"),  # overcommit 4*2-4 = 4 >= 3 but proportion: 3+4 > 4
    ],
    ids=["overcommit-full", "proportion-capacity", "reject-beats-permit-in-tier", "admitted", "factor-argument"],
)
def test_enqueue_gate(used, min_cpu, factor, expected):
    conf = DEFAULT_CONF_TEXT
    if factor is not None:
        conf = conf.replace(
            "  - name: overcommit\n", f"  - name: overcommit\n    arguments: {{overcommit-factor: {factor}}}\n"
        )
    jobs = [busy(used)] if used else []
    jobs.append(job("new").phase("Pending").min(1).min_resources(cpu=min_cpu).tasks(1, cpu=min_cpu))
    assert phases(conf, [node("n1").cpu(4).mem("16Gi")], jobs)["new"] == expected


def test_running_job_without_min_resources_counts_as_elastic():
    # Volcano's elastic = allocated - minResources; with no minResources all of it is elastic,
    # so proportion lets a new job in as if the busy one could shrink.
    jobs = [busy(3, declared=False), job("new").phase("Pending").min(1).min_resources(cpu=1.5).tasks(1, cpu=1.5)]
    conf = 'actions: "enqueue"\ntiers:\n- plugins: [{name: proportion}]\n'
    assert phases(conf, [node("n1").cpu(4).mem("16Gi")], jobs)["new"] == "Inqueue"


def test_overcommit_alone_admits_up_to_factor():
    conf = 'actions: "enqueue"\ntiers:\n- plugins: [{name: overcommit}]\n'
    jobs = [job(f"j{i}").phase("Pending").min(1).created(i).min_resources(cpu=1).tasks(1, cpu=1) for i in range(6)]
    got = phases(conf, [node("n1").cpu(4).mem("16Gi")], jobs)
    assert sorted(got.values()) == ["Inqueue"] * 4 + ["Pending"] * 2  # 4 x 1.2 = 4.8 -> four of 1 cpu


def test_rejected_big_job_does_not_block_a_later_small_one():
    jobs = [
        job("big").phase("Pending").min(1).min_resources(cpu=8).tasks(1, cpu=8),
        job("small").phase("Pending").created(1).min(1).min_resources(cpu=1).tasks(1, cpu=1),
    ]
    got = phases(DEFAULT_CONF_TEXT, [node("n1").cpu(4).mem("16Gi")], jobs)
    assert got == {"big": "Pending", "small": "Inqueue"}


def test_nil_min_resources_is_always_admitted():
    jobs = [busy(4), job("nomin").phase("Pending").min(1).tasks(1, cpu=1)]
    assert phases(DEFAULT_CONF_TEXT, [node("n1").cpu(4).mem("16Gi")], jobs)["nomin"] == "Inqueue"


def test_closed_queue_rejects_enqueue():
    jobs = [job("j", "q").phase("Pending").min(1).min_resources(cpu=1).tasks(1, cpu=1)]
    got = phases(DEFAULT_CONF_TEXT, [node("n1").cpu(4).mem("16Gi")], jobs, [queue("q").state("Closing")])
    assert got["j"] == "Pending"


def test_without_enqueue_action_pending_jobs_are_promoted():
    conf = DEFAULT_CONF_TEXT.replace('"enqueue, allocate, backfill"', '"allocate, backfill"')
    d = Scheduler(parse_conf(conf)).cycle(
        snapshot(
            [node("n1").cpu(4).mem("16Gi")], [queue("default")], [job("j").phase("Pending").min(1).tasks(1, cpu=1)]
        )
    )
    assert [b.task for b in d.binds] == ["j-task-0"]


def test_inqueue_reservation_counts_against_later_jobs():
    # An admitted (Inqueue) job's minResources stay reserved, so the next one does not fit.
    jobs = [
        job("first").phase("Inqueue").min(1).min_resources(cpu=3).tasks(1, cpu=3, node_selector={"x": "y"}),
        job("second").phase("Pending").created(1).min(1).min_resources(cpu=2).tasks(1, cpu=2),
    ]
    assert phases(DEFAULT_CONF_TEXT, [node("n1").cpu(4).mem("16Gi")], jobs)["second"] == "Pending"


def unschedulable(conf_text, nodes, jobs, queues=None):
    return Scheduler(parse_conf(conf_text)).cycle(snapshot(nodes, queues or [queue("default")], jobs)).unschedulable


@pytest.mark.parametrize(
    ("used", "min_cpu", "queue_state", "reason"),
    [
        (4, 1, "Open", "podgroup minResources exceed what the cluster can admit on cpu (its allocatable x 1.2"),
        (3, 1.5, "Open", "queue default: podgroup minResources exceed what the queue can admit on cpu"),
        (0, 1, "Closing", "queue default is Closing"),
    ],
    ids=["overcommit-rejects", "proportion-rejects", "queue-closed"],
)
def test_a_job_left_pending_says_which_limit_its_min_resources_exceed(used, min_cpu, queue_state, reason):
    jobs = [busy(used)] if used else []
    jobs.append(job("new").phase("Pending").min(1).min_resources(cpu=min_cpu).tasks(1, cpu=min_cpu))
    queues = [queue("default").state(queue_state)]
    got = unschedulable(DEFAULT_CONF_TEXT, [node("n1").cpu(4).mem("16Gi")], jobs, queues)
    assert got["new"].startswith(f"1/1 tasks in gang unschedulable: {reason}")


def test_capacity_hierarchy_rejection_names_the_ancestor_queue():
    # team's own room (org's 4 cpu) takes 3, but its sibling already holds 3 of org's 4.
    conf = 'actions: "enqueue"\ntiers:\n- plugins: [{name: gang}, {name: capacity, enableHierarchy: true}]\n'
    queues = [queue("root"), queue("org").parent("root").capability(cpu=4)]
    queues += [queue("team").parent("org"), queue("sibling").parent("org")]
    jobs = [
        job("busy", "sibling").min(1).phase("Running").running(["n1"], cpu=3).min_resources(cpu=3),
        job("j", "team").phase("Pending").min(1).min_resources(cpu=3).tasks(1, cpu=3),
    ]
    got = unschedulable(conf, [node("n1").cpu(8).mem("16Gi")], jobs, queues)
    assert "queue org: podgroup minResources exceed what the queue can admit on cpu" in got["j"]
