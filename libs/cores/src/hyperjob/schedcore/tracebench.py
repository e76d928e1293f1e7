"""GPU placement benchmark: replay a GPU cluster trace through the scheduler, FGD's way.

``run(nodes, pods, conf, seed, demand)`` builds the arrival sequence (``trace.workload``), puts
every arriving pod in one snapshot as its own admitted job, created in arrival order, and runs
one ``Scheduler.cycle``: allocate then takes the jobs one at a time in that order and places
each pod, or skips it when no node fits, with no departures — the artifact's protocol, through
our own scheduler core and the given conf. The binds (with their GPU devices) are then replayed
in arrival order to draw, for each whole percent of the fleet's GPU capacity that has arrived,
the share of GPUs allocated and the share of GPUs fragmented (FGD's definition, for the typical
pods of the pod list), each the mean over the pods whose arrival rounds to that percent, as the
artifact's analysis does. A measuring tool: besides ``bench`` the only module that reads a clock.
"""

from __future__ import annotations

import time
from collections import Counter

import msgspec
import numpy as np

from . import fragmentation as frag
from .conf import LIVE_DEFAULT_CONF, parse_conf
from .confspec import SchedulerConf
from .model import Decision
from .nodes import DEVICE_CORES
from .scheduler import Scheduler
from .trace import MILLI, TraceNode, TracePod, job_name, node_names, snapshot, total_gpu_milli, workload

FGD_COVERAGE = 0.95  # the artifact's typical-pod popularity threshold


class PlacementResult(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """One replay. Percentages are of the fleet's GPUs; index i of a curve is i % arrived."""

    policy: str
    seed: int
    demand: float
    total_gpus: int
    nodes: int
    pods_arrived: int
    pods_scheduled: int
    pods_skipped: int
    gpu_allocation_percent: list[float]
    gpu_fragmentation_percent: list[float]
    final_gpu_allocation_percent: float
    seconds: float
    cycle_seconds: float


def run(
    nodes: list[TraceNode], pods: list[TracePod], conf: SchedulerConf, policy: str, seed: int = 42, demand: float = 1.3
) -> PlacementResult:
    start = time.perf_counter()
    capacity = total_gpu_milli(nodes)
    if capacity <= 0:
        raise ValueError("nodes: the node list has no GPUs")
    arrivals = workload(pods, capacity, demand, seed)
    names = node_names(nodes, seed)
    snap = snapshot(nodes, names, pods, arrivals)
    cycle_start = time.perf_counter()
    decision = Scheduler(conf).cycle(snap)
    cycle_seconds = time.perf_counter() - cycle_start
    replay = Replay(nodes, names, pods)
    alloc, fragmented, arrived, scheduled = replay.run(arrivals, decision)
    points = int(round(demand * 100)) + 1
    return PlacementResult(
        policy=policy,
        seed=seed,
        demand=demand,
        total_gpus=capacity // MILLI,
        nodes=len(nodes),
        pods_arrived=len(arrivals),
        pods_scheduled=scheduled,
        pods_skipped=len(arrivals) - scheduled,
        gpu_allocation_percent=bucket(arrived, alloc, points),
        gpu_fragmentation_percent=bucket(arrived, fragmented, points),
        final_gpu_allocation_percent=round(float(alloc[-1]) if len(alloc) else 0.0, 2),
        seconds=round(time.perf_counter() - start, 3),
        cycle_seconds=round(cycle_seconds, 3),
    )


def bucket(arrived: np.ndarray, values: np.ndarray, points: int) -> list[float]:
    """Mean of ``values`` over the events whose arrival percent rounds to 0, 1, ..., points-1.

    Like the artifact: an empty percent takes the events within one percent of it; one still
    empty (only at the edges, where nothing arrived) repeats the previous value.
    """
    rounded = np.round(arrived)
    out: list[float] = []
    for x in range(points):
        hit = values[rounded == x]
        if len(hit) == 0:
            hit = values[(rounded >= x - 1) & (rounded <= x + 1)]
        out.append(round(float(hit.mean()), 2) if len(hit) else (out[-1] if out else 0.0))
    return out


class Replay:
    """The fleet's GPU state pod after pod, from the binds of one cycle."""

    def __init__(self, nodes: list[TraceNode], names: list[str], pods: list[TracePod]) -> None:
        self.pods = pods
        self.index = {name: i for i, name in enumerate(names)}
        width = max((n.gpus for n in nodes), default=0) or 1
        self.cpu = np.array([n.cpu_milli / MILLI for n in nodes], dtype=float)
        self.dev = np.full((len(nodes), width), -1.0)
        for i, n in enumerate(nodes):
            self.dev[i, : n.gpus] = DEVICE_CORES
        self.capacity = total_gpu_milli(nodes) / MILLI * DEVICE_CORES  # in device cores
        self.shapes = fgd_shapes(nodes, pods)
        self.rows = np.arange(len(nodes))

    def fragmentation(self, rows: np.ndarray) -> np.ndarray:
        return frag.expected(self.shapes, rows, self.cpu[rows], self.dev[rows])

    def run(self, arrivals: list[int], decision: Decision) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
        """Per arrival: GPU allocated %, GPU fragmented %, GPU arrived %; and the pods placed."""
        bound = {b.job: b for b in decision.binds}
        node_frag = self.fragmentation(self.rows)
        total_frag = float(node_frag.sum())
        used = arrived = 0.0
        alloc, fragmented, arrived_pct = (np.zeros(len(arrivals)) for _ in range(3))
        scheduled = 0
        for k, i in enumerate(arrivals):
            pod = self.pods[i]
            cores = pod.gpu_request_milli * DEVICE_CORES / MILLI
            arrived += cores
            b = bound.get(job_name(k))
            if b is not None:
                scheduled += 1
                used += cores
                row = self.index[b.node]
                self.take(row, pod, b.devices)
                new = float(self.fragmentation(np.array([row]))[0])
                total_frag += new - node_frag[row]
                node_frag[row] = new
            alloc[k] = 100.0 * used / self.capacity
            fragmented[k] = 100.0 * total_frag / self.capacity
            arrived_pct[k] = 100.0 * arrived / self.capacity
        return alloc, fragmented, arrived_pct, scheduled

    def take(self, row: int, pod: TracePod, devices: tuple[int, ...]) -> None:
        self.cpu[row] -= pod.cpu_milli / MILLI
        if pod.num_gpu:
            if len(devices) != pod.num_gpu:
                raise AssertionError(f"bind of {pod.name} on row {row} has devices {devices}, wants {pod.num_gpu}")
            self.dev[row, list(devices)] -= pod.gpu_milli * DEVICE_CORES / MILLI


def fgd_shapes(nodes: list[TraceNode], pods: list[TracePod]) -> frag.Shapes:
    """The artifact's typical pods of the pod list: (cpu, gpu milli, gpu count, models) keys."""
    counts = Counter((max(p.cpu_milli, 100), p.gpu_milli if p.num_gpu else 0, p.num_gpu, p.gpu_spec) for p in pods)
    chosen = frag.typical(counts, FGD_COVERAGE, order=lambda k: k)
    models = np.array([n.model for n in nodes], dtype=object)
    access = np.array(
        [np.ones(len(nodes), dtype=bool) if not spec else np.isin(models, list(spec)) for (_, _, _, spec), _ in chosen],
        dtype=bool,
    ).reshape(len(chosen), len(nodes))
    return frag.Shapes(
        cpu=np.array([k[0] / MILLI for k, _ in chosen]),
        memory=np.zeros(len(chosen)),
        number=np.array([k[2] for k, _ in chosen]),
        cores=np.array([k[1] * DEVICE_CORES / MILLI for k, _ in chosen]),
        weight=np.array([w for _, w in chosen]),
        access=access,
    )


# Policy name -> the plugin that alone orders the nodes (after ``predicates``) in its conf.
BASELINES = {
    "random": "gpurandom",
    "dotprod": "gpudotprod",
    "clustering": "gpuclustering",
    "packing": "gpupacking",
    "bestfit": "gpubestfit",
    "fgd": "fgd",
}
DEFAULT_POLICY = "gpufrag"
POLICIES = (DEFAULT_POLICY, *BASELINES)


def baseline_conf_text(policy: str, seed: int) -> str:
    """A conf where ``policy``'s plugin alone orders the nodes, as in the artifact's runs."""
    plugin = BASELINES[policy]
    arguments = f"\n    arguments: {{gpurandom.seed: {seed}}}" if plugin == "gpurandom" else ""
    return f"""actions: "allocate"
tiers:
- plugins:
  - name: predicates
  - name: {plugin}{arguments}
"""


def policy_conf(policy: str, seed: int) -> SchedulerConf:
    """``gpufrag``: the live cluster-scheduler's default conf; a baseline: its conf above."""
    if policy == DEFAULT_POLICY:
        return LIVE_DEFAULT_CONF
    if policy not in BASELINES:
        raise ValueError(f"unknown policy {policy!r} (known: {', '.join(POLICIES)})")
    return parse_conf(baseline_conf_text(policy, seed))
