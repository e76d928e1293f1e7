"""How the session consults plugins: Volcano's tier/vote combination rules, one dispatcher each."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .confspec import PluginConf
from .framework import (
    HOOKS,
    Allocatable,
    DeviceChoice,
    DynamicFit,
    EventHandler,
    GangDomains,
    JobEnqueueable,
    JobOrder,
    JobOrderKey,
    JobPipelined,
    JobReady,
    JobStarving,
    JobValid,
    NodeScore,
    Overused,
    Plugin,
    Predicate,
    Preemptable,
    Preemptive,
    QueueOrder,
    Reclaimable,
    TaskOrder,
    VictimQueueOrder,
    implements,
)
from .state import JobState, QueueState, TaskState
from .status import SUCCESS, Status


@dataclass
class HookRegistry:
    """The enabled implementers of each extension point (``framework.HOOKS``), as (tier, plugin)
    in conf order: one typed list per hook, so the dispatchers call the Protocols' methods."""

    job_order: list[tuple[int, JobOrder]] = field(default_factory=list)
    queue_order: list[tuple[int, QueueOrder]] = field(default_factory=list)
    victim_queue_order: list[tuple[int, VictimQueueOrder]] = field(default_factory=list)
    task_order: list[tuple[int, TaskOrder]] = field(default_factory=list)
    preemptable: list[tuple[int, Preemptable]] = field(default_factory=list)
    reclaimable: list[tuple[int, Reclaimable]] = field(default_factory=list)
    preemptive: list[tuple[int, Preemptive]] = field(default_factory=list)
    overused: list[tuple[int, Overused]] = field(default_factory=list)
    allocatable: list[tuple[int, Allocatable]] = field(default_factory=list)
    job_ready: list[tuple[int, JobReady]] = field(default_factory=list)
    job_pipelined: list[tuple[int, JobPipelined]] = field(default_factory=list)
    job_starving: list[tuple[int, JobStarving]] = field(default_factory=list)
    job_valid: list[tuple[int, JobValid]] = field(default_factory=list)
    job_enqueueable: list[tuple[int, JobEnqueueable]] = field(default_factory=list)
    predicate: list[tuple[int, Predicate]] = field(default_factory=list)
    dynamic_fit: list[tuple[int, DynamicFit]] = field(default_factory=list)
    gang_domains: list[tuple[int, GangDomains]] = field(default_factory=list)
    node_score: list[tuple[int, NodeScore]] = field(default_factory=list)
    device_choice: list[tuple[int, DeviceChoice]] = field(default_factory=list)
    event: list[tuple[int, EventHandler]] = field(default_factory=list)


def hook_enabled(pconf: PluginConf, hook: str) -> bool:
    """Does ``pconf`` leave ``hook`` (a key of ``framework.HOOKS``) on; a hook without a switch always is."""
    return pconf.enabled(HOOKS[hook][1])


# Plugin[Any]: plugins of every Args type share the session.
LoadedPlugin = tuple[int, Plugin[Any], PluginConf]


class Dispatch:
    """Mixin for ``Session``: ``self.hooks`` holds the enabled implementers of every hook."""

    hooks: HookRegistry
    loaded: list[tuple[int, Plugin[Any]]]

    def _bind_hooks(self, plugins: Sequence[LoadedPlugin]) -> None:
        """Fill ``self.hooks`` (built empty beforehand, so the placement can hold it) in conf order."""
        self.loaded = [(tier, p) for tier, p, _ in plugins]
        for tier, plugin, pconf in plugins:
            for name, (proto, switch) in HOOKS.items():
                if implements(plugin, proto) and pconf.enabled(switch):
                    getattr(self.hooks, name).append((tier, plugin))
        self._job_order = [p.job_order for _, p in self.hooks.job_order]
        keyed = [p for _, p in self.hooks.job_order if isinstance(p, JobOrderKey)]
        self._job_keys: list[Callable[[JobState], float | int | bool]] | None = (
            [p.job_order_key for p in keyed] if len(keyed) == len(self.hooks.job_order) else None
        )

    # ---- orders: first non-zero comparison wins, then the fallback -------------------------
    def job_before(self, a: JobState, b: JobState) -> bool:
        for fn in self._job_order:
            c = fn(a, b)
            if c:
                return c < 0
        return a.key < b.key

    def job_key(self) -> Callable[[JobState], tuple[Any, ...]] | None:  # keys: whatever each plugin orders by
        """A sort key equivalent to ``job_before`` when every job-order plugin offers one.

        Only valid while the jobs it is taken for do not change, which holds for a heap whose
        popped job is the only one allocated to before it is pushed back.
        """
        fns = self._job_keys
        if fns is None:
            return None
        return lambda job: (*(fn(job) for fn in fns), job.key)

    def queue_before(self, a: QueueState, b: QueueState) -> bool:
        for _, p in self.hooks.queue_order:
            c = p.queue_order(a, b)
            if c:
                return c < 0
        return (a.info.created, a.name) < (b.info.created, b.name)

    def victim_queue_before(self, a: QueueState, b: QueueState, preemptor: QueueState) -> bool:
        for _, p in self.hooks.victim_queue_order:
            c = p.victim_queue_order(a, b, preemptor)
            if c:
                return c < 0
        return not self.queue_before(a, b)

    def task_before(self, a: TaskState, b: TaskState) -> bool:
        for _, p in self.hooks.task_order:
            c = p.task_order(a, b)
            if c:
                return c < 0
        if a.order_index >= 0 and b.order_index >= 0 and a.order_index != b.order_index:
            return a.order_index < b.order_index
        return a.key < b.key

    # ---- victims: intersection within a tier, first non-empty tier decides ---------------
    @staticmethod
    def _victims(
        answers: Sequence[tuple[int, Callable[[TaskState, list[TaskState]], list[TaskState] | None]]],
        preemptor: TaskState,
        candidates: list[TaskState],
    ) -> list[TaskState]:
        # Volcano keeps its "initialised" flag across tiers: once a tier produced a set, an
        # empty answer later leaves nothing to intersect with, so lower tiers cannot add
        # victims (this is what keeps gang's protection in preempt). If the first answering
        # plugin of a tier returns nothing, the next tier decides afresh (seed-02's reclaim).
        victims: list[TaskState] | None = None
        init = False
        for tier in sorted({t for t, _ in answers}):
            for _, answer in (x for x in answers if x[0] == tier):
                got = answer(preemptor, candidates)
                if got is None:
                    continue
                if not got:
                    victims = None
                    break
                if not init:
                    victims, init = list(got), True
                else:
                    keep = {id(t) for t in got}
                    victims = [t for t in (victims or []) if id(t) in keep] or None
            if victims:
                return victims
        return victims or []

    def preemptable(self, preemptor: TaskState, candidates: list[TaskState]) -> list[TaskState]:
        return self._victims([(t, p.preemptable) for t, p in self.hooks.preemptable], preemptor, candidates)

    def reclaimable(self, reclaimer: TaskState, candidates: list[TaskState]) -> list[TaskState]:
        return self._victims([(t, p.reclaimable) for t, p in self.hooks.reclaimable], reclaimer, candidates)

    # ---- combinations ---------------------------------------------------------------------
    @staticmethod
    def _first_rejection(statuses: Iterable[Status]) -> Status:
        """Logical AND over statuses: the first rejecting one, else ``SUCCESS`` (``SKIP`` admits)."""
        for status in statuses:
            # The shared SUCCESS first: it is the usual answer (a hook asked per pod) and the cheapest test.
            if status is not SUCCESS and status.rejects:
                return status
        return SUCCESS

    def allocatable(self, queue: QueueState, task: TaskState) -> Status:
        """The first rejecting plugin's status (its reason names the quota), else ``SUCCESS``."""
        return self._first_rejection(p.allocatable(queue, task) for _, p in self.hooks.allocatable)

    def preemptive(self, queue: QueueState, tasks: list[TaskState]) -> bool:
        return all(p.preemptive(queue, tasks) for _, p in self.hooks.preemptive)

    def overused(self, queue: QueueState) -> bool:
        return any(p.overused(queue) for _, p in self.hooks.overused)

    def job_ready(self, job: JobState) -> bool:
        return all(p.job_ready(job) for _, p in self.hooks.job_ready)

    def job_valid(self, job: JobState) -> Status:
        """The first rejecting plugin's status, else ``SUCCESS``."""
        return self._first_rejection(p.job_valid(job) for _, p in self.hooks.job_valid)

    def job_starving(self, job: JobState) -> bool:
        """Within the first tier that registers a starving function, all must say true."""
        found = False
        tier_seen = None
        for tier, p in self.hooks.job_starving:
            if found and tier != tier_seen:
                return True
            found, tier_seen = True, tier
            if not p.job_starving(job):
                return False
        return found

    @staticmethod
    def _vote(voters: Sequence[tuple[int, Callable[[JobState], Status]]], job: JobState) -> Status:
        """Volcano's votes as statuses (``SUCCESS`` permit, ``SKIP`` abstain, any other code
        reject): a reject ends with that status; a tier with a permit ends with ``SUCCESS``;
        a tier where all abstain passes to the next; when no tier decides, ``SUCCESS``."""
        permit = False
        current = None
        for tier, vote in voters:
            if tier != current:
                if permit:
                    return SUCCESS
                current = tier
            status = vote(job)
            if status is SUCCESS or status.is_success:
                permit = True
            elif status.rejects:
                return status
        return SUCCESS

    def job_pipelined(self, job: JobState) -> Status:
        return self._vote([(t, p.job_pipelined) for t, p in self.hooks.job_pipelined], job)

    def job_enqueueable(self, job: JobState) -> Status:
        return self._vote([(t, p.job_enqueueable) for t, p in self.hooks.job_enqueueable], job)

    def job_enqueued(self, job: JobState) -> None:
        for _, p in self.hooks.job_enqueueable:
            p.job_enqueued(job)

    def domains_for(self, job: JobState) -> GangDomains | None:
        """The first plugin that places ``job`` by domains (``GangDomains``), if any."""
        for _, p in self.hooks.gang_domains:
            if p.wants_domains(job):
                return p
        return None

    def choose_devices(self, task: TaskState, row: int) -> tuple[int, ...]:
        """The first device-choosing plugin's answer; empty lets the node table pick best-fit."""
        for _, p in self.hooks.device_choice:
            devices = p.choose_devices(task, row)
            if devices:
                return tuple(devices)
        return ()

    def fire_allocate(self, task: TaskState) -> None:
        for _, p in self.hooks.event:
            p.on_allocate(task)

    def fire_deallocate(self, task: TaskState) -> None:
        for _, p in self.hooks.event:
            p.on_deallocate(task)
