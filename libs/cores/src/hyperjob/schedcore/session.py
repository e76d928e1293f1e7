"""One scheduling cycle's mutable world over an immutable snapshot (Volcano's Session).

Open: build resource vectors, node matrices, task/job/queue states, then open plugins in tier
order. Actions change the world only through a ``Statement`` (or the primitives it calls).
Close: plugins write back, podgroup phases are recomputed, and the ``Decision`` is assembled.
"""

from __future__ import annotations

import numpy as np

from .carry import Carry
from .confspec import SchedulerConf
from .cyclestate import CycleState
from .hooks import Dispatch, HookRegistry
from .model import Bind, Decision, Evict, PodGroupPhase, QueueUsage, Snapshot
from .nodes import NodeTable
from .placement import Placement
from .registry import Registry
from .resources import ResourceSpace
from .state import ALLOCATED, JobState, QueueState, TaskState


def _space(snapshot: Snapshot) -> ResourceSpace:
    names: set[str] = set()
    for n in snapshot.nodes:
        names.update(n.allocatable)
    for q in snapshot.queues:
        names.update(q.capability, q.deserved, q.guarantee)
    for j in snapshot.jobs:
        names.update(j.min_resources or {})
        for t in j.tasks:
            names.update(t.request)
    return ResourceSpace(names)


class Session(Dispatch):
    """Holds nodes, queues, jobs and plugins for one cycle; see the module docstring."""

    def __init__(self, conf: SchedulerConf, snapshot: Snapshot, registry: Registry, carry: Carry | None = None) -> None:
        self.conf = conf
        self.snapshot = snapshot
        self.now = snapshot.now
        self.cycle_state = CycleState()
        self.space = space = _space(snapshot) if carry is None else carry.space_for(_space(snapshot))
        base = carry.node_base(snapshot.nodes, space) if carry is not None else None
        self.nodes = NodeTable(snapshot.nodes, space, base)
        self.total = self.nodes.total
        self.share_dims = (self.total > 0) | (np.arange(space.size) < 2)
        self.queues: dict[str, QueueState] = {q.name: QueueState(q, space) for q in snapshot.queues}
        for q in self.queues.values():
            parent = q.info.parent
            if parent and parent in self.queues:
                self.queues[parent].children.append(q.name)
        self.jobs: dict[str, JobState] = {}
        placed: list[TaskState] = []
        for seq, j in enumerate(snapshot.jobs):
            index = self.nodes.index
            if carry is None:
                tasks = [TaskState(t, space, index) for t in j.tasks]
            else:
                tasks = [TaskState(t, space, index, carry.shape(t, space)) for t in j.tasks]
            self.jobs[j.name] = JobState(j, tasks, space, seq)
            placed.extend(t for t in tasks if t.node >= 0 and t.status in ("Bound", "Running", "Releasing"))
            queue = self.queues.get(j.queue)
            if queue is not None:
                queue.allocated += self.jobs[j.name].allocated
        if carry is not None:
            carry.opened()
        self._place_existing(placed)
        self.binds: list[Bind] = []
        self.evictions: list[Evict] = []
        self.pipelined: list[Bind] = []
        self.unschedulable: dict[str, str] = {}
        self.deserved: dict[str, np.ndarray] = {}
        self.hooks = HookRegistry()
        self.placement = Placement(self.nodes, space, self.hooks)
        plugins = [(ti, registry[pc.name](pc.args), pc) for ti, tier in enumerate(conf.tiers) for pc in tier]
        self.plugin_conf = {pc.name: pc for _, _, pc in plugins}
        self._bind_hooks(plugins)
        for _, p, _ in plugins:
            p.on_session_open(self)

    def _place_existing(self, placed: list[TaskState]) -> None:
        """Charge the snapshot's placed pods to their nodes (one scatter-add for all of them)."""
        if not placed:
            return
        nodes = self.nodes
        rows = np.array([t.node for t in placed])
        reqs = np.array([t.req for t in placed]).reshape(len(placed), self.space.size)
        np.subtract.at(nodes.idle, rows, reqs)
        releasing = np.array([t.status == "Releasing" for t in placed])
        if releasing.any():
            np.add.at(nodes.releasing, rows[releasing], reqs[releasing])
        nodes.fidle[:] = nodes.idle + nodes.releasing - nodes.pipelined
        for t in placed:
            nodes.tasks[t.node].append(t)
            if t.vgpu[0]:
                t.devices = nodes.take_devices(t.node, *t.vgpu, t.info.devices)

    def releasable(self) -> np.ndarray:
        """Per node, what Running/Bound preemptable pods hold: an upper bound on what evictions free."""
        out = np.zeros_like(self.nodes.idle)
        for row, tasks in enumerate(self.nodes.tasks):
            for t in tasks:
                if t.status in ("Running", "Bound") and t.info.preemptable:
                    out[row] += t.req
        return out

    def static_mask(self, task: TaskState) -> np.ndarray:
        """The enabled predicates' node mask for ``task`` (cached per selector)."""
        return self.placement.static_mask(task)

    def queue_of(self, job: JobState) -> QueueState | None:
        return self.queues.get(job.queue)

    # ---- primitives (Statement calls these and records how to undo them) ------------------
    def do_allocate(self, t: TaskState, row: int) -> None:
        job = t.job
        assert job is not None
        job.move(t, "Allocated")
        t.node = row
        self.nodes.change(row, idle=-t.req)
        self.nodes.tasks[row].append(t)
        if t.vgpu[0]:
            t.devices = self.nodes.take_devices(row, *t.vgpu, self.choose_devices(t, row))
        self._queue_add(job, t.req)
        self.fire_allocate(t)

    def undo_allocate(self, t: TaskState) -> None:
        job = t.job
        assert job is not None
        row = t.node
        job.move(t, "Pending")
        self.nodes.change(row, idle=t.req)
        self.nodes.tasks[row].remove(t)
        if t.devices:
            self.nodes.give_devices(row, t.devices, t.vgpu[1])
            t.devices = ()
        t.node = -1
        self._queue_add(job, -t.req)
        self.fire_deallocate(t)

    def do_pipeline(self, t: TaskState, row: int) -> None:
        assert t.job is not None
        t.job.move(t, "Pipelined")
        t.node = row
        self.nodes.change(row, pipelined=t.req)
        if t.vgpu[0]:
            self.nodes.pipelined_tasks.setdefault(row, []).append(t)
        self.fire_allocate(t)

    def undo_pipeline(self, t: TaskState) -> None:
        assert t.job is not None
        t.job.move(t, "Pending")
        self.nodes.change(t.node, pipelined=-t.req)
        if t.vgpu[0]:
            self.nodes.pipelined_tasks[t.node].remove(t)
        t.node = -1
        self.fire_deallocate(t)

    def do_evict(self, t: TaskState) -> str:
        assert t.job is not None
        prev = t.status
        t.job.move(t, "Releasing")
        self.nodes.change(t.node, releasing=t.req)
        if prev in ALLOCATED:
            self._queue_add(t.job, -t.req)
        self.fire_deallocate(t)
        return prev

    def undo_evict(self, t: TaskState, prev: str) -> None:
        assert t.job is not None
        t.job.move(t, prev)
        self.nodes.change(t.node, releasing=-t.req)
        if prev in ALLOCATED:
            self._queue_add(t.job, t.req)
        self.fire_allocate(t)

    def _queue_add(self, job: JobState, delta: np.ndarray) -> None:
        q = self.queues.get(job.queue)
        if q is not None:
            q.allocated += delta

    # ---- close ---------------------------------------------------------------------------
    def close(self) -> Decision:
        for _, p in reversed(self.loaded):
            p.on_session_close(self)
        phases = {name: self._phase(job) for name, job in self.jobs.items()}
        queues = {
            name: QueueUsage(
                allocated=self.space.to_dict(q.allocated),
                deserved=self.space.to_dict(self.deserved[name]) if name in self.deserved else {},
            )
            for name, q in self.queues.items()
        }
        return Decision(
            binds=self.binds,
            evictions=self.evictions,
            podgroup_phases=phases,
            unschedulable=dict(sorted(self.unschedulable.items())),
            queues=queues,
            pipelined=self.pipelined,
        )

    def _phase(self, job: JobState) -> PodGroupPhase:
        scheduled = job.n("Running", "Bound", "Failed", "Succeeded")
        if job.counts.get("Releasing"):
            scheduled += sum(1 for t in job.tasks if t.status == "Releasing" and t.node >= 0)
        if job.n("Running") and job.name in self.unschedulable:
            return "Unknown"
        if scheduled >= job.min_member and scheduled > 0:
            # Volcano also calls a minMember-0 job with nothing scheduled Completed; we do not.
            return "Completed" if job.n("Succeeded", "Failed") == scheduled else "Running"
        if job.phase != "Inqueue":
            return "Pending"
        return "Inqueue"
