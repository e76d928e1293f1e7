"""allocate + gang + predicates + node scoring, one cycle at a time."""

from __future__ import annotations

import pytest

from hyperjob.api.pod import Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm
from hyperjob.schedcore import DEFAULT_CONF_TEXT, Scheduler, parse_conf
from hyperjob.schedcore.testing import job, node, queue, snapshot

BINPACK_CONF = DEFAULT_CONF_TEXT + "  - name: binpack\n"


def run(conf_text, nodes, jobs, queues=None):
    return Scheduler(parse_conf(conf_text)).cycle(snapshot(nodes, queues or [queue("default")], jobs))


def bound(decision):
    return {b.task: b.node for b in decision.binds}


def small(name, cpu=4):
    return node(name).cpu(cpu).mem("16Gi").pods(10)


@pytest.mark.parametrize(
    ("replicas", "min_member", "expected_binds"),
    [
        (4, 4, 0),  # gang cannot be met: nothing is bound
        (4, 2, 3),  # 3 fit, minMember 2 met: the 3 that fit are bound
        (3, 3, 3),
    ],
    ids=["gang-all-or-nothing", "gang-partial-above-min", "gang-fits"],
)
def test_gang_commit_rule(replicas, min_member, expected_binds):
    d = run(
        DEFAULT_CONF_TEXT,
        [small("n1"), small("n2"), small("n3")],
        [job("j", "default").min(min_member).tasks(replicas, cpu=4)],
    )
    assert len(d.binds) == expected_binds
    if expected_binds == 0:
        assert d.unschedulable["j"].startswith(f"{min_member}/{replicas} tasks in gang unschedulable")


def test_pipelined_gang_holds_resources_but_binds_nothing():
    # n1 has 2 cpu idle and 2 cpu releasing: the second task pipelines onto releasing resources.
    n = [small("n1", 4)]
    rb = job("old", "default").min(1).tasks(1, status="Releasing", nodes=["n1"], cpu=2).build()
    gang = job("g", "default").min(2).tasks(2, cpu=2)
    other = job("late", "default").min(1).created(5).tasks(1, cpu=2)
    d = Scheduler(parse_conf(DEFAULT_CONF_TEXT)).cycle(snapshot(n, [queue("default")], [rb, gang, other]))
    assert d.binds == []  # the gang is pipelined (kept, not bound); "late" finds no room left


@pytest.mark.parametrize(
    ("nodes", "task_kw", "expected"),
    [
        ([small("a").label(zone="x"), small("b").label(zone="y")], {"node_selector": {"zone": "y"}}, "b"),
        ([small("a").taint("dedicated", "gpu"), small("b")], {}, "b"),
        (
            [small("a").taint("dedicated", "gpu"), small("b").cpu(1)],
            {"tolerations": [{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]},
            "a",
        ),
        ([small("a").cordon(), small("b").cpu(2)], {}, "b"),
        ([small("a").not_ready(), small("b").cpu(2)], {}, "b"),
        ([small("a"), small("b").cpu(2)], {"node_name": "b"}, "b"),
        ([small("a").pods(0), small("b").cpu(2)], {}, "b"),
        ([small("a").taint("soft", effect="PreferNoSchedule"), small("b")], {}, "b"),
    ],
    ids=[
        "node-selector",
        "taint-not-tolerated",
        "taint-tolerated",
        "cordoned",
        "not-ready",
        "node-name",
        "pods-slot-exhausted",
        "prefer-no-schedule-scored-down",
    ],
)
def test_predicates(nodes, task_kw, expected):
    d = run(DEFAULT_CONF_TEXT, nodes, [job("j").min(1).tasks(1, cpu=1, **task_kw)])
    assert bound(d) == {"j-task-0": expected}


@pytest.mark.parametrize(
    ("operator", "values", "expected"),
    [
        ("In", ["h100"], "b"),
        ("NotIn", ["h100"], "a"),
        ("Exists", [], "b"),
        ("DoesNotExist", [], "a"),
        ("Gt", ["40"], "b"),
        ("Lt", ["40"], "a"),
    ],
    ids=["in", "not-in", "exists", "does-not-exist", "gt", "lt"],
)
def test_required_node_affinity(operator, values, expected):
    nodes = [small("a").labels({"mem-gb": "32"}), small("b").labels({"gpu": "h100", "mem-gb": "80"})]
    key = "mem-gb" if operator in ("Gt", "Lt") else "gpu"
    aff = Affinity(
        node_affinity=NodeAffinity(
            required_during_scheduling_ignored_during_execution=NodeSelector(
                node_selector_terms=[
                    NodeSelectorTerm(
                        match_expressions=[NodeSelectorRequirement(key=key, operator=operator, values=values)]
                    )
                ]
            )
        )
    )
    d = run(DEFAULT_CONF_TEXT, nodes, [job("j").min(1).tasks(1, cpu=1, affinity=aff)])
    assert bound(d) == {"j-task-0": expected}


def _gpu(name, gpus=8):
    return small(name).gpus(gpus)


@pytest.mark.parametrize(
    ("nodes", "task_kw", "expected"),
    [
        ([small("a"), small("b")], {"cpu": 5}, "0/2 nodes are available: 2 Insufficient cpu"),
        (
            [small("a", cpu=1), _gpu("b", 1), _gpu("c").not_ready(), _gpu("d", 2).cpu(1)],
            {"cpu": 2, "nvidia.com/gpu": 2},
            "0/4 nodes are available: 2 Insufficient cpu, 2 Insufficient nvidia.com/gpu, 1 node(s) were NotReady",
        ),
        (
            [small("a").taint("dedicated", "gpu"), small("b").cordon(), small("c").label(zone="x"), small("d").pods(0)],
            {"cpu": 1, "node_selector": {"zone": "y"}},
            "0/4 nodes are available: 2 node(s) didn't match Pod's node affinity/selector, "
            "1 node(s) had untolerated taint {dedicated: gpu}, 1 node(s) were unschedulable",
        ),
        (
            [small("a"), small("b").pods(0)],
            {"cpu": 1, "node_name": "b"},
            "0/2 nodes are available: 1 Too many pods, 1 node(s) didn't match the requested node name",
        ),
    ],
    ids=["insufficient-cpu", "resources-and-not-ready", "static-filters-first-wins", "node-name-then-pods"],
)
def test_no_node_fits_says_why_per_node(nodes, task_kw, expected):
    # kube-scheduler's FitError: each node counted under the first filter that rules it out,
    # every short resource of a node that passes the static filters counted.
    d = run(DEFAULT_CONF_TEXT, nodes, [job("j").min(1).tasks(1, **task_kw)])
    assert d.binds == []
    assert d.unschedulable["j"] == f"1/1 tasks in gang unschedulable: task: {expected}"


def test_invalid_gang_reason_is_the_rejecting_plugins():
    d = run(DEFAULT_CONF_TEXT, [small("a")], [job("j").min(3).tasks(2, cpu=1)])
    assert "NotEnoughPods: not enough valid tasks for gang-scheduling, valid: 2, min: 3" in d.unschedulable["j"]


def test_task_beyond_queue_deserved_is_not_allocatable():
    d = run(DEFAULT_CONF_TEXT, [small("a")], [job("j").min(1).tasks(1, cpu=8)])
    assert d.binds == [] and "quota" in d.unschedulable["j"]


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        (DEFAULT_CONF_TEXT, {"j0-task-0": "a", "j1-task-0": "b", "j2-task-0": "c"}),
        (BINPACK_CONF.replace("  - name: nodeorder\n", ""), {"j0-task-0": "a", "j1-task-0": "a", "j2-task-0": "a"}),
    ],
    ids=["nodeorder-spreads", "binpack-packs"],
)
def test_binpack_vs_nodeorder(conf, expected):
    # Single-pod jobs so each placement sees the previous one.
    jobs = [job(f"j{i}").min(1).created(i).tasks(1, cpu=1) for i in range(3)]
    assert bound(run(conf, [small("a", 8), small("b", 8), small("c", 8)], jobs)) == expected


def test_binpack_prefers_fuller_node():
    conf = BINPACK_CONF.replace("  - name: nodeorder\n", "")
    existing = job("old").min(1).phase("Running").running(["b"], cpu=6)
    d = run(conf, [small("a", 8), small("b", 8)], [existing, job("new").min(1).tasks(1, cpu=1)])
    assert bound(d) == {"new-task-0": "b"}


def test_best_effort_pods_go_through_backfill():
    d = run(DEFAULT_CONF_TEXT, [small("a")], [job("be").min(1).tasks(2)])
    assert len(d.binds) == 2


def test_closed_queue_gets_nothing_new():
    d = run(DEFAULT_CONF_TEXT, [small("a")], [job("j", "q").min(1).tasks(1, cpu=1)], [queue("q").state("Closed")])
    assert d.binds == []


def test_jobs_in_unknown_queue_are_ignored():
    d = run(DEFAULT_CONF_TEXT, [small("a")], [job("j", "ghost").min(1).tasks(1, cpu=1)])
    assert d.binds == [] and d.podgroup_phases["j"] == "Inqueue"


def test_min_task_member_blocks_gang_when_a_role_cannot_fit():
    j = job("j").min(3).min_task(ps=1, worker=2).tasks(1, role="ps", cpu=1).tasks(2, role="worker", cpu=1, gpu=1)
    d = run(DEFAULT_CONF_TEXT, [small("a")], [j])
    assert d.binds == []


def test_higher_priority_job_placed_first_when_room_for_one():
    jobs = [job("low").priority(1).min(1).tasks(1, cpu=4), job("high").priority(10).min(1).created(5).tasks(1, cpu=4)]
    assert bound(run(DEFAULT_CONF_TEXT, [small("a")], jobs)) == {"high-task-0": "a"}


def test_nominated_node_is_tried_first():
    j = job("j").min(1).tasks(1, cpu=1, nominated_node="c")
    assert bound(run(DEFAULT_CONF_TEXT, [small("a"), small("b"), small("c")], [j])) == {"j-task-0": "c"}


def test_same_snapshot_same_decision():
    nodes = [small(f"n{i}", 8) for i in range(6)]
    jobs = [job(f"j{i}").min(2).created(i % 3).tasks(3, cpu=1 + i % 3) for i in range(8)]
    snap = snapshot(nodes, [queue("default")], jobs)
    sched = Scheduler(parse_conf(BINPACK_CONF))
    assert sched.cycle(snap) == sched.cycle(snap)


def test_vgpu_needs_distinct_devices_with_enough_cores():
    nodes = [node("a").cpu(16).mem("64Gi").gpus(1), node("b").cpu(16).mem("64Gi").gpus(2)]
    j = job("j").min(1).tasks(1, cpu=1, vgpu=2, vgpu_cores=50)
    assert bound(run(DEFAULT_CONF_TEXT, nodes, [j])) == {"j-task-0": "b"}


def test_vgpu_sharing_fills_device_cores():
    nodes = [node("a").cpu(16).mem("64Gi").gpus(1)]
    jobs = [job(f"j{i}").min(1).created(i).tasks(1, cpu=1, vgpu=1, vgpu_cores=40) for i in range(3)]
    assert len(run(DEFAULT_CONF_TEXT, nodes, jobs).binds) == 2


@pytest.mark.parametrize(
    ("min_member", "expected"),
    [
        (2, ["j-small-0", "j-small-1"]),  # a task finds no node: continue, the others still fit
        (3, []),  # minMember = #tasks: stop at the first failure, discard
    ],
    ids=["continue-after-misfit", "stop-when-min-is-all"],
)
def test_need_continue_allocating(min_member, expected):
    j = job("j").min(min_member).tasks(1, role="big", cpu=8).tasks(2, role="small", cpu=1)
    d = run(DEFAULT_CONF_TEXT, [small("a", 4), small("b", 4)], [j])
    assert sorted(b.task for b in d.binds) == expected


@pytest.mark.parametrize(
    ("vip_priority", "order"),
    [
        (0, ["p-task-0", "v-task-0"]),
        (10, ["v-task-0", "p-task-0"]),
    ],
    ids=["equal-priority-older-queue-first", "queue-priority-first"],
)
def test_queue_priority_orders_queues(vip_priority, order):
    queues = [queue("vip").priority(vip_priority).created(5), queue("plain")]
    jobs = [job("p", "plain").min(1).tasks(1, cpu=4), job("v", "vip").min(1).created(3).tasks(1, cpu=4)]
    d = run(DEFAULT_CONF_TEXT, [small("a", 8)], jobs, queues)
    assert [b.task for b in d.binds] == order
