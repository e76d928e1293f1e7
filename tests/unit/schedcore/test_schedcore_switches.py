"""Per-plugin hook switches and scoring arguments change outcomes the way Volcano's do."""

from __future__ import annotations

import pytest

from hyperjob.schedcore import DEFAULT_CONF_TEXT, Scheduler, parse_conf
from hyperjob.schedcore.testing import job, node, queue, snapshot


def binds(conf_text, nodes, jobs, queues=None):
    d = Scheduler(parse_conf(conf_text)).cycle(snapshot(nodes, queues or [queue("default")], jobs))
    return [(b.task, b.node) for b in d.binds]


def one_slot():
    return [node("n1").cpu(4).mem("16Gi").taint("dedicated", "x")]


def test_priority_job_order_switch():
    jobs = [job("low").priority(1).min(1).tasks(1, cpu=4), job("high").priority(9).min(1).created(1).tasks(1, cpu=4)]
    nodes = [node("n1").cpu(4).mem("16Gi")]
    assert binds(DEFAULT_CONF_TEXT, nodes, jobs) == [("high-task-0", "n1")]
    off = DEFAULT_CONF_TEXT.replace("  - name: priority\n", "  - name: priority\n    enableJobOrder: false\n")
    assert binds(off, nodes, jobs) == [("low-task-0", "n1")]


def test_predicate_switch_off_ignores_taints():
    jobs = [job("j").min(1).tasks(1, cpu=1)]
    assert binds(DEFAULT_CONF_TEXT, one_slot(), jobs) == []
    off = DEFAULT_CONF_TEXT.replace("  - name: predicates\n", "  - name: predicates\n    enablePredicate: false\n")
    assert binds(off, one_slot(), jobs) == [("j-task-0", "n1")]


def test_proportion_overused_switch():
    # Queue a already uses all it deserves in every dimension, pods included (hence the pods
    # capability: a pending pod otherwise raises deserved pods above allocated). Overused drops
    # the queue, so its next job waits even with allocatable off; with overused off it runs.
    nodes = [node("n1").cpu(10).mem("16Gi")]
    jobs = [
        job("run", "a").min(1).phase("Running").running(["n1"], cpu=5),
        job("more", "a").min(1).tasks(1, cpu=1),
        job("b", "b").min(1).tasks(1, cpu=2),
    ]
    queues = [queue("a").capability(cpu=5, pods=1), queue("b")]
    conf = DEFAULT_CONF_TEXT.replace("  - name: proportion\n", "  - name: proportion\n    enabledAllocatable: false\n")
    assert ("more-task-0", "n1") not in binds(conf, nodes, jobs, queues)
    off = conf.replace("enabledAllocatable: false\n", "enabledAllocatable: false\n    enabledOverused: false\n")
    assert ("more-task-0", "n1") in binds(off, nodes, jobs, queues)


def test_gang_job_ready_switch_off_commits_partial_gangs():
    nodes = [node("n1").cpu(4).mem("16Gi")]
    jobs = [job("g").min(2).tasks(2, cpu=3)]
    assert binds(DEFAULT_CONF_TEXT, nodes, jobs) == []
    off = DEFAULT_CONF_TEXT.replace("  - name: gang\n", "  - name: gang\n    enableJobReady: false\n")
    assert binds(off, nodes, jobs) == [("g-task-0", "n1")]


def test_drf_orders_jobs_by_dominant_share():
    nodes = [node("n1").cpu(7).mem("16Gi")]
    jobs = [
        job("rich").min(1).phase("Running").running(["n1"], cpu=4).tasks(1, cpu=3),
        job("poor").min(1).created(5).tasks(1, cpu=3),
    ]
    assert binds(DEFAULT_CONF_TEXT, nodes, jobs) == [("poor-task-0", "n1")]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ("{}", "spread"),
        ("{leastrequested.weight: 0, balancedresource.weight: 0, mostrequested.weight: 1}", "pack"),
    ],
    ids=["least-requested-spreads", "most-requested-packs"],
)
def test_nodeorder_weights(arguments, expected):
    conf = DEFAULT_CONF_TEXT.replace("  - name: nodeorder\n", f"  - name: nodeorder\n    arguments: {arguments}\n")
    nodes = [node("a").cpu(8).mem("16Gi"), node("b").cpu(8).mem("16Gi")]
    jobs = [job("old").min(1).phase("Running").running(["a"], cpu=4), job("new").min(1).tasks(1, cpu=1)]
    assert binds(conf, nodes, jobs) == [("new-task-0", "b" if expected == "spread" else "a")]


def test_binpack_resource_weight_prefers_fuller_gpu_node():
    conf = DEFAULT_CONF_TEXT.replace("  - name: nodeorder\n", "") + (
        "  - name: binpack\n    arguments: {binpack.cpu: 0, binpack.memory: 0, binpack.resources: nvidia.com/gpu, "
        "binpack.resources.nvidia.com/gpu: 5}\n"
    )
    nodes = [node("a").cpu(64).mem("64Gi").gpus(8), node("b").cpu(64).mem("64Gi").gpus(8)]
    jobs = [job("old").min(1).phase("Running").running(["b"], cpu=1, gpu=6), job("new").min(1).tasks(1, cpu=1, gpu=1)]
    assert binds(conf, nodes, jobs) == [("new-task-0", "b")]
