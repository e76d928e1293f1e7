"""Scheduler throughput benchmark, shaped like Kubernetes' scheduler_perf ``SchedulingBasic``.

``run(nodes, pods, gang)`` builds ``nodes`` identical nodes (32 cpu, 128Gi, 8 GPUs, 110 pods)
and ``pods / gang`` pending jobs of ``gang`` identical pods each (minAvailable = gang; 1 cpu,
4Gi, and ``gpus`` whole GPUs), then runs cycles of the default conf, applying each decision
like a driver, until every pod is bound or a cycle binds nothing. ``initial`` pods already
run (spread round-robin), as in SchedulingBasic's init phase; ``per_cycle`` > 0 releases that
many pods per cycle instead of all at once, so cycle percentiles mean something. Only ``Scheduler.cycle`` is timed. This
module is a measuring tool: the one place in the package that reads a clock; the core never
imports it.
"""

from __future__ import annotations

import time

import msgspec
import numpy as np

from .conf import DEFAULT_CONF
from .confspec import SchedulerConf
from .model import JobInfo, NodeInfo, QueueInfo, Snapshot, TaskInfo
from .scheduler import Scheduler
from .testing import advance


class BenchResult(msgspec.Struct, frozen=True, kw_only=True):
    pods_per_second: float
    p50_cycle_ms: float
    p99_cycle_ms: float
    cycles: int
    nodes: int
    pods: int
    gang: int
    bound: int
    seconds: float
    # CPU time of the cycles: on a shared, noisy machine this is the figure to compare.
    cpu_seconds: float = 0.0
    pods_per_cpu_second: float = 0.0


def build_snapshot(nodes: int, pods: int, gang: int = 1, seed: int = 0, initial: int = 0, gpus: int = 0) -> Snapshot:
    """The benchmark's first snapshot; ``seed`` shuffles the jobs' submission order; every pod
    (pending and initial) asks for ``gpus`` whole GPUs besides its CPU and memory."""
    alloc = {"cpu": 32.0, "memory": 128 * 2.0**30, "nvidia.com/gpu": 8.0, "pods": 110.0}
    node_list = [NodeInfo(name=f"node-{i:05d}", allocatable=dict(alloc)) for i in range(nodes)]
    request = {"cpu": 1.0, "memory": 4 * 2.0**30}
    if gpus:
        request["nvidia.com/gpu"] = float(gpus)
    n_jobs = max(pods // max(gang, 1), 1)
    order = np.random.default_rng(seed).permutation(n_jobs)
    jobs = []
    for k in range(n_jobs):
        name = f"job-{k:06d}"
        tasks = [
            TaskInfo(name=f"{name}-worker-{i}", job=name, role="worker", index=i, request=request) for i in range(gang)
        ]
        jobs.append(
            JobInfo(
                name=name,
                queue="default",
                min_member=gang,
                phase="Pending",
                created=float(order[k]),
                min_resources={r: v * gang for r, v in request.items()},
                tasks=tasks,
            )
        )
    for k in range(initial):
        name = f"init-{k:06d}"
        task = TaskInfo(
            name=f"{name}-worker-0",
            job=name,
            role="worker",
            request=request,
            status="Running",
            node=node_list[k % max(nodes, 1)].name,
        )
        jobs.append(JobInfo(name=name, queue="default", min_member=1, phase="Running", created=-1.0, tasks=[task]))
    return Snapshot(nodes=node_list, queues=[QueueInfo(name="default")], jobs=jobs)


def run(
    nodes: int,
    pods: int,
    gang: int = 1,
    seed: int = 0,
    conf: SchedulerConf = DEFAULT_CONF,
    initial: int = 0,
    per_cycle: int = 0,
    gpus: int = 0,
) -> BenchResult:
    """Schedule every pod; report pods bound per second of cycle time and cycle latencies."""
    scheduler = Scheduler(conf)
    full = build_snapshot(nodes, pods, gang, seed, initial, gpus)
    waiting = sorted((j for j in full.jobs if j.phase == "Pending"), key=lambda j: (j.created, j.name))
    snap = msgspec.structs.replace(full, jobs=[j for j in full.jobs if j.phase != "Pending"])
    total = sum(len(j.tasks) for j in waiting)
    step = max(per_cycle // max(gang, 1), 1) if per_cycle else len(waiting)
    times: list[float] = []
    cpu = 0.0
    bound = idle = 0
    while bound < total and idle < 3:
        arriving, waiting = waiting[:step], waiting[step:]
        snap = msgspec.structs.replace(snap, jobs=[*snap.jobs, *arriving])
        start, cpu_start = time.perf_counter(), time.process_time()
        decision = scheduler.cycle(snap)
        times.append(time.perf_counter() - start)
        cpu += time.process_time() - cpu_start
        bound += len(decision.binds)
        idle = 0 if decision.binds or arriving else idle + 1
        snap = advance(snap, decision)
    seconds = sum(times)
    ms = np.array(times) * 1000.0
    return BenchResult(
        pods_per_second=bound / seconds if seconds else 0.0,
        p50_cycle_ms=float(np.percentile(ms, 50)),
        p99_cycle_ms=float(np.percentile(ms, 99)),
        cycles=len(times),
        nodes=nodes,
        pods=total,
        gang=gang,
        bound=bound,
        seconds=seconds,
        cpu_seconds=cpu,
        pods_per_cpu_second=bound / cpu if cpu else 0.0,
    )
