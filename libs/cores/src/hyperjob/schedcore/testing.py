"""Fluent builders for snapshots, and ``advance``: a minimal driver between cycles.

``node("n1").cpu(4).mem("16Gi")``, ``queue("q").weight(3)``,
``job("j1", "q").min(2).tasks(2, cpu=1)``; ``snapshot(nodes, queues, jobs)``.
``advance(snapshot, decision)`` applies a decision the way a driver would: bound pods run,
evicted pods come back Pending with no node, pipelined pods remember their nominated node,
podgroup phases carry over.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from hyperjob.api.job import NetworkTopology
from hyperjob.api.pod import Taint, Toleration
from hyperjob.api.quantity import parse_quantity
from hyperjob.api.queue import QueueAffinity

from .model import Decision, JobInfo, NodeInfo, QueueInfo, Snapshot, TaskInfo, TaskStatus

Quantity = str | int | float  # "16Gi", 4, 0.5: what parse_quantity reads
# A builder's keyword fields, handed to the model struct's constructor, which checks their types.
Fields = dict[str, Any]
TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]

_ALIASES = {
    "mem": "memory",
    "gpu": "nvidia.com/gpu",
    "vgpu": "volcano.sh/vgpu-number",
    "vgpu_cores": "volcano.sh/vgpu-cores",
}


def res(**kw: Quantity) -> dict[str, float]:
    """``res(cpu=1, mem="1Gi", gpu=2)`` -> a base-unit resource list."""
    return {_ALIASES.get(k, k.replace("_", ".")): parse_quantity(v) for k, v in kw.items()}


class NodeBuilder:
    def __init__(self, name: str) -> None:
        self.kw: Fields = {"name": name, "allocatable": {"cpu": 0.0, "memory": 0.0}, "labels": {}, "taints": []}

    def cpu(self, v: Quantity) -> NodeBuilder:
        self.kw["allocatable"]["cpu"] = parse_quantity(v)
        return self

    def mem(self, v: Quantity) -> NodeBuilder:
        self.kw["allocatable"]["memory"] = parse_quantity(v)
        return self

    def gpus(self, v: int) -> NodeBuilder:
        self.kw["allocatable"]["nvidia.com/gpu"] = float(v)
        return self

    def pods(self, v: int) -> NodeBuilder:
        self.kw["allocatable"]["pods"] = float(v)
        return self

    def res(self, **kw: Quantity) -> NodeBuilder:
        self.kw["allocatable"].update(res(**kw))
        return self

    def label(self, **kw: str) -> NodeBuilder:
        self.kw["labels"].update({k.replace("__", "/").replace("_", "."): v for k, v in kw.items()})
        return self

    def labels(self, labels: dict[str, str]) -> NodeBuilder:
        self.kw["labels"].update(labels)
        return self

    def tier(self, n: int, value: str) -> NodeBuilder:
        self.kw["labels"][f"topology.hyperjob.io/tier{n}"] = value
        return self

    def taint(self, key: str, value: str = "", effect: TaintEffect = "NoSchedule") -> NodeBuilder:
        self.kw["taints"].append(Taint(key=key, value=value, effect=effect))
        return self

    def cordon(self) -> NodeBuilder:
        self.kw["unschedulable"] = True
        return self

    def not_ready(self) -> NodeBuilder:
        self.kw["ready"] = False
        return self

    def build(self) -> NodeInfo:
        return NodeInfo(**self.kw)


class QueueBuilder:
    def __init__(self, name: str) -> None:
        self.kw: Fields = {"name": name}

    def weight(self, w: float) -> QueueBuilder:
        self.kw["weight"] = w
        return self

    def capability(self, **kw: Quantity) -> QueueBuilder:
        self.kw["capability"] = res(**kw)
        return self

    def deserved(self, **kw: Quantity) -> QueueBuilder:
        self.kw["deserved"] = res(**kw)
        return self

    def guarantee(self, **kw: Quantity) -> QueueBuilder:
        self.kw["guarantee"] = res(**kw)
        return self

    def reclaimable(self, flag: bool) -> QueueBuilder:
        self.kw["reclaimable"] = flag
        return self

    def priority(self, p: int) -> QueueBuilder:
        self.kw["priority"] = p
        return self

    def parent(self, p: str) -> QueueBuilder:
        self.kw["parent"] = p
        return self

    def state(self, s: str) -> QueueBuilder:
        self.kw["state"] = s
        return self

    def nodegroups(
        self,
        required: Sequence[str] = (),
        preferred: Sequence[str] = (),
        anti_required: Sequence[str] = (),
        anti_preferred: Sequence[str] = (),
    ) -> QueueBuilder:
        """The queue's ``spec.affinity`` node groups (the ``nodegroup`` plugin)."""
        self.kw["affinity"] = msgspec.convert(
            {
                "nodeGroupAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": list(required),
                    "preferredDuringSchedulingIgnoredDuringExecution": list(preferred),
                },
                "nodeGroupAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": list(anti_required),
                    "preferredDuringSchedulingIgnoredDuringExecution": list(anti_preferred),
                },
            },
            QueueAffinity,
        )
        return self

    def created(self, t: float) -> QueueBuilder:
        self.kw["created"] = t
        return self

    def build(self) -> QueueInfo:
        return QueueInfo(**self.kw)


class JobBuilder:
    def __init__(self, name: str, queue: str = "default") -> None:
        self.kw: Fields = {"name": name, "queue": queue, "phase": "Inqueue"}
        self.task_list: list[TaskInfo] = []

    def min(self, n: int) -> JobBuilder:
        self.kw["min_member"] = n
        return self

    def min_task(self, **kw: int) -> JobBuilder:
        self.kw["min_task_member"] = kw
        return self

    def min_resources(self, **kw: Quantity) -> JobBuilder:
        self.kw["min_resources"] = res(**kw)
        return self

    def priority(self, p: int) -> JobBuilder:
        self.kw["priority"] = p
        return self

    def phase(self, p: str) -> JobBuilder:
        self.kw["phase"] = p
        return self

    def created(self, t: float) -> JobBuilder:
        self.kw["created"] = t
        return self

    def topology(self, mode: Literal["hard", "soft"] = "hard", tier: int | None = None) -> JobBuilder:
        self.kw["network_topology"] = NetworkTopology(mode=mode, highest_tier_allowed=tier)
        return self

    def tasks(
        self,
        n: int,
        role: str = "task",
        status: TaskStatus = "Pending",
        nodes: list[str] | None = None,
        **kw: Any,  # resources (quantities) or TaskInfo fields, which TaskInfo checks
    ) -> JobBuilder:
        """Add ``n`` pods ``<job>-<role>-<i>``; ``kw`` are resources or TaskInfo fields."""
        fields = {k: kw.pop(k) for k in list(kw) if k in TaskInfo.__struct_fields__}
        if "tolerations" in fields:
            fields["tolerations"] = [t if isinstance(t, Toleration) else Toleration(**t) for t in fields["tolerations"]]
        start = sum(1 for t in self.task_list if t.role == role)
        for i in range(start, start + n):
            node = nodes[i - start] if nodes else None
            self.task_list.append(
                TaskInfo(
                    name=f"{self.kw['name']}-{role}-{i}",
                    job=self.kw["name"],
                    role=role,
                    index=i,
                    request=res(**kw),
                    status=status,
                    node=node,
                    **fields,
                )
            )
        return self

    def running(self, nodes: list[str], role: str = "task", **kw: Any) -> JobBuilder:  # kw: as ``tasks``
        return self.tasks(len(nodes), role=role, status="Running", nodes=nodes, **kw)

    def build(self) -> JobInfo:
        kw = dict(self.kw)
        kw.setdefault("min_member", len(self.task_list) or 1)
        return JobInfo(tasks=list(self.task_list), **kw)


def node(name: str) -> NodeBuilder:
    return NodeBuilder(name)


def queue(name: str) -> QueueBuilder:
    return QueueBuilder(name)


def job(name: str, queue: str = "default") -> JobBuilder:
    return JobBuilder(name, queue)


def snapshot(
    nodes: Sequence[NodeBuilder | NodeInfo],
    queues: Sequence[QueueBuilder | QueueInfo],
    jobs: Sequence[JobBuilder | JobInfo],
    now: float = 0.0,
) -> Snapshot:
    """A snapshot of built structs; builders are built here."""
    return Snapshot(
        nodes=[n.build() if isinstance(n, NodeBuilder) else n for n in nodes],
        queues=[q.build() if isinstance(q, QueueBuilder) else q for q in queues],
        jobs=[j.build() if isinstance(j, JobBuilder) else j for j in jobs],
        now=now,
    )


def advance(snap: Snapshot, decision: Decision, now: float | None = None) -> Snapshot:
    """The next snapshot a simple driver would build from ``decision``."""
    bound = {b.task: b.node for b in decision.binds}
    evicted = {e.task for e in decision.evictions}
    nominated = {p.task: p.node for p in decision.pipelined}
    jobs = []
    for j in snap.jobs:
        tasks = []
        for t in j.tasks:
            if t.name in evicted:
                t = msgspec.structs.replace(t, status="Pending", node=None, nominated_node="")
            elif t.name in bound:
                t = msgspec.structs.replace(t, status="Running", node=bound[t.name], nominated_node="")
            elif t.name in nominated:
                t = msgspec.structs.replace(t, nominated_node=nominated[t.name])
            tasks.append(t)
        jobs.append(msgspec.structs.replace(j, tasks=tasks, phase=decision.podgroup_phases.get(j.name, j.phase)))
    return msgspec.structs.replace(snap, jobs=jobs, now=snap.now if now is None else now)
