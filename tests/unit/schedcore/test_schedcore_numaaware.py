"""numa-aware: a task's topologyPolicy against the NUMA layout its nodes declare (Volcano's plugin)."""

from __future__ import annotations

import numpy as np
import pytest

from hyperjob.schedcore import DEFAULT_CONF_TEXT, Scheduler, parse_conf
from hyperjob.schedcore.plugins.numaaware import choose
from hyperjob.schedcore.testing import job, node, queue, snapshot

CONF = DEFAULT_CONF_TEXT + "  - name: numa-aware\n    arguments: {weight: 10}\n"


def numa(name, cpus=(8, 8), policy="single-numa-node", manager="static"):
    labels = {
        "numa.hyperjob.io/cpus": ",".join(str(c) for c in cpus),
        "numa.hyperjob.io/topology-manager-policy": policy,
        "numa.hyperjob.io/cpu-manager-policy": manager,
    }
    return node(name).cpu(sum(cpus)).mem("64Gi").pods(20).labels(labels)


def placed(nodes, jobs, conf=CONF):
    decision = Scheduler(parse_conf(conf)).cycle(snapshot(nodes, [queue("default")], jobs))
    return {b.task: b.node for b in decision.binds}


@pytest.mark.parametrize(
    ("free", "cpus", "policy", "expected"),
    [
        ([8, 8], 6, "single-numa-node", (0,)),
        ([4, 8], 6, "single-numa-node", (1,)),
        ([5, 5], 6, "single-numa-node", None),  # 10 free, but on no one NUMA node
        ([5, 5], 6, "restricted", None),  # 6 fits one 8-CPU NUMA node: 2 nodes are not preferred
        ([8, 8], 12, "restricted", (0, 1)),  # 12 needs 2 NUMA nodes anyway
        ([5, 5], 6, "best-effort", (0, 1)),  # admitted, across both
        ([1, 1], 6, "best-effort", ()),  # admitted with no NUMA set that fits
    ],
)
def test_policies_choose_numa_nodes_as_the_kubelets_topology_manager(free, cpus, policy, expected):
    assert choose(np.array(free, dtype=float), (8.0, 8.0), cpus, policy) == expected


def test_single_numa_node_leaves_a_pod_pending_when_cpus_are_split_across_numa_nodes():
    # Each 16-CPU node has two NUMA nodes of 8: two 5-CPU pods take 5 on each, 3 + 3 left.
    jobs = [
        job("a").tasks(2, cpu=5, topology_policy="single-numa-node"),
        job("b").tasks(1, cpu=6, topology_policy="single-numa-node"),
    ]
    binds = placed([numa("n1")], jobs)
    assert set(binds) == {"a-task-0", "a-task-1"}  # b would fit the node's 6 free CPUs, not one NUMA node


def test_without_the_plugin_the_same_pods_all_run():
    jobs = [
        job("a").tasks(2, cpu=5, topology_policy="single-numa-node"),
        job("b").tasks(1, cpu=6, topology_policy="single-numa-node"),
    ]
    assert set(placed([numa("n1")], jobs, DEFAULT_CONF_TEXT)) == {"a-task-0", "a-task-1", "b-task-0"}


def test_a_task_with_a_policy_needs_a_node_with_the_same_policy_and_a_static_cpu_manager():
    nodes = [
        node("plain").cpu(16).mem("64Gi").pods(20),
        numa("other", policy="best-effort"),
        numa("shared", manager="none"),
        numa("match"),
    ]
    assert placed(nodes, [job("j").tasks(1, cpu=2, topology_policy="single-numa-node")]) == {"j-task-0": "match"}


def test_pods_without_a_policy_are_not_concerned():
    nodes = [node("plain").cpu(4).mem("64Gi").pods(20)]
    assert placed(nodes, [job("j").tasks(1, cpu=2)]) == {"j-task-0": "plain"}


def test_running_pods_hold_their_numa_cpus_when_the_session_opens():
    running = job("r").tasks(1, cpu=7, status="Running", nodes=["n1"], topology_policy="single-numa-node")
    pending = job("p").tasks(2, cpu=7, topology_policy="single-numa-node").min(1)
    binds = placed([numa("n1")], [running, pending])
    assert list(binds) == ["p-task-0"]  # NUMA 0 holds r's 7: one more 7-CPU pod fits, on NUMA 1


def test_score_prefers_the_node_where_the_pod_spans_fewer_numa_nodes():
    nodes = [numa("small", cpus=(4, 4, 4, 4), policy="best-effort"), numa("big", cpus=(8, 8), policy="best-effort")]
    assert placed(nodes, [job("j").tasks(1, cpu=6, topology_policy="best-effort")]) == {"j-task-0": "big"}
