"""``hyperjob bench simulate``: how fast ``hyperjob simulate`` runs a fleet-sized scenario.

The scenario is generated (seeded): ``clusters`` clusters sharing ``nodes`` GPU nodes, and jobs
of ``pods`` pods in all arriving over the first half of ``duration``, each running for a few
minutes: plain Jobs and HyperJobs split over two clusters, in two queues. What is measured is
the wall time of the whole run (boot included) against the virtual time it covers.
"""

from __future__ import annotations

import random
import time

import msgspec
import yaml

from hyperjob import api

from .engine import Engine
from .scenario import load

POD_SIZES = (8, 16, 32)  # pods per job
NODE = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"}


class SimulateBench(msgspec.Struct, frozen=True, kw_only=True):
    nodes: int
    pods: int
    jobs: int
    hyperjobs: int
    virtual_seconds: float
    wall_seconds: float
    steps: int
    speedup: float  # virtual seconds per wall second
    pods_running_at_end: int
    pods_finished: int


def scenario(nodes: int, pods: int, duration: float, clusters: int = 2, seed: int = 0) -> api.RawDocument:
    """The generated Scenario document."""
    rng = random.Random(seed)
    per_cluster = [nodes // clusters + (1 if i < nodes % clusters else 0) for i in range(clusters)]
    spec: api.RawDocument = {
        "clusters": [
            {"name": f"c{i}", "nodes": [{"name": f"c{i}-n", "count": n, "allocatable": NODE}]}
            for i, n in enumerate(per_cluster)
            if n
        ],
        "queues": [_queue("research", 1), _queue("prod", 3)],
        "events": [],
        "until": f"{duration:g}s",
    }
    left, index = pods, 0
    while left > 0:
        size = min(rng.choice(POD_SIZES), left)
        at = round(rng.uniform(0, duration / 2), 1)
        runtime = f"{rng.randint(120, 900)}s"
        queue = rng.choice(("research", "prod"))
        manifest = (
            _hyperjob(index, size, queue, runtime)
            if size >= 16 and clusters > 1 and index % 3 == 0
            else _job(index, size, queue, runtime)
        )
        spec["events"].append({"at": f"{at:g}s", "create": manifest})
        left -= size
        index += 1
    spec["events"].sort(key=lambda e: float(e["at"][:-1]))
    return {"apiVersion": "hyperjob.io/v1alpha1", "kind": "Scenario", "metadata": {"name": "bench"}, "spec": spec}


def run(nodes: int, pods: int, duration: float, clusters: int = 2, seed: int = 0) -> SimulateBench:
    import asyncio

    from . import _quiet

    document = scenario(nodes, pods, duration, clusters, seed)
    parsed = load(yaml.safe_dump(document, sort_keys=False))
    engine = Engine(parsed)
    started = time.perf_counter()
    with _quiet():
        result = asyncio.run(engine.run())
    wall = time.perf_counter() - started
    creates = [e["create"] for e in document["spec"]["events"]]
    return SimulateBench(
        nodes=nodes,
        pods=pods,
        jobs=sum(c["kind"] == "Job" for c in creates),
        hyperjobs=sum(c["kind"] == "HyperJob" for c in creates),
        virtual_seconds=duration,
        wall_seconds=round(wall, 2),
        steps=engine.steps,
        speedup=round(duration / wall, 1),
        pods_running_at_end=sum(p["phase"] == "Running" for p in result["pods"]),
        pods_finished=sum(p["phase"] in ("Succeeded", "Failed") for p in result["pods"]),
    )


def _queue(name: str, weight: int) -> api.RawDocument:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": weight},
    }


def _tasks(size: int, runtime: str) -> list[api.RawDocument]:
    return [
        {
            "name": "worker",
            "replicas": size,
            "template": {
                "metadata": {"annotations": {"hyperjob.io/sim-duration": runtime}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "worker",
                            "image": "train",
                            "resources": {"requests": {"cpu": "4", "nvidia.com/gpu": "1"}},
                        }
                    ],
                },
            },
        }
    ]


def _job(index: int, size: int, queue: str, runtime: str) -> api.RawDocument:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": f"job-{index}"},
        "spec": {"queue": queue, "minAvailable": size, "tasks": _tasks(size, runtime)},
    }


def _hyperjob(index: int, size: int, queue: str, runtime: str) -> api.RawDocument:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "HyperJob",
        "metadata": {"name": f"hj-{index}"},
        "spec": {
            "template": {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "spec": {"queue": queue, "tasks": _tasks(size, runtime)},
            },
            "splitPolicy": {"mode": "static", "accelerators": size, "acceleratorType": "nvidia.com/gpu"},
        },
    }
