"""Mutable per-session views of tasks, jobs and queues (Volcano's TaskInfo/JobInfo/QueueInfo).

Only the session changes them, through ``JobState.move``, so the status counters stay exact.
"""

from __future__ import annotations

import msgspec
import numpy as np

from .model import JobInfo, QueueInfo, TaskInfo
from .resources import GPU, VGPU_CORES, VGPU_NUMBER, ResourceSpace
from .status import Status

ALLOCATED = frozenset({"Allocated", "Binding", "Bound", "Running"})
READY = frozenset({"Allocated", "Binding", "Bound", "Running", "Succeeded"})
VALID = frozenset({"Pending", "Allocated", "Pipelined", "Binding", "Bound", "Running", "Succeeded"})
SCHEDULED = frozenset({"Running", "Bound", "Failed", "Succeeded"})


class TaskState:
    """One pod inside a session: its request vector, status and node index (-1: none)."""

    __slots__ = (
        "info",
        "name",
        "job",
        "role",
        "req",
        "status",
        "node",
        "best_effort",
        "priority",
        "vgpu",
        "devices",
        "_sel",
        "_order",
        "_key",
    )

    def __init__(
        self, info: TaskInfo, space: ResourceSpace, node_index: dict[str, int], shape: Shape | None = None
    ) -> None:
        self.info = info
        self.name = info.name
        self.job: JobState | None = None
        self.role = info.role
        self.req, self.best_effort, self.vgpu = shape if shape is not None else task_shape(info, space)
        self.status: str = info.status
        self.node = node_index.get(info.node, -1) if info.node else -1
        self.priority = info.priority
        self.devices: tuple[int, ...] = ()
        # Ordering and placement keys are computed on first use: most tasks of a big cluster
        # are running and never placed or ordered in a cycle.
        self._sel: bytes | None = None
        self._order: int | None = None
        self._key: tuple[float, str, str] | None = None

    @property
    def sel_key(self) -> bytes:
        if self._sel is None:
            self._sel = _selector_key(self.info)
        return self._sel

    @property
    def class_key(self) -> tuple[int, bytes, tuple[int, float]]:
        return (id(self.req), self.sel_key, self.vgpu)  # requests are interned per session

    @property
    def order_index(self) -> int:
        if self._order is None:
            self._order = _name_index(self.name)
        return self._order

    @property
    def key(self) -> tuple[float, str, str]:
        if self._key is None:
            self._key = (self.info.created, self.info.namespace, self.name)
        return self._key


_NO_VGPU = (0, 100.0)

# A task's request vector (interned, read-only), whether it is best-effort, and its GPU devices.
Shape = tuple[np.ndarray, bool, tuple[int, float]]


def task_shape(info: TaskInfo, space: ResourceSpace) -> Shape:
    req = space.request(info.request)
    return req, space.request_is_best_effort(req), _vgpu(info.request)


def _vgpu(request: dict[str, float]) -> tuple[int, float]:
    """The pod's GPU devices as (count, cores per device): a vGPU share, or whole GPUs.

    Whole GPUs (``nvidia.com/gpu``) take devices too, so per-device free cores stay true on
    nodes that run both kinds of pod.
    """
    if VGPU_NUMBER in request:
        return int(request[VGPU_NUMBER]), float(request.get(VGPU_CORES, 100.0) or 100.0)
    whole = int(request.get(GPU, 0))
    return (whole, 100.0) if whole > 0 else _NO_VGPU


def _name_index(name: str) -> int:
    # Volcano's task-order fallback uses the pod-name suffix only for names of >= 3 dash parts.
    head, _, tail = name.rpartition("-")
    if tail.isdigit() and head.count("-") >= 1:
        return int(tail)
    return -1


def _selector_key(info: TaskInfo) -> bytes:
    if not (info.node_selector or info.affinity or info.tolerations or info.node_name or info.topology_policy):
        return b""
    return msgspec.json.encode(
        (sorted(info.node_selector.items()), info.affinity, info.tolerations, info.node_name, info.topology_policy)
    )


class JobState:
    """One job: task lists plus the counters Volcano's JobInfo derives (ready, waiting, valid...)."""

    __slots__ = (
        "info",
        "name",
        "queue",
        "seq",
        "key",
        "priority",
        "phase",
        "min_member",
        "task_min",
        "task_min_total",
        "min_req",
        "tasks",
        "counts",
        "role_counts",
        "pending_be",
        "role_pending_be",
        "allocated",
        "failed_roles",
        "fit_errors",
        "enqueue_reason",
        "ready",
        "valid",
        "gated_req",
    )

    def __init__(self, info: JobInfo, tasks: list[TaskState], space: ResourceSpace, seq: int) -> None:
        self.info = info
        self.name = info.name
        self.queue = info.queue
        self.seq = seq
        self.key = (info.created, info.namespace, info.name)
        self.priority = info.priority
        self.phase: str = info.phase
        self.min_member = info.min_member
        self.task_min = info.min_task_member
        self.task_min_total = sum(self.task_min.values()) if self.task_min else 0
        self.min_req = space.interned(info.min_resources) if info.min_resources is not None else None
        self.tasks = tasks
        self.counts: dict[str, int] = {}
        self.role_counts: dict[str, dict[str, int]] = {}
        self.pending_be = 0
        self.role_pending_be: dict[str, int] = {}
        self.allocated = np.zeros(space.size)
        self.failed_roles: set[str] = set()
        self.fit_errors: dict[str, Status] = {}  # what stopped the job, by role (or "job", "queue", ...)
        self.enqueue_reason = ""
        self.ready = 0
        self.valid = 0
        # Pods held back by scheduling gates do not reserve queue room while they wait.
        gated = [t.req for t in tasks if t.info.gated and t.status == "Pending"]
        self.gated_req = sum(gated, np.zeros(space.size)) if gated else space.zero
        for t in tasks:
            t.job = self
            self._count(t, t.status, +1)

    def _count(self, t: TaskState, status: str, d: int) -> None:
        self.counts[status] = self.counts.get(status, 0) + d
        if status in READY:
            self.ready += d
        if status in VALID:
            self.valid += d
        if self.task_min:  # per-role counters only matter for per-role minimums
            rc = self.role_counts.setdefault(t.role, {})
            rc[status] = rc.get(status, 0) + d
        if status == "Pending" and t.best_effort:
            self.pending_be += d
            self.role_pending_be[t.role] = self.role_pending_be.get(t.role, 0) + d
        if status in ALLOCATED:
            if d > 0:
                np.add(self.allocated, t.req, out=self.allocated)
            else:
                np.subtract(self.allocated, t.req, out=self.allocated)

    def move(self, t: TaskState, status: str) -> None:
        self._count(t, t.status, -1)
        t.status = status
        self._count(t, status, +1)

    def n(self, *statuses: str) -> int:
        c = self.counts
        total = 0
        for s in statuses:
            total += c.get(s, 0)
        return total

    def ready_num(self) -> int:
        return self.ready

    def waiting_num(self) -> int:
        return self.counts.get("Pipelined", 0)

    def valid_num(self) -> int:
        return self.valid

    def pending_tasks(self) -> list[TaskState]:
        return [t for t in self.tasks if t.status == "Pending"]

    def role_check(self, statuses: frozenset[str] | set[str], with_be: bool) -> bool:
        """Volcano's CheckTask{Valid,Ready,Pipelined}: per-role minimums, only when minMember covers them."""
        if self.min_member < self.task_min_total:
            return True
        for role, need in self.task_min.items():
            if need <= 0:
                continue
            rc = self.role_counts.get(role, {})
            have = sum(rc.get(s, 0) for s in statuses) + (self.role_pending_be.get(role, 0) if with_be else 0)
            if have < need:
                return False
        return True

    def is_ready(self) -> bool:
        return self.ready + self.pending_be >= self.min_member

    @property
    def has_topology(self) -> bool:
        return self.info.network_topology is not None


class QueueState:
    """One queue; ``allocated`` follows every allocate/evict of the session."""

    __slots__ = ("info", "name", "allocated", "children")

    def __init__(self, info: QueueInfo, space: ResourceSpace) -> None:
        self.info = info
        self.name = info.name
        self.allocated = np.zeros(space.size)
        self.children: list[str] = []

    @property
    def is_open(self) -> bool:
        return self.info.state == "Open"
