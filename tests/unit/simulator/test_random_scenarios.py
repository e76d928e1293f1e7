"""Seeded random scenarios: no crash, byte-identical reruns, and the world's invariants hold.

The generator mixes every event type (jobs with durations, exit codes and restart policies,
HyperJobs, node and cluster outages, pod failures, commands, deletes) so the drivers meet
combinations no hand-written scenario covers.
"""

from __future__ import annotations

import asyncio
import random

import pytest
import yaml

from hyperjob import simulator
from hyperjob.simulator.engine import Engine
from hyperjob.simulator.scenario import load

POD_PHASES = {"Pending", "Running", "Succeeded", "Failed"}
JOB_PHASES = {
    "Pending",
    "Aborting",
    "Aborted",
    "Running",
    "Restarting",
    "Completing",
    "Completed",
    "Terminating",
    "Terminated",
    "Failed",
}
PG_PHASES = {"Pending", "Inqueue", "Running", "Unknown", "Completed"}
HJ_PHASES = {"Pending", "Admitted", "Running", "Suspended", "Restarting", "Completed", "Failed", "Terminating"}


def _job(r: random.Random, name: str) -> dict:
    template: dict = {
        "spec": {
            "restartPolicy": r.choice(["Never", "OnFailure", "Always"]),
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "resources": {"requests": {"cpu": str(r.randint(1, 3)), "nvidia.com/gpu": str(r.randint(0, 2))}},
                }
            ],
        }
    }
    annotations = {}
    if r.random() < 0.6:
        annotations["hyperjob.io/sim-duration"] = f"{r.randint(3, 40)}s"
    if r.random() < 0.3:
        annotations["hyperjob.io/sim-exit-code"] = str(r.choice([0, 1, 137]))
    if annotations:
        template["metadata"] = {"annotations": annotations}
    spec: dict = {"tasks": [{"name": "w", "replicas": r.randint(1, 4), "template": template}]}
    if r.random() < 0.4:
        spec["policies"] = [
            {
                "event": r.choice(["PodFailed", "PodEvicted", "TaskFailed"]),
                "action": r.choice(["RestartJob", "AbortJob", "TerminateJob", "CompleteJob"]),
            }
        ]
    if r.random() < 0.3:
        spec["minAvailable"] = 1
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


def _hyperjob(r: random.Random, name: str, clusters: list[str]) -> dict:
    job = _job(r, "t")
    total = job["spec"]["tasks"][0]["replicas"] + r.randint(0, 4)
    job["spec"]["tasks"][0]["replicas"] = total
    job["spec"].pop("minAvailable", None)
    if len(clusters) > 1 and r.random() < 0.5:
        first = r.randint(0, total)
        split = {
            "strategy": "ByCluster",
            "clusters": [{"name": clusters[0], "replicas": first}, {"name": clusters[1], "replicas": total - first}],
        }
    else:
        split = {"mode": r.choice(["auto", "static"])}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "HyperJob",
        "metadata": {"name": name},
        "spec": {
            "template": {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "spec": job["spec"]},
            "splitPolicy": split,
        },
    }


def scenario(seed: int) -> str:
    r = random.Random(seed)
    clusters = [f"c{i}" for i in range(r.randint(1, 2))]
    nodes = {c: [f"{c}n{j}" for j in range(r.randint(1, 3))] for c in clusters}
    events: list[dict] = []
    names: list[str] = []
    for i in range(r.randint(3, 20)):
        event = _event(r, i, clusters, nodes, names)
        if event is not None:
            events.append({"at": f"{r.randint(0, 90)}s", **event})
    for job in (e["create"] for e in events if "create" in e and e["create"]["kind"] in ("Job", "HyperJob")):
        spec = job["spec"]["template"]["spec"] if job["kind"] == "HyperJob" else job["spec"]
        spec["queue"] = r.choice(["default", "q1", "q2"])
        if r.random() < 0.3:
            spec["priorityClassName"] = "high"
    doc = {
        "apiVersion": "hyperjob.io/v1alpha1",
        "kind": "Scenario",
        "metadata": {"name": f"random-{seed}"},
        "spec": {
            "schedulerConf": r.choice(CONFS),
            "clusters": [
                {
                    "name": c,
                    "nodes": [
                        {
                            "name": n,
                            "allocatable": {
                                "cpu": str(r.randint(2, 8)),
                                "memory": "16Gi",
                                "nvidia.com/gpu": str(r.choice([0, 4, 8])),
                            },
                        }
                        for n in nodes[c]
                    ],
                }
                for c in clusters
            ],
            "queues": [_queue(r, "q1"), _queue(r, "q2")],
            "priorityClasses": [{"name": "high", "value": 100}],
            "events": events,
            "until": "150s",
            "schedulePeriod": r.choice([1, "500ms", "2s"]),
        },
    }
    return yaml.safe_dump(doc, sort_keys=False)


def _event(r: random.Random, i: int, clusters: list[str], nodes: dict[str, list[str]], names: list[str]) -> dict | None:
    kind = r.choice(
        ["job", "job", "job", "hyperjob", "node", "cluster", "fail", "command", "delete", "queue", "objects"]
    )
    if kind == "job":
        names.append(f"j{i}")
        return {"create": _job(r, f"j{i}")}
    if kind == "hyperjob":
        names.append(f"h{i}")
        return {"create": _hyperjob(r, f"h{i}", clusters)}
    if kind == "node":
        c = r.choice(clusters)
        return {r.choice(["nodeDown", "nodeUp"]): {"cluster": c, "node": r.choice(nodes[c])}}
    if kind == "cluster":
        return {r.choice(["clusterDown", "clusterUp"]): {"cluster": r.choice(clusters)}}
    if kind == "queue":
        if r.random() < 0.2:
            return {"delete": {"kind": "Queue", "name": r.choice(["q1", "q2", "root"])}}
        return {
            "command": {
                "kind": "Queue",
                "name": r.choice(["q1", "q2", "default"]),
                "action": r.choice(["open", "close"]),
            }
        }
    if kind == "objects":
        return {
            "create": r.choice(
                [
                    {
                        "apiVersion": "scheduling.volcano.sh/v1beta1",
                        "kind": "Queue",
                        "metadata": {"name": f"q{i}"},
                        "spec": {"weight": r.randint(1, 3), "parent": r.choice(["", "q1", "missing"])},
                    },
                    {
                        "apiVersion": "scheduling.volcano.sh/v1beta1",
                        "kind": "PodGroup",
                        "metadata": {"name": f"pg{i}"},
                        "spec": {
                            "minMember": r.randint(0, 2),
                            "queue": r.choice(["default", "q2"]),
                            "minResources": {"cpu": str(r.randint(1, 4))},
                        },
                    },
                    {
                        "apiVersion": "scheduling.k8s.io/v1",
                        "kind": "PriorityClass",
                        "metadata": {"name": f"pc{i}"},
                        "value": r.randint(1, 1000),
                        "globalDefault": r.random() < 0.5,
                    },
                ]
            )
        }
    if not names:
        return None
    target = r.choice(names)
    hj = target.startswith("h")
    if kind == "fail":
        return {"podFail": {"pod": f"{target}-w-0", "exitCode": 1}}
    if kind == "command":
        actions = (
            ["suspend", "resume", "abort", "restart"] if hj else ["abort", "resume", "restart", "terminate", "complete"]
        )
        return {"command": {"kind": "HyperJob" if hj else "Job", "name": target, "action": r.choice(actions)}}
    return {"delete": {"kind": "HyperJob" if hj else "Job", "name": target}}


CONFS = [
    'actions: "enqueue, allocate, backfill"\ntiers:\n- plugins: [{name: priority}, {name: gang}, {name: conformance}]\n'
    "- plugins: [{name: overcommit}, {name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder}]\n",
    'actions: "enqueue, allocate, preempt, reclaim, backfill"\ntiers:\n- plugins: [{name: priority}, {name: gang},'
    " {name: conformance}]\n- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: nodeorder},"
    " {name: binpack}]\n",
]


def _queue(r: random.Random, name: str) -> dict:
    spec: dict = {"weight": r.randint(1, 4)}
    if r.random() < 0.3:
        spec["capability"] = {"cpu": str(r.randint(2, 6))}
    if r.random() < 0.3:
        spec["reclaimable"] = False
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name}, "spec": spec}


@pytest.mark.parametrize("seed", range(24))
def test_random_scenario_runs_deterministically_and_keeps_invariants(seed: int) -> None:
    text = scenario(seed)
    engine = Engine(load(text))
    result = asyncio.run(engine.run())
    assert simulator.to_json(result) == simulator.to_json(simulator.run(text))
    times = [e["time"] for e in result["events"]]
    assert times == sorted(times)
    for pod in result["pods"]:
        assert pod["phase"] in POD_PHASES
        assert (pod["node"] is None) == (pod["phase"] == "Pending"), pod
    assert {j["phase"] for j in result["jobs"]} <= JOB_PHASES
    assert {g["phase"] for g in result["podGroups"]} <= PG_PHASES
    assert {h["phase"] for h in result["hyperJobs"]} <= HJ_PHASES
    _no_node_overcommitted(engine)


def _no_node_overcommitted(engine: Engine) -> None:
    """What the services booked on each node (the store's accounting) never exceeds it."""
    for cluster in engine.scenario.clusters:
        for node, usage in asyncio.run(engine.store.nodes(cluster.name)).items():
            for name, amount in usage.used.items():
                assert amount <= usage.allocatable.get(name, 0.0) + 1e-9, (cluster.name, node, name, amount)
