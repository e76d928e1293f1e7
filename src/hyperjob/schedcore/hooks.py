"""How the session consults plugins: Volcano's tier/vote combination rules, one dispatcher each."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .framework import HOOKS
from .state import JobState, QueueState, TaskState


class Dispatch:
    """Mixin for ``Session``: ``self.hooks[name]`` is [(tier, plugin)] of enabled implementers."""

    hooks: dict[str, list[tuple[int, Any]]]
    loaded: list[tuple[int, Any]]

    def _bind_hooks(self, plugins: list[tuple[int, Any, Any]]) -> None:
        self.loaded = [(tier, p) for tier, p, _ in plugins]
        self.hooks = {name: [] for name in HOOKS}
        for tier, plugin, pconf in plugins:
            for name, (proto, _switch) in HOOKS.items():
                if isinstance(plugin, proto) and (name == "job_valid" or pconf.hook_enabled(name)):
                    self.hooks[name].append((tier, plugin))
        self._job_order = [p.job_order for _, p in self.hooks["job_order"]]
        keyed = all(hasattr(p, "job_order_key") for _, p in self.hooks["job_order"])
        self._job_keys = [p.job_order_key for _, p in self.hooks["job_order"]] if keyed else None

    # ---- orders: first non-zero comparison wins, then the fallback -------------------------
    def job_before(self, a: JobState, b: JobState) -> bool:
        for fn in self._job_order:
            c = fn(a, b)
            if c:
                return c < 0
        return a.key < b.key

    def job_key(self) -> Callable[[JobState], tuple[Any, ...]] | None:
        """A sort key equivalent to ``job_before`` when every job-order plugin offers one.

        Only valid while the jobs it is taken for do not change, which holds for a heap whose
        popped job is the only one allocated to before it is pushed back.
        """
        fns = self._job_keys
        if fns is None:
            return None
        return lambda job: (*(fn(job) for fn in fns), job.key)

    def queue_before(self, a: QueueState, b: QueueState) -> bool:
        for _, p in self.hooks["queue_order"]:
            c = p.queue_order(a, b)
            if c:
                return c < 0
        return (a.info.created, a.name) < (b.info.created, b.name)

    def victim_queue_before(self, a: QueueState, b: QueueState, preemptor: QueueState) -> bool:
        for _, p in self.hooks["victim_queue_order"]:
            if hasattr(p, "victim_queue_order"):
                c = p.victim_queue_order(a, b, preemptor)
                if c:
                    return c < 0
        return not self.queue_before(a, b)

    def task_before(self, a: TaskState, b: TaskState) -> bool:
        for _, p in self.hooks["task_order"]:
            c = p.task_order(a, b)
            if c:
                return c < 0
        if a.order_index >= 0 and b.order_index >= 0 and a.order_index != b.order_index:
            return a.order_index < b.order_index
        return a.key < b.key

    # ---- victims: intersection within a tier, first non-empty tier decides ---------------
    def _victims(self, hook: str, preemptor: TaskState, candidates: list[TaskState]) -> list[TaskState]:
        # Volcano keeps its "initialised" flag across tiers: once a tier produced a set, an
        # empty answer later leaves nothing to intersect with, so lower tiers cannot add
        # victims (this is what keeps gang's protection in preempt). If the first answering
        # plugin of a tier returns nothing, the next tier decides afresh (seed-02's reclaim).
        victims: list[TaskState] | None = None
        init = False
        for tier in sorted({t for t, _ in self.hooks[hook]}):
            for _, p in (x for x in self.hooks[hook] if x[0] == tier):
                got = getattr(p, hook)(preemptor, candidates)
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
        return self._victims("preemptable", preemptor, candidates)

    def reclaimable(self, reclaimer: TaskState, candidates: list[TaskState]) -> list[TaskState]:
        return self._victims("reclaimable", reclaimer, candidates)

    # ---- boolean combinations -----------------------------------------------------------
    def _all(self, hook: str, call: Callable[[Any], bool]) -> bool:
        return all(call(p) for _, p in self.hooks[hook])

    def allocatable(self, queue: QueueState, task: TaskState) -> bool:
        return self._all("allocatable", lambda p: p.allocatable(queue, task))

    def preemptive(self, queue: QueueState, tasks: list[TaskState]) -> bool:
        return self._all("preemptive", lambda p: p.preemptive(queue, tasks))

    def overused(self, queue: QueueState) -> bool:
        return any(p.overused(queue) for _, p in self.hooks["overused"])

    def job_ready(self, job: JobState) -> bool:
        return self._all("job_ready", lambda p: p.job_ready(job))

    def job_valid(self, job: JobState) -> str | None:
        for _, p in self.hooks["job_valid"]:
            reason = p.job_valid(job)
            if reason is not None:
                return str(reason)
        return None

    def job_starving(self, job: JobState) -> bool:
        """Within the first tier that registers a starving function, all must say true."""
        found = False
        tier_seen = None
        for tier, p in self.hooks["job_starving"]:
            if found and tier != tier_seen:
                return True
            found, tier_seen = True, tier
            if not p.job_starving(job):
                return False
        return found

    def _vote(self, hook: str, job: JobState) -> bool:
        """Votes: a reject ends with false; a tier with a permit ends with true; else next tier."""
        permit = False
        current = None
        for tier, p in self.hooks[hook]:
            if tier != current:
                if permit:
                    return True
                current = tier
            res = getattr(p, hook)(job)
            if res < 0:
                return False
            if res > 0:
                permit = True
        return True

    def job_pipelined(self, job: JobState) -> bool:
        return self._vote("job_pipelined", job)

    def job_enqueueable(self, job: JobState) -> bool:
        return self._vote("job_enqueueable", job)

    def job_enqueued(self, job: JobState) -> None:
        for _, p in self.hooks["job_enqueueable"]:
            p.job_enqueued(job)

    def choose_devices(self, task: TaskState, row: int) -> tuple[int, ...]:
        """The first device-choosing plugin's answer; empty lets the node table pick best-fit."""
        for _, p in self.hooks["device_choice"]:
            devices = p.choose_devices(task, row)
            if devices:
                return tuple(devices)
        return ()

    def fire_allocate(self, task: TaskState) -> None:
        for _, p in self.hooks["event"]:
            p.on_allocate(task)

    def fire_deallocate(self, task: TaskState) -> None:
        for _, p in self.hooks["event"]:
            p.on_deallocate(task)
