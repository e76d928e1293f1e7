"""Trace replay (``hyperjob bench placement``): parsing, the artifact's workload, the curves."""

from __future__ import annotations

import numpy as np
import pytest

from hyperjob.schedcore import Scheduler, trace, tracebench
from hyperjob.schedcore.resources import GPU, VGPU_CORES, VGPU_NUMBER

NODES = """sn,cpu_milli,memory_mib,gpu,model
n-a,32000,131072,4,V100
n-b,32000,131072,4,V100
n-c,64000,262144,2,T4
n-d,16000,65536,0,
"""
PODS = """name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec
p-share,4000,8192,1,500,
p-share2,2000,4096,1,250,
p-one,8000,16384,1,1000,
p-two,12000,32768,2,1000,V100
p-t4,4000,8192,1,1000,T4
p-cpu,6000,8192,0,0,
"""


def test_pods_become_vgpu_shares_whole_gpus_and_model_affinity():
    nodes, pods = trace.parse_nodes(NODES), trace.parse_pods(PODS)
    snap = trace.snapshot(nodes, [n.name for n in nodes], pods, list(range(len(pods))))
    tasks = {t.name.split("-", 1)[1]: t for j in snap.jobs for t in j.tasks}
    assert tasks["p-share"].request[VGPU_NUMBER] == 1 and tasks["p-share"].request[VGPU_CORES] == 50
    assert tasks["p-one"].request[GPU] == 1 and VGPU_NUMBER not in tasks["p-one"].request
    assert tasks["p-cpu"].request == {"cpu": 6.0, "memory": 8192 * 2.0**20}
    term = tasks[
        "p-two"
    ].affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms[0]
    assert (term.match_expressions[0].key, term.match_expressions[0].values) == (trace.GPU_MODEL_LABEL, ["V100"])
    assert {n.name: n.labels for n in snap.nodes}["n-c"] == {trace.GPU_MODEL_LABEL: "T4"}
    assert [j.created for j in snap.jobs] == sorted(j.created for j in snap.jobs)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name,cpu_milli,memory_mib,num_gpu\np,1,1,0\n", "missing column 'gpu_milli'"),
        ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,x,1,0,0\n", "pods line 2: cpu_milli: not a number: 'x'"),
        (
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1,1500\n",
            "pods line 2: gpu_milli: must be between 0 and 1000",
        ),
        ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,2,0\n", "pods line 2: gpu_milli: a pod with num_gpu 2"),
        ("name,cpu_milli,memory_mib,num_gpu,gpu_milli\n", "pods: no rows"),
    ],
    ids=["missing-column", "not-a-number", "over-one-gpu", "gpu-without-milli", "empty"],
)
def test_bad_pod_lists_name_line_and_column(text, message):
    with pytest.raises(trace.TraceError, match=message):
        trace.parse_pods(text)


def test_duplicate_nodes_are_rejected():
    with pytest.raises(trace.TraceError, match="node 'n-a' is listed twice"):
        trace.parse_nodes(NODES + "n-a,1,1,1,V100\n")


@pytest.mark.parametrize("demand", [0.5, 1.3, 3.0])
def test_workload_reaches_the_demand_and_depends_only_on_the_seed(demand):
    nodes, pods = trace.parse_nodes(NODES), trace.parse_pods(PODS)
    capacity = trace.total_gpu_milli(nodes)
    arrivals = trace.workload(pods, capacity, demand, seed=7)
    total = sum(pods[i].gpu_request_milli for i in arrivals)
    assert total <= demand * capacity
    assert total > demand * capacity - 2000  # the next draw would have passed it (largest pod: 2 GPUs)
    if demand >= 1.0:  # every pod of the list once, then draws
        assert sorted(arrivals[: len(pods)]) == list(range(len(pods)))
    assert arrivals == trace.workload(pods, capacity, demand, seed=7)
    assert arrivals != trace.workload(pods, capacity, demand, seed=8)


def test_node_names_give_a_seeded_tie_order():
    nodes = trace.parse_nodes(NODES)
    names = trace.node_names(nodes, 3)
    assert [n.split("-", 1)[1] for n in names] == [n.name for n in nodes]
    assert sorted(int(n.split("-", 1)[0]) for n in names) == list(range(len(nodes)))
    assert {tuple(trace.node_names(nodes, seed)) for seed in range(10)} != {tuple(names)}


@pytest.mark.parametrize("policy", tracebench.POLICIES)
def test_replay_curves_follow_the_contract(policy):
    nodes, pods = trace.parse_nodes(NODES), trace.parse_pods(PODS)
    r = tracebench.run(nodes, pods, tracebench.policy_conf(policy, 1), policy, seed=1, demand=1.3)
    assert (r.policy, r.seed, r.total_gpus, r.nodes) == (policy, 1, 10, 4)
    assert len(r.gpu_allocation_percent) == len(r.gpu_fragmentation_percent) == 131
    assert r.pods_scheduled + r.pods_skipped == r.pods_arrived and r.pods_skipped > 0
    alloc = np.array(r.gpu_allocation_percent)
    assert (np.diff(alloc) >= -1e-9).all() and 0 < alloc[-1] <= 100
    assert all(0 <= f <= 100 for f in r.gpu_fragmentation_percent)
    # Before anything can fail, what arrived is what is allocated.
    assert alloc[10] == pytest.approx(10, abs=5)


def test_replay_packs_halves_so_that_a_whole_node_stays_free_for_2_gpu_pods():
    # Two 2-GPU nodes; half-GPU pods, then 2-GPU pods. Spreading the halves over both nodes
    # leaves no node for a 2-GPU pod; packing them on one node keeps the other whole.
    nodes = trace.parse_nodes("sn,cpu_milli,memory_mib,gpu,model\na,64000,262144,2,X\nb,64000,262144,2,X\n")
    pods = trace.parse_pods(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
        + "".join(f"h{i},1000,1024,1,500\n" for i in range(4))
        + "".join(f"w{i},1000,1024,2,1000\n" for i in range(4))
    )
    arrivals = [0, 1, 4, 2, 3, 5]  # two halves, a 2-GPU pod, two halves, a 2-GPU pod
    snap = trace.snapshot(nodes, [n.name for n in nodes], pods, arrivals)
    decision = Scheduler(tracebench.policy_conf("gpufrag", 5)).cycle(snap)
    placed = [arrivals[int(b.job[1:])] for b in decision.binds]
    assert sum(pods[i].gpu_request_milli for i in placed) == 4000  # the whole fleet
