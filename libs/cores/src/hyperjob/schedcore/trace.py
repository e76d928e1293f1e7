"""GPU cluster traces in the Alibaba ``cluster-trace-gpu-v2023`` ("openb") CSV form, as snapshots.

Node list columns ``sn,cpu_milli,memory_mib,gpu,model``; pod list columns
``name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,...]`` (other columns are ignored).
``gpu_milli`` is per GPU: below 1000 with ``num_gpu`` 1 is a share of one GPU; ``gpu_spec``
lists the GPU models a pod accepts, ``|``-separated (empty: any).

In a snapshot a node gets ``nvidia.com/gpu`` = its GPU count and the label
``nvidia.com/gpu.product`` = its model; a whole-GPU pod asks ``nvidia.com/gpu``, a shared one
asks Volcano's ``volcano.sh/vgpu-number: 1`` and ``volcano.sh/vgpu-cores`` (percent of a GPU);
``gpu_spec`` becomes a required node affinity on the model label. Each arriving pod is its own
job (minAvailable 1), created in arrival order, already admitted (Inqueue) into one queue.
Nodes are named ``<k>-<sn>`` with k from a seeded permutation, as the artifact renames them: its
scheduler, like ours, gives a tie to the first name, so ties go to a random but fixed order.

``workload`` builds the arrival sequence the way the FGD artifact tunes a trace to a demand:
every pod of the list once, shuffled, then pods drawn with replacement from the list and
appended until the next one would take the total GPU request past ``demand`` x the fleet's GPUs
(when the list alone asks for more, random pods are dropped until it fits). Pure: text in,
structs out; a malformed row is a ``TraceError`` naming the file, line and column.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from typing import TypeVar

import msgspec
import numpy as np

from hyperjob.api.pod import Affinity, NodeAffinity, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm

from .model import JobInfo, NodeInfo, QueueInfo, Snapshot, TaskInfo
from .resources import GPU, VGPU_CORES, VGPU_NUMBER

GPU_MODEL_LABEL = "nvidia.com/gpu.product"
MILLI = 1000
T = TypeVar("T")


class TraceError(ValueError):
    """A trace file that cannot be read: the message names the file, line and column."""


class TraceNode(msgspec.Struct, frozen=True):
    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    model: str


class TracePod(msgspec.Struct, frozen=True):
    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int
    gpu_milli: int
    gpu_spec: tuple[str, ...]

    @property
    def gpu_request_milli(self) -> int:
        """Total GPU request in milli-GPU (1000 per GPU)."""
        return self.num_gpu * self.gpu_milli if self.num_gpu else 0


def _rows(text: str, source: str, required: tuple[str, ...], build: Callable[[dict[str, str], str], T]) -> list[T]:
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in required if c not in (reader.fieldnames or [])]
    if missing:
        raise TraceError(f"{source}: missing column {missing[0]!r} (need {', '.join(required)})")
    out = []
    for row in reader:
        out.append(build(row, f"{source} line {reader.line_num}"))
    if not out:
        raise TraceError(f"{source}: no rows")
    return out


def _int(row: dict[str, str], column: str, where: str, low: int = 0, high: int | None = None) -> int:
    raw = (row.get(column) or "").strip()
    try:
        value = int(float(raw)) if raw else 0
    except ValueError:
        raise TraceError(f"{where}: {column}: not a number: {raw!r}") from None
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise TraceError(f"{where}: {column}: must be {bound}, got {value}")
    return value


def parse_nodes(text: str, source: str = "nodes") -> list[TraceNode]:
    def build(row: dict[str, str], where: str) -> TraceNode:
        name = (row.get("sn") or "").strip()
        if not name:
            raise TraceError(f"{where}: sn: empty node name")
        return TraceNode(
            name=name,
            cpu_milli=_int(row, "cpu_milli", where),
            memory_mib=_int(row, "memory_mib", where),
            gpus=_int(row, "gpu", where, 0, 64),
            model=(row.get("model") or "").strip(),
        )

    nodes = _rows(text, source, ("sn", "cpu_milli", "memory_mib", "gpu", "model"), build)
    seen: set[str] = set()
    for n in nodes:
        if n.name in seen:
            raise TraceError(f"{source}: sn: node {n.name!r} is listed twice")
        seen.add(n.name)
    return nodes


def parse_pods(text: str, source: str = "pods") -> list[TracePod]:
    def build(row: dict[str, str], where: str) -> TracePod:
        name = (row.get("name") or "").strip()
        if not name:
            raise TraceError(f"{where}: name: empty pod name")
        num_gpu = _int(row, "num_gpu", where, 0, 64)
        gpu_milli = _int(row, "gpu_milli", where, 0, MILLI) if num_gpu else 0
        if num_gpu and gpu_milli == 0:
            raise TraceError(f"{where}: gpu_milli: a pod with num_gpu {num_gpu} needs gpu_milli > 0")
        spec = tuple(sorted(m for m in (row.get("gpu_spec") or "").split("|") if m.strip()))
        return TracePod(
            name=name,
            cpu_milli=_int(row, "cpu_milli", where),
            memory_mib=_int(row, "memory_mib", where),
            num_gpu=num_gpu,
            gpu_milli=gpu_milli,
            gpu_spec=spec,
        )

    return _rows(text, source, ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"), build)


def total_gpu_milli(nodes: list[TraceNode]) -> int:
    return sum(n.gpus for n in nodes) * MILLI


def workload(pods: list[TracePod], capacity_milli: int, demand: float, seed: int) -> list[int]:
    """Arrival order as indexes into ``pods`` (see the module docstring)."""
    rng = np.random.default_rng(seed)
    target = demand * capacity_milli
    order = [int(i) for i in rng.permutation(len(pods))]
    total = sum(pods[i].gpu_request_milli for i in order)
    while total > target and order:
        gone = order.pop(int(rng.integers(len(order))))
        total -= pods[gone].gpu_request_milli
    if not any(p.gpu_request_milli for p in pods):
        return order
    while True:
        i = int(rng.integers(len(pods)))
        if total + pods[i].gpu_request_milli > target:
            return order
        order.append(i)
        total += pods[i].gpu_request_milli


def node_names(nodes: list[TraceNode], seed: int) -> list[str]:
    """``<k>-<sn>``: k is the node's place in a seeded permutation (the tie-break order)."""
    order = np.random.default_rng([seed, 1]).permutation(len(nodes))
    width = max(len(str(len(nodes) - 1)), 4)
    return [f"{int(k):0{width}d}-{n.name}" for k, n in zip(order, nodes, strict=True)]


def node_info(n: TraceNode, name: str) -> NodeInfo:
    alloc = {"cpu": n.cpu_milli / MILLI, "memory": n.memory_mib * 2.0**20}
    if n.gpus:
        alloc[GPU] = float(n.gpus)
    return NodeInfo(name=name, allocatable=alloc, labels={GPU_MODEL_LABEL: n.model} if n.model else {})


def pod_request(p: TracePod) -> dict[str, float]:
    req = {"cpu": p.cpu_milli / MILLI, "memory": p.memory_mib * 2.0**20}
    if p.num_gpu and p.gpu_milli >= MILLI:
        req[GPU] = float(p.num_gpu)
    elif p.num_gpu:
        req[VGPU_NUMBER] = float(p.num_gpu)
        req[VGPU_CORES] = p.gpu_milli * 100.0 / MILLI
    return req


def model_affinity(models: tuple[str, ...]) -> Affinity | None:
    if not models:
        return None
    term = NodeSelectorTerm(
        match_expressions=[NodeSelectorRequirement(key=GPU_MODEL_LABEL, operator="In", values=list(models))]
    )
    return Affinity(
        node_affinity=NodeAffinity(
            required_during_scheduling_ignored_during_execution=NodeSelector(node_selector_terms=[term])
        )
    )


def job_name(arrival: int) -> str:
    return f"a{arrival:06d}"


def snapshot(
    nodes: list[TraceNode], names: list[str], pods: list[TracePod], arrivals: list[int], queue: str = "default"
) -> Snapshot:
    """One admitted single-pod job per arrival, created in arrival order, and every node by ``names``."""
    affinities: dict[tuple[str, ...], Affinity | None] = {}
    requests: dict[int, dict[str, float]] = {}
    jobs = []
    for k, i in enumerate(arrivals):
        p = pods[i]
        if p.gpu_spec not in affinities:
            affinities[p.gpu_spec] = model_affinity(p.gpu_spec)
        request = requests.setdefault(i, pod_request(p))
        name = job_name(k)
        task = TaskInfo(
            name=f"{name}-{p.name}",
            job=name,
            role="pod",
            request=request,
            affinity=affinities[p.gpu_spec],
            created=float(k),
        )
        jobs.append(JobInfo(name=name, queue=queue, min_member=1, phase="Inqueue", created=float(k), tasks=[task]))
    return Snapshot(
        nodes=[node_info(n, name) for n, name in zip(nodes, names, strict=True)],
        queues=[QueueInfo(name=queue)],
        jobs=jobs,
    )
