"""Queue quotas: proportion's water-filling, capacity flat and hierarchical."""

from __future__ import annotations

import pytest

from hyperjob.schedcore import Scheduler, parse_conf
from hyperjob.schedcore.testing import job, node, queue, snapshot

ENQUEUE_ONLY = 'actions: "enqueue"\ntiers:\n- plugins: [{name: proportion}]\n'
CAPACITY_CONF = """
actions: "enqueue, allocate, reclaim, backfill"
tiers:
- plugins: [{name: priority}, {name: gang}, {name: conformance}]
- plugins: [{name: drf}, {name: predicates}, {name: capacity}, {name: nodeorder}]
"""
HIER_CONF = CAPACITY_CONF.replace("{name: capacity}", "{name: capacity, enableHierarchy: true}")


def deserved(queues, demands, cpu=8, conf=ENQUEUE_ONLY):
    jobs = [job(f"j-{q}", q).min(1).tasks(1, cpu=c) for q, c in demands.items()]
    d = Scheduler(parse_conf(conf)).cycle(snapshot([node("n1").cpu(cpu).mem("32Gi")], queues, jobs))
    return {q: u.deserved.get("cpu", 0.0) for q, u in d.queues.items()}


@pytest.mark.parametrize(
    ("queues", "demands", "expected"),
    [
        ([queue("a"), queue("b").weight(3)], {"a": 8, "b": 8}, {"a": 2.0, "b": 6.0}),
        ([queue("a"), queue("b")], {"a": 1, "b": 10}, {"a": 1.0, "b": 7.0}),
        ([queue("a").weight(3).capability(cpu=2), queue("b")], {"a": 8, "b": 8}, {"a": 2.0, "b": 6.0}),
        ([queue("a").guarantee(cpu=3), queue("b")], {"a": 1, "b": 8}, {"a": 3.0, "b": 5.0}),
        ([queue("a"), queue("b"), queue("idle")], {"a": 8, "b": 8}, {"a": 4.0, "b": 4.0, "idle": 0.0}),
    ],
    ids=[
        "weights-1-to-3",
        "capped-by-request-returns-the-rest",
        "capability-caps",
        "guarantee-lifts",
        "queue-without-jobs-gets-nothing",
    ],
)
def test_proportion_water_filling(queues, demands, expected):
    assert deserved(queues, demands) == expected


def test_proportion_queue_order_serves_lower_share_first():
    # Room for one 4-cpu pod: queue b (share 0) goes before a (already using 4 of 4 deserved).
    jobs = [
        job("a-run", "a").min(1).phase("Running").running(["n1"], cpu=4),
        job("a-new", "a").min(1).tasks(1, cpu=4),
        job("b-new", "b").min(1).created(9).tasks(1, cpu=4),
    ]
    d = Scheduler(parse_conf(CAPACITY_CONF.replace("capacity", "proportion"))).cycle(
        snapshot([node("n1").cpu(12).mem("32Gi")], [queue("a"), queue("b")], jobs)
    )
    assert [b.task for b in d.binds][:1] == ["b-new-task-0"]


def test_capacity_flat_borrows_up_to_capability():
    queues = [queue("a").deserved(cpu=2).capability(cpu=6), queue("b").deserved(cpu=6)]
    jobs = [job(f"a{i}", "a").min(1).created(i).tasks(1, cpu=1) for i in range(8)]
    d = Scheduler(parse_conf(CAPACITY_CONF)).cycle(snapshot([node("n1").cpu(8).mem("32Gi")], queues, jobs))
    assert len(d.binds) == 6
    assert d.queues["a"].deserved == {"cpu": 2.0}


def test_capacity_reclaims_borrowed_resources():
    queues = [queue("a").deserved(cpu=2), queue("b").deserved(cpu=6)]
    jobs = [
        job("a-big", "a").min(1).phase("Running").running(["n1"] * 8, cpu=1),
        job("b-new", "b").min(1).created(5).tasks(1, cpu=2),
    ]
    d = Scheduler(parse_conf(CAPACITY_CONF)).cycle(snapshot([node("n1").cpu(8).mem("32Gi")], queues, jobs))
    assert len(d.evictions) == 2 and {e.reason for e in d.evictions} == {"reclaim"}


def test_capacity_capability_makes_enqueue_reject():
    queues = [queue("a").deserved(cpu=1).capability(cpu=2)]
    jobs = [job("big", "a").phase("Pending").min(1).min_resources(cpu=3).tasks(1, cpu=3)]
    d = Scheduler(parse_conf(CAPACITY_CONF)).cycle(snapshot([node("n1").cpu(8).mem("32Gi")], queues, jobs))
    assert d.podgroup_phases["big"] == "Pending"


def test_capacity_best_effort_queue_goes_last():
    queues = [queue("be").created(0), queue("paid").deserved(cpu=4).created(1)]
    jobs = [job("x", "be").min(1).tasks(1, cpu=4), job("y", "paid").min(1).tasks(1, cpu=4)]
    d = Scheduler(parse_conf(CAPACITY_CONF)).cycle(snapshot([node("n1").cpu(4).mem("32Gi")], queues, jobs))
    assert [b.task for b in d.binds] == ["y-task-0"]


def tree():
    return [
        queue("root"),
        queue("eng").capability(cpu=4).deserved(cpu=4),
        queue("eng-a").parent("eng"),
        queue("eng-b").parent("eng").deserved(cpu=2),
        queue("research").deserved(cpu=4),
    ]


def test_hierarchy_parent_capability_bounds_children():
    jobs = [job(f"a{i}", "eng-a").min(1).created(i).tasks(1, cpu=1) for i in range(6)]
    d = Scheduler(parse_conf(HIER_CONF)).cycle(snapshot([node("n1").cpu(16).mem("64Gi")], tree(), jobs))
    assert len(d.binds) == 4


def test_hierarchy_job_in_non_leaf_queue_blocks_the_session():
    jobs = [job("leaf", "eng-a").min(1).tasks(1, cpu=1), job("inner", "eng").min(1).tasks(1, cpu=1)]
    d = Scheduler(parse_conf(HIER_CONF)).cycle(snapshot([node("n1").cpu(16).mem("64Gi")], tree(), jobs))
    assert d.binds == []


def test_hierarchy_siblings_are_reclaimed_before_cousins():
    nodes = [node("n1").cpu(8).mem("64Gi")]
    jobs = [
        job("sib", "eng-a").min(1).phase("Running").running(["n1"] * 4, cpu=1),
        job("cousin", "research").min(1).phase("Running").running(["n1"] * 4, cpu=1),
        job("need", "eng-b").min(1).created(5).tasks(1, cpu=1),
    ]
    queues = [
        queue("root"),
        queue("eng").capability(cpu=8).deserved(cpu=4),
        queue("eng-a").parent("eng"),
        queue("eng-b").parent("eng").deserved(cpu=2),
        queue("research").deserved(cpu=1),
    ]
    d = Scheduler(parse_conf(HIER_CONF)).cycle(snapshot(nodes, queues, jobs))
    assert [e.task.split("-")[0] for e in d.evictions] == ["sib"]


@pytest.mark.parametrize(("level", "evictions"), [(0, 0), (1, 1)], ids=["leaf-only", "ancestor-level-1"])
def test_hierarchy_ancestor_reclaim_level(level, evictions):
    conf = HIER_CONF.replace(
        "{name: capacity, enableHierarchy: true}",
        f"{{name: capacity, enableHierarchy: true, arguments: {{ancestorReclaimLevel: {level}}}}}",
    )
    queues = [
        queue("root"),
        queue("eng").deserved(cpu=6).capability(cpu=8),
        queue("eng-b").parent("eng").deserved(cpu=1),
        queue("research").deserved(cpu=2),
    ]
    jobs = [
        job("res", "research").min(1).phase("Running").running(["n1"] * 7, cpu=1),
        job("b-run", "eng-b").min(1).phase("Running").running(["n1"], cpu=1),
        job("b-new", "eng-b").min(1).created(5).tasks(1, cpu=1),
    ]
    d = Scheduler(parse_conf(conf)).cycle(snapshot([node("n1").cpu(8).mem("32Gi")], queues, jobs))
    assert len(d.evictions) == evictions


def test_hierarchy_with_missing_parent_falls_back_to_root():
    queues = [queue("orphan").parent("ghost").deserved(cpu=2)]
    d = Scheduler(parse_conf(HIER_CONF)).cycle(
        snapshot([node("n1").cpu(4).mem("8Gi")], queues, [job("j", "orphan").min(1).tasks(1, cpu=1)])
    )
    assert [b.task for b in d.binds] == ["j-task-0"]


def test_hierarchy_parent_cycle_does_not_hang():
    queues = [queue("x").parent("y"), queue("y").parent("x")]
    d = Scheduler(parse_conf(HIER_CONF)).cycle(
        snapshot([node("n1").cpu(4).mem("8Gi")], queues, [job("j", "x").min(1).tasks(1, cpu=1)])
    )
    assert d.podgroup_phases["j"] in ("Inqueue", "Pending")


@pytest.mark.parametrize(
    ("plugin", "limit"),
    [("capacity", "capability"), ("proportion", "deserved share")],
    ids=["capacity", "proportion"],
)
def test_a_task_its_queue_quota_turns_away_says_which_resource_ran_out(plugin, limit):
    conf = f'actions: "allocate"\ntiers:\n- plugins: [{{name: gang}}, {{name: {plugin}}}]\n'
    queues = [queue("q").deserved(cpu=1).capability(cpu=1)]
    jobs = [job("j", "q").phase("Inqueue").min(2).tasks(2, cpu=1)]
    d = Scheduler(parse_conf(conf)).cycle(snapshot([node("n1").cpu(8).mem("16Gi")], queues, jobs))
    assert not d.binds
    assert d.unschedulable["j"] == (
        f"2/2 tasks in gang unschedulable: queue: queue q quota does not admit j-task-1: its {limit} is reached on cpu"
    )
