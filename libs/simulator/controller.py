"""The job-controller's part, driven through jobcore: admission, podgroups, pods, phases, timers.

Every decision is ``jobcore.decide(record, event, now)``; this driver only delivers events and
carries out the effects on the world: pods appear (Pending, ``restarts`` counting the earlier
incarnations) or disappear, the podgroup is created or deleted, phase changes go on the timeline,
timers go on the agenda. Effects are carried out in order through a FIFO, and a deleted pod is
reported back (``PodDeleted``) after the effects that deleted it, as the live system would.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

import api
import jobcore
from jobcore import model as jm

from .world import Job, Pod

if TYPE_CHECKING:
    from .engine import Engine


class JobDriver:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @property
    def world(self) -> Any:
        return self.engine.world

    # -- admission and dispatch ---------------------------------------------------------------

    def admit(self, manifest: api.Job, **hooks: Any) -> jm.JobRecord:
        """Volcano's webhook: defaults and rejections (``api.ManifestError``)."""
        w = self.world
        parents = {name: q.manifest.spec.parent or ("root" if name != "root" and w.hierarchical() else "")
                   for name, q in w.queues.items()}
        classes = {name: pc.value for name, pc in w.priority_classes.items()}
        return jobcore.admit(manifest, w.queue_states(), w.now, classes, parents=parents, **hooks)

    def try_admit(self, manifest: api.Job, **hooks: Any) -> jm.JobRecord | None:
        """``admit`` for a job the system itself recreates (failover): None when refused now."""
        try:
            return self.admit(manifest, **hooks)
        except api.ManifestError:
            return None

    def dispatch(self, job: Job, cluster: str) -> None:
        """The job lands on ``cluster``: its podgroup is created there (phase Pending)."""
        job.cluster = cluster
        job.podgroup = jobcore.derive_podgroup(job.record)
        job.pg_phase = "Pending"
        self.engine.changed = True

    def withdraw(self, job: Job, moving: bool = False) -> None:
        """The job leaves its cluster (deleted, or re-placed by failover): pods and podgroup go.

        A moving job's pods come back elsewhere under the same names; their ``restarts`` keep
        counting the incarnations they had here (jobcore's record starts afresh there).
        """
        for pod in self.world.pods_of(job.name):
            pod.incarnation += 1
            self.world.remove_pod(pod.name)
            if moving:
                self.world.carried_restarts.setdefault(job.name, {})[pod.name] = pod.restarts + 1
        if not moving:
            self.world.carried_restarts.pop(job.name, None)
        job.podgroup = None
        job.cluster = None
        job.pg_phase = "Pending"

    # -- events in ----------------------------------------------------------------------------

    def feed(self, job: Job, event: Any) -> None:
        """Deliver one event to jobcore and carry out its effects (and the follow-ups they cause)."""
        work: deque[tuple[Job, Any]] = deque([(job, event)])
        moved: list[Job] = []  # jobs whose phase changed, told to the fleet once their effects are done
        while work:
            target, ev = work.popleft()
            if target.record is None:
                continue
            old_record = target.record
            target.record, effects = jobcore.decide(old_record, ev, self.world.now)
            if target.record is not old_record:  # decide returns the very record when nothing changed
                self.engine.changed = True
            for effect in effects:
                work.extend(self._apply(target, effect))
                if isinstance(effect, jm.JobPhaseChanged) and all(m is not target for m in moved):
                    moved.append(target)
        for target in moved:
            self.engine.fleet.job_phase_changed(target)

    def _pod_event(self, pod: Pod, cls: type, **fields: Any) -> None:
        job = self.world.jobs.get(pod.job)
        if job is not None:
            self.feed(job, cls(pod=pod.name, job_version=pod.record.version, uid=pod.record.uid, **fields))

    def pod_bound(self, pod: Pod) -> None:
        self._pod_event(pod, jm.PodBound, node=pod.node)
        self._pod_event(pod, jm.PodRunning)

    def pod_succeeded(self, pod: Pod) -> None:
        self._pod_event(pod, jm.PodSucceeded)

    def pod_failed(self, pod: Pod, code: int) -> None:
        self._pod_event(pod, jm.PodFailed, exit_code=code)

    def pod_restarted(self, pod: Pod, code: int | None = None) -> None:
        self._pod_event(pod, jm.PodRestarted, restarts=pod.container_restarts, exit_code=code)

    def pod_evicted(self, pod: Pod, reason: str) -> None:
        """The pod is gone from its node; jobcore's policies decide whether it comes back."""
        self.world.remove_pod(pod.name)
        self._pod_event(pod, jm.PodEvicted, reason=reason)

    def podgroup_admitted(self, job: Job) -> None:
        self.feed(job, jm.PodGroupAdmitted(job_version=job.podgroup.job_version if job.podgroup else 0))

    def podgroup_unknown(self, job: Job) -> None:
        self.feed(job, jm.PodGroupUnknown(job_version=job.podgroup.job_version if job.podgroup else 0))

    def command(self, job: Job, action: str) -> None:
        self.feed(job, jm.CommandIssued(action=action))

    def timer_fired(self, key: tuple[str, str]) -> None:
        job = self.world.jobs.get(key[0])
        if job is not None:
            self.feed(job, jm.TimerFired(key=key[1]))

    # -- effects out --------------------------------------------------------------------------

    def _apply(self, job: Job, effect: Any) -> list[tuple[Job, Any]]:
        w = self.world
        if isinstance(effect, jm.CreatePods):
            for record in effect.pods:
                self._create_pod(job, record)
        elif isinstance(effect, jm.DeletePods):
            gone = []
            for name in effect.names:
                pod = w.remove_pod(name)
                if pod is not None:
                    pod.incarnation += 1
                    gone.append((job, jm.PodDeleted(pod=name, job_version=pod.record.version, uid=pod.record.uid)))
            return gone
        elif isinstance(effect, jm.CreatePodGroup):
            job.podgroup = effect.podgroup
            job.pg_phase = "Pending"
        elif isinstance(effect, jm.DeletePodGroup):
            job.podgroup = None
        elif isinstance(effect, jm.JobPhaseChanged):
            w.emit("JobPhaseChanged", job.name, cluster=job.cluster, reason=effect.reason, phase=effect.new)
        elif isinstance(effect, jm.StartTimer):
            from .events import Timer

            self.engine.agenda.push(effect.at, Timer(self, (job.name, effect.key)), key=("job", job.name, effect.key))
        elif isinstance(effect, jm.CancelTimer):
            self.engine.agenda.cancel(("job", job.name, effect.key))
        return []

    def _create_pod(self, job: Job, record: jm.PodRecord) -> None:
        carried = self.world.carried_restarts.get(job.name, {}).get(record.name, 0)
        self.world.add_pod(Pod(
            name=record.name, job=job.name, task=record.task, index=record.index, cluster=job.cluster or "",
            record=record, restarts=record.incarnation + carried, created=self.world.now))

    # -- what the kubelet and the output need ------------------------------------------------

    @staticmethod
    def sim_duration(pod: Pod) -> float | None:
        return pod.record.run.sim_duration  # type: ignore[no-any-return]

    @staticmethod
    def sim_exit_code(pod: Pod) -> int:
        return int(pod.record.run.sim_exit_code)

    @staticmethod
    def restart_policy(pod: Pod) -> str:
        return str(pod.record.run.restart_policy)

    @staticmethod
    def phase(job: Job) -> str:
        return "Pending" if job.record is None else str(job.record.phase)

    @staticmethod
    def retry_count(job: Job) -> int:
        return 0 if job.record is None else int(job.record.retry_count)
