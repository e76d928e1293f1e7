"""Seeded random GPU fleets for the fragmentation scorers' placement tables.

A fleet mixes node shapes (8-GPU dense, 2-GPU CPU-rich, CPU-only), GPU models, pods already
running on chosen devices (whole GPUs and vGPU shares), finished pods that set the mix of
shapes, and pending gangs, some of them pinned to a GPU model. ``placements`` runs two cycles
under a conf (the second one after the first's binds run, with their devices, and new gangs
arrive) and returns every bind, pipelined pod and unschedulable job as short strings, so a table
of them can be stored and compared.
"""

from __future__ import annotations

from typing import Any

import msgspec
import numpy as np

from hyperjob.schedcore import LIVE_DEFAULT_CONF_TEXT, Scheduler, parse_conf
from hyperjob.schedcore.model import Decision, JobInfo, NodeInfo, QueueInfo, Snapshot, TaskInfo
from hyperjob.schedcore.trace import GPU_MODEL_LABEL, model_affinity

GI = 2.0**30
ONLY = """
actions: "enqueue, allocate, backfill"
tiers:
- plugins: [{{name: priority}}, {{name: gang}}]
- plugins: [{{name: predicates}}, {{name: nodeorder}}, {{name: {plugin}}}]
"""
CONFS = {
    "live": LIVE_DEFAULT_CONF_TEXT,
    "gpufrag": ONLY.format(plugin="gpufrag"),
    "gpufrag-window": ONLY.format(plugin='gpufrag, arguments: {"gpufrag.window": 12, "gpufrag.memory": false}'),
    "gpufrag-no-balance": ONLY.format(plugin='gpufrag, arguments: {"gpufrag.balance": 0, "gpufrag.coverage": 0.6}'),
    "fgd": ONLY.format(plugin="fgd"),
    "fgd-score": ONLY.format(plugin='fgd, arguments: {"fgd.devices": score}'),
}
# (cpu, memory Gi, GPUs)
NODE_SHAPES = [(96, 1024, 8), (64, 256, 8), (48, 96, 8), (32, 128, 4), (32, 40, 4), (128, 512, 2), (16, 64, 0)]
MODELS = ["A100", "V100", "T4"]


def _pod_request(rng: np.random.Generator) -> dict[str, float]:
    kind = int(rng.integers(0, 4))
    cpu = float(rng.choice([1, 2, 4, 8, 12, 16]))
    memory = float(rng.choice([4, 8, 16, 24, 48])) * GI
    if kind == 0:
        return {"cpu": cpu, "memory": memory}
    if kind == 1:
        return {"cpu": cpu, "memory": memory, "volcano.sh/vgpu-number": 1.0,
                "volcano.sh/vgpu-cores": float(rng.choice([25, 30, 50, 60]))}  # fmt: skip
    return {"cpu": cpu, "memory": memory, "nvidia.com/gpu": float(rng.choice([1, 1, 2, 4, 8]))}


def _nodes(rng: np.random.Generator) -> list[NodeInfo]:
    out = []
    for i in range(int(rng.integers(6, 40))):
        cpu, mem, gpus = NODE_SHAPES[int(rng.integers(0, len(NODE_SHAPES)))]
        labels = {GPU_MODEL_LABEL: str(rng.choice(MODELS))} if gpus else {}
        alloc = {"cpu": float(cpu), "memory": mem * GI, "nvidia.com/gpu": float(gpus), "pods": 110.0}
        out.append(NodeInfo(name=f"n{i:03d}", allocatable=alloc, labels=labels))
    return out


def _running(rng: np.random.Generator, nodes: list[NodeInfo]) -> list[JobInfo]:
    """Pods already placed, each on devices it fits (the nodes' room is tracked here)."""
    room = {n.name: [n.allocatable["cpu"], n.allocatable["memory"]] for n in nodes}
    devices = {n.name: [100.0] * int(n.allocatable["nvidia.com/gpu"]) for n in nodes}
    jobs = []
    for k in range(int(rng.integers(0, 3 * len(nodes)))):
        request = _pod_request(rng)
        n = nodes[int(rng.integers(0, len(nodes)))].name
        number = int(request.get("nvidia.com/gpu", request.get("volcano.sh/vgpu-number", 0)))
        cores = request.get("volcano.sh/vgpu-cores", 100.0)
        free = [d for d, c in enumerate(devices[n]) if c >= cores]
        if room[n][0] < request["cpu"] or room[n][1] < request["memory"] or len(free) < number:
            continue
        chosen = tuple(int(d) for d in rng.permutation(free)[:number])
        for d in chosen:
            devices[n][d] -= cores
        room[n][0] -= request["cpu"]
        room[n][1] -= request["memory"]
        task = TaskInfo(name=f"r{k}-t-0", job=f"r{k}", request=request, status="Running", node=n, devices=chosen)
        jobs.append(JobInfo(name=f"r{k}", queue="default", phase="Running", created=-2.0, tasks=[task]))
    return jobs


def _history(rng: np.random.Generator) -> JobInfo:
    tasks = [
        TaskInfo(name=f"h-s-{i}", job="h", request=_pod_request(rng), status="Succeeded")
        for i in range(int(rng.integers(0, 30)))
    ]
    return JobInfo(name="h", queue="default", phase="Running", created=-3.0, tasks=tasks)


def _pending(rng: np.random.Generator, prefix: str, created: float) -> list[JobInfo]:
    jobs = []
    for k in range(int(rng.integers(2, 12))):
        name = f"{prefix}{k}"
        request = _pod_request(rng)
        gang = int(rng.integers(1, 9))
        pinned = bool(rng.integers(0, 3) == 0) and len(request) > 2
        affinity = (
            model_affinity(tuple(str(m) for m in rng.choice(MODELS, size=int(rng.integers(1, 3)), replace=False)))
            if pinned
            else None
        )
        tasks = [
            TaskInfo(name=f"{name}-w-{i}", job=name, role="w", index=i, request=request, affinity=affinity)
            for i in range(gang)
        ]
        min_member = int(rng.integers(1, gang + 1))
        jobs.append(JobInfo(name=name, queue="default", min_member=min_member, created=created + k, tasks=tasks))
    return jobs


def fleet(seed: int) -> tuple[Snapshot, list[JobInfo]]:
    """The first snapshot of fleet ``seed`` and the gangs that arrive before the second cycle."""
    rng = np.random.default_rng(seed)
    nodes = _nodes(rng)
    jobs = [*_running(rng, nodes), _history(rng), *_pending(rng, "p", 0.0)]
    later = _pending(rng, "q", 100.0)
    return Snapshot(nodes=nodes, queues=[QueueInfo(name="default")], jobs=jobs), later


def _outcome(decision: Decision) -> list[str]:
    return [
        *(f"bind {b.task} {b.node} {list(b.devices)}" for b in decision.binds),
        *(f"pipeline {p.task} {p.node}" for p in decision.pipelined),
        *(f"unschedulable {job}" for job in decision.unschedulable),
    ]


def _after(snap: Snapshot, decision: Decision, arriving: list[JobInfo]) -> Snapshot:
    bound = {b.task: b for b in decision.binds}
    jobs: list[JobInfo] = []
    for j in snap.jobs:
        tasks = [
            msgspec.structs.replace(t, status="Running", node=bound[t.name].node, devices=bound[t.name].devices)
            if t.name in bound
            else t
            for t in j.tasks
        ]
        jobs.append(msgspec.structs.replace(j, tasks=tasks, phase=decision.podgroup_phases.get(j.name, j.phase)))
    return msgspec.structs.replace(snap, jobs=[*jobs, *arriving])


def placements(seed: int, conf: str, scheduler: Any = None) -> list[str]:
    """Both cycles' outcomes for fleet ``seed`` under ``CONFS[conf]`` (or ``scheduler``)."""
    scheduler = scheduler or Scheduler(parse_conf(CONFS[conf]))
    snap, later = fleet(seed)
    first = scheduler.cycle(snap)
    second = scheduler.cycle(_after(snap, first, later))
    return ["cycle 1", *_outcome(first), "cycle 2", *_outcome(second)]


def table(seeds: range) -> dict[str, list[str]]:
    """``{"<conf>/<seed>": placements}`` over every conf, as stored in the golden table."""
    return {f"{conf}/{seed}": placements(seed, conf) for seed in seeds for conf in CONFS}
