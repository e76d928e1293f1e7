"""One handler per consumed message: find the job, decide with jobcore, record, announce.

The job-controller of one cluster keeps every job dispatched there (``job@<cluster>``, jobcore's
record) and what came with the dispatch (``child@<cluster>``). It learns the queues and priority
classes from the configuration stream, and tells the cluster-scheduler what it needs of each job
through the job's latest state (``JobState``, once per job per unit of work), the node-agents
which pods to start or stop (one message per job), and everyone else the job's phase changes.
It runs the fleet's children only while the fleet's lease holds (``lease``: fencing, issue 33).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable

import msgspec

from hyperjob import api, events, jobcore, records
from hyperjob.events import subjects
from hyperjob.jobcore import model as jm
from hyperjob.servicekit import Reaction, Runtime
from hyperjob.telemetry.spans import decision

from . import domain, lease
from .config import Settings

Made = jm.JobEvent | list[jm.JobEvent | None] | None  # what a message means for a job: one event, several, none

ADMITTED_PHASES = ("Inqueue", "Running", "Unknown", "Completed")
LEASE_KEY = "lease"


class JobController:
    def __init__(self, runtime: Runtime, settings: Settings) -> None:
        self.rt = runtime
        self.cluster = settings.cluster
        self.random_keys = settings.ssh_keys == "random"
        self.jobs = runtime.table(f"job@{self.cluster}", jm.JobRecord)
        self.children = runtime.table(f"child@{self.cluster}", records.ChildInfo)
        self.bare = runtime.table(records.bare_podgroup_kind(self.cluster), records.BarePodGroupDoc)
        self.queues: dict[str, str] = {api.DEFAULT_QUEUE: "Open"}
        self.parents: dict[str, str] = {}
        self.classes: dict[str, tuple[int, bool]] = {}
        self.dirty: set[str] = set()  # jobs whose JobState is to be republished by this unit
        self.published: dict[tuple[str, int], str] = {}  # (job, part) -> digest of what went out
        self.leases = runtime.table(f"lease@{self.cluster}", lease.LeaseDoc)
        self.fleet_since: float | None = None  # its first grant to another cluster after our lease lapsed
        self.until = 0.0  # the newest lease to this cluster, by the watch or the consumer (this clock)
        self.ordered_until = 0.0  # the newest lease to this cluster read in order (0: none since start)
        self.checks = lease.CheckClock()
        runtime.on_load(self.rearm)

    # -- configuration ---------------------------------------------------------------------------

    def on_queue(self, msg: events.QueueChanged) -> None:
        if msg.deleted:
            self.queues.pop(msg.name, None)
            self.parents.pop(msg.name, None)
        else:
            self.queues[msg.name] = msg.state
            self.parents[msg.name] = str(msg.manifest.get("spec", {}).get("parent") or "")
        self.queues.setdefault(api.DEFAULT_QUEUE, "Open")

    def on_priority_class(self, msg: events.PriorityClassChanged) -> None:
        if msg.deleted:
            self.classes.pop(msg.name, None)
        else:
            self.classes[msg.name] = (msg.value, msg.global_default)

    # -- dispatches and commands -------------------------------------------------------------------

    def on_dispatch(self, msg: events.DispatchChild) -> Reaction | None:
        if msg.child in self.jobs or msg.child in self.bare:
            return None  # already admitted here: a repeated dispatch changes nothing
        if msg.job.get("kind") == "PodGroup":
            self.bare.put(msg.child, records.BarePodGroupDoc(manifest=msg.job, uid=msg.event_id, created=self.rt.now()))
            self.dirty.add(msg.child)
            return None
        try:
            record = self._admit(msg)
        except api.ManifestError as exc:
            # The cluster refuses it (its queue closed since placement): the child is not here.
            return Reaction().publish(
                subjects.job_removed(self.cluster),
                events.JobRemoved(
                    **self.rt.envelope(msg, "refused"),
                    cluster=self.cluster,
                    job=msg.child,
                    hyperjob=msg.hyperjob,
                    reason=str(exc),
                ),
            )
        info = records.ChildInfo(
            hyperjob=msg.hyperjob,
            replicated_job=msg.replicated_job,
            gang=msg.gang,
            gang_attempt=msg.gang_attempt,
            attempt=msg.attempt,
            world=msg.world,
        )
        self.children.put(msg.child, info)
        outcome = domain.run(record, [], self.rt.now(), initial=jobcore.initial_effects(record))
        return self._apply(msg, outcome, previous=None)

    def _admit(self, msg: events.DispatchChild) -> jm.JobRecord:
        manifest = api.decode(msg.job)
        if not isinstance(manifest, api.Job):
            raise api.ManifestError("$.kind", "a child must be a Volcano Job")
        if not manifest.metadata.uid:
            # Each dispatch is a new incarnation of the job: its uid (and so its pods' uids and the
            # ids derived from them) must differ from a deleted job's of the same name, or the
            # bus would drop their messages as duplicates and the dedup markers would swallow them.
            manifest = msgspec.structs.replace(
                manifest, metadata=msgspec.structs.replace(manifest.metadata, uid=msg.event_id)
            )
        manifest = domain.with_default_priority(manifest, self.classes)
        me = next((c for c in msg.world.plan if c.name == msg.child), None) if msg.world else None
        rank = jm.RankOverride(
            rank_offset=me.rank_offset if me else 0, world_size=msg.world.world_size if msg.world else None
        )
        # jobcore's default ssh key pair is derived from the job uid (what the simulator's
        # byte-identical output needs); a live job gets a key pair from the system's randomness.
        keygen = (lambda _uid: jobcore.generate_rsa_keypair(random.SystemRandom())) if self.random_keys else None
        return jobcore.admit(
            manifest,
            self.queues,
            self.rt.now(),
            {n: v for n, (v, _) in self.classes.items()},
            parents=self.parents,
            rank=rank,
            keygen=keygen,
        )

    def on_command(self, msg: events.CommandChild) -> Reaction | None:
        return self._feed(msg, msg.child, lambda r: jm.CommandIssued(action=msg.action, id=msg.event_id))

    def on_remove(self, msg: events.RemoveChild) -> Reaction | None:
        if msg.child in self.bare:
            self.bare.delete(msg.child)
            self.dirty.add(msg.child)
            return Reaction().publish(
                subjects.job_removed(self.cluster),
                events.JobRemoved(**self.rt.envelope(msg, "removed"), cluster=self.cluster, job=msg.child),
            )
        info = self.children.get(msg.child)
        if info is None:
            return None
        if not info.removing:
            self.children.put(msg.child, msgspec.structs.replace(info, removing=True))
        return self._feed(msg, msg.child, lambda r: jm.CommandIssued(action="TerminateJob", id=msg.event_id))

    # -- the scheduler's news ----------------------------------------------------------------------

    def on_podgroup_phase(self, msg: events.PodGroupPhaseChanged) -> Reaction | None:
        def event(record: jm.JobRecord) -> jm.JobEvent | None:
            if (msg.job_uid, msg.job_version) != (record.uid, record.version):
                return None  # about another incarnation of the job or its podgroup
            if msg.phase == "Unknown":
                return jm.PodGroupUnknown(job_version=record.version)
            if msg.phase in ADMITTED_PHASES and not record.podgroup_admitted:
                return jm.PodGroupAdmitted(job_version=record.version)
            return None

        return self._feed(msg, msg.job, event)

    def on_bound(self, msg: events.PodsBound) -> Reaction | None:
        reaction = self._feed(
            msg,
            msg.job,
            lambda r: [
                jm.PodBound(pod=p.pod, node=p.node, uid=p.uid, job_version=_version(r, p.pod)) for p in msg.pods
            ],
        )
        record = self.jobs.get(msg.job)
        if record is None:
            return reaction
        started = [
            p
            for p in msg.pods
            if (pod := record.pods.get(p.pod)) is not None and (pod.uid, pod.node) == (p.uid, p.node)
        ]
        if started and self._lease().fenced:
            self._hold(record.name)  # the lease lapsed: it starts once the fleet renews it
            return reaction
        if started:
            info = self.children.get(record.name) or records.ChildInfo()
            envs = domain.training_envs(info.world)
            reaction = (reaction or Reaction()).publish(
                subjects.start_pods(self.cluster),
                events.StartPods(
                    **self.rt.envelope(msg, "start"),
                    cluster=self.cluster,
                    job=msg.job,
                    job_version=record.version,
                    pods=[self._start(record, p.pod, envs, p.devices) for p in started],
                ),
            )
        return reaction

    def _start(
        self,
        record: jm.JobRecord,
        name: str,
        envs: Callable[[str, str, int], dict[str, str]],
        devices: tuple[int, ...] = (),
    ) -> events.PodStart:
        pod = record.pods[name]
        world_env = envs(record.name, pod.task, pod.index)
        env, files = jobcore.pod_environment(record, name, world_env)
        run = pod.run
        return events.PodStart(
            pod=name,
            uid=pod.uid,
            node=pod.node or "",
            task=pod.task,
            command=run.command,
            args=run.args,
            env={**run.env, **env},
            files={**run.files, **files},
            restart_policy=run.restart_policy,
            sim_duration=run.sim_duration,
            sim_exit_code=run.sim_exit_code,
            image=run.image,
            image_pull_policy=run.image_pull_policy,
            working_dir=run.working_dir,
            limits=run.limits,
            devices=devices,
            grace_period=run.grace_period,
            mounts=run.mounts,
            requests=run.requests,
            world_since=record.created_at,
        )

    def on_evicted(self, msg: events.PodsEvicted) -> Reaction | None:
        reaction = self._feed(
            msg,
            msg.job,
            lambda r: [
                jm.PodEvicted(pod=p.pod, reason=p.reason, uid=p.uid, job_version=_version(r, p.pod)) for p in msg.pods
            ],
        )
        # The scheduler took the nodes' resources back; the nodes must stop the pods too.
        stop = events.StopPods(
            **self.rt.envelope(msg, "stop-evicted"),
            cluster=self.cluster,
            pods=[events.PodStop(pod=p.pod, node=p.node, uid=p.uid, job=msg.job, reason=p.reason) for p in msg.pods],
        )
        return (reaction or Reaction()).publish(subjects.stop_pods(self.cluster), stop)

    def on_rejected(self, msg: events.PodsRejected) -> Reaction | None:
        """Pods whose named node cannot admit them fail, as a kubelet's admission fails them. Such a
        pod is on that node from its creation (``spec.nodeName``): jobcore hears it bound there
        first, since it takes the end of a pod that was never bound for a late report of an
        earlier incarnation and ignores it."""
        return self._feed(
            msg,
            msg.job,
            lambda r: [
                event
                for p in msg.pods
                for event in (
                    jm.PodBound(pod=p.pod, node=p.node, uid=p.uid, job_version=_version(r, p.pod)),
                    jm.PodFailed(pod=p.pod, uid=p.uid, job_version=_version(r, p.pod), exit_code=1),
                )
            ],
        )

    def on_pod_phases(self, msg: events.PodPhasesReported) -> Reaction | None:
        by_job: dict[str, list[events.PodReport]] = {}
        for report in msg.reports:
            by_job.setdefault(report.job, []).append(report)
        reaction = Reaction()
        for job, reports in sorted(by_job.items()):
            reaction.extend(self._feed(msg, job, _pod_events(reports)))
        return reaction

    # -- the fleet's lease (fencing) ---------------------------------------------------------------

    def _lease(self) -> lease.LeaseDoc:
        return self.leases.get(LEASE_KEY) or lease.LeaseDoc()

    def on_any_lease(self, msg: events.FleetLease) -> None:
        """Any cluster's lease: the fleet is alive and granting (watch). One to this cluster holds it
        even while the ordered consumer lags behind (only the unfence waits for order)."""
        now = self.rt.now()
        if msg.cluster == self.cluster:
            self.until = max(self.until, lease.lease_end(msg))
            if lease.may_run(self.until, now):
                self.fleet_since = None
        elif self.fleet_since is None and not lease.may_run(self.until, now):
            self.fleet_since = now

    def on_lease(self, msg: events.FleetLease) -> Reaction | None:
        """This cluster's lease, in order with its dispatches and removals: the children fenced
        meanwhile start again where they are (those the fleet moved away were removed first)."""
        if msg.cluster != self.cluster:
            return None
        self.on_any_lease(msg)
        now, ordered_until = self.rt.now(), self.ordered_until
        self.ordered_until = max(ordered_until, lease.lease_end(msg))
        doc = self._lease()
        if lease.must_unfence(doc, msg, now):
            self.leases.put(LEASE_KEY, lease.LeaseDoc())
            return self._unfence(msg, doc)
        if lease.must_confirm(ordered_until, msg, now):
            return self._confirm(msg)
        return None

    async def check_lease(self) -> None:
        """Every ``LEASE_CHECK_PERIOD``: a lease lapsed while the fleet speaks stops every child's pods."""
        awake = self.checks.tick(self.rt.now())
        doc = self._lease()
        if not lease.must_fence(doc, self.until, self.rt.now(), self.fleet_since, awake):
            return
        cause = events.derive_id(f"{self.cluster}/lease", f"fence/{self.until!r}")
        await self.rt.commit(cause, self._fence(cause, self.until))

    def _fence(self, cause: str, until: float) -> Reaction:
        stops = [
            events.PodStop(pod=p.name, node=p.node, uid=p.uid, job=name, reason=lease.FENCE_REASON)
            for name, record in self.jobs.items()
            for p in record.pods.values()
            if p.node and p.phase in ("Pending", "Running")
        ]
        held = tuple(sorted(name for name, _ in self.jobs.items()))
        self.leases.put(LEASE_KEY, lease.LeaseDoc(fenced=True, held=held, until=until))
        decision("fleet_lease_lapsed", cluster=self.cluster, until=until, jobs=len(held), pods=len(stops))
        reaction = Reaction()
        if stops:
            reaction.publish(
                subjects.stop_pods(self.cluster),
                events.StopPods(**self.rt.envelope(cause, f"fence/{until!r}"), cluster=self.cluster, pods=stops),
            )
        return reaction

    def _hold(self, job: str) -> None:
        doc = self._lease()
        if job not in doc.held:
            self.leases.put(LEASE_KEY, msgspec.structs.replace(doc, held=tuple(sorted({*doc.held, job}))))

    def _unfence(self, cause: events.FleetLease, doc: lease.LeaseDoc) -> Reaction:
        """Start again, where they are, the pods of every held child this cluster still runs."""
        decision("fleet_lease_renewed", cluster=self.cluster, until=lease.lease_end(cause), jobs=len(doc.held))
        return self._start_again(cause, doc.held, "unfence", resume_only=False)

    def _confirm(self, cause: events.FleetLease) -> Reaction:
        """Our lease had lapsed unread (the bus, or this cluster, cut off): tell the node-agents,
        after every removal read before this grant, which pods the fleet still holds here, so
        those they froze meanwhile run on (``lease.must_confirm``)."""
        jobs = tuple(sorted(self.jobs))
        decision("fleet_lease_confirmed", cluster=self.cluster, until=lease.lease_end(cause), jobs=len(jobs))
        return self._start_again(cause, jobs, "confirm", resume_only=True)

    def on_pods_frozen(self, msg: events.PodsFrozen) -> Reaction | None:
        """A node-agent back from a cut-off asks which pods it froze are still ours: under a lease
        that holds (``lease.may_confirm_asked``), each still this cluster's, the same incarnation on
        the same node, is confirmed (resume only); of the rest the agent kills what waits too long."""
        if not lease.may_confirm_asked(self._lease(), self.ordered_until, self.rt.now()):
            return None
        asked = {(p.pod, p.uid, p.node) for p in msg.pods}
        jobs = tuple(sorted({p.job for p in msg.pods}))
        return self._start_again(msg, jobs, f"asked/{msg.agent}", resume_only=True, only=asked)

    def _start_again(
        self,
        cause: events.FleetLease | events.PodsFrozen,
        jobs: tuple[str, ...],
        step: str,
        resume_only: bool,
        only: set[tuple[str, str, str]] | None = None,
    ) -> Reaction:
        """A ``StartPods`` of the pods on a node of each of ``jobs`` this cluster still runs (of
        those, ``only`` these (pod, uid, node) if given)."""
        reaction = Reaction()
        key = f"{lease.lease_end(cause)!r}" if isinstance(cause, events.FleetLease) else ""
        for name in jobs:
            record, info = self.jobs.get(name), self.children.get(name) or records.ChildInfo()
            if record is None or info.removing:
                continue
            pods = [
                p.name
                for p in record.pods.values()
                if p.node and p.phase in ("Pending", "Running") and (only is None or (p.name, p.uid, p.node) in only)
            ]
            if not pods:
                continue
            envs = domain.training_envs(info.world)
            reaction.publish(
                subjects.start_pods(self.cluster),
                events.StartPods(
                    **self.rt.envelope(cause, f"{step}/{name}/{key}"),
                    cluster=self.cluster,
                    job=name,
                    job_version=record.version,
                    pods=[self._start(record, pod, envs) for pod in pods],
                    resume_only=resume_only,
                ),
            )
        return reaction

    # -- timers ------------------------------------------------------------------------------------

    def rearm(self) -> None:
        """After a (re)load: every delayed action of every job gets its timer again."""
        self.dirty.clear()
        for name, record in self.jobs.items():
            for delayed in record.delayed.values():
                self._arm(name, delayed.key, delayed.at)

    def _arm(self, job: str, key: str, at: float) -> None:
        self.rt.at(at, f"job/{job}/{key}", lambda: self._fire(job, key, at))

    async def _fire(self, job: str, key: str, at: float) -> None:
        record = self.jobs.get(job)
        armed = [d for d in record.delayed.values() if d.key == key] if record is not None else []
        if record is None or not armed or armed[0].at != at:
            return  # cancelled or re-armed since
        cause = events.derive_id(record.uid, f"timer/{key}/{at!r}")
        reaction = self._feed(cause, job, lambda r: jm.TimerFired(key=key))
        await self.rt.commit(cause, reaction)

    # -- the shared pipeline -----------------------------------------------------------------------

    def _feed(self, cause: events.Message | str, job: str, make: Callable[[jm.JobRecord], Made]) -> Reaction | None:
        """Decide the events ``make`` gives for ``job`` (one, a list, or None) and apply them."""
        record = self.jobs.get(job)
        if record is None:
            return None  # a job this cluster no longer has: nothing to do
        made = make(record)
        todo = [e for e in (made if isinstance(made, list) else [made]) if e is not None]
        if not todo:
            return None
        return self._apply(cause, domain.run(record, todo, self.rt.now()), previous=record)

    def _apply(self, cause: events.Message | str, outcome: domain.Outcome, previous: jm.JobRecord | None) -> Reaction:
        record = outcome.record
        info = self.children.get(record.name) or records.ChildInfo()
        reaction = self._announce(cause, outcome, info)
        for timer in outcome.timers:
            if isinstance(timer, jm.StartTimer):
                self._arm(record.name, timer.key, timer.at)
            else:
                self.rt.cancel(f"job/{record.name}/{timer.key}")
        if info.removing and domain.removable(record):
            self.jobs.delete(record.name)
            self.children.delete(record.name)
            self.dirty.add(record.name)
            return reaction.publish(
                subjects.job_removed(self.cluster),
                events.JobRemoved(
                    **self.rt.envelope(cause, "removed"), cluster=self.cluster, job=record.name, hyperjob=info.hyperjob
                ),
            )
        if record is not previous:
            self.jobs.put(record.name, record)
            if previous is None or (record.pods, record.podgroup_exists, record.version) != (
                previous.pods,
                previous.podgroup_exists,
                previous.version,
            ):
                self.dirty.add(record.name)
        return reaction

    def _announce(self, cause: events.Message | str, outcome: domain.Outcome, info: records.ChildInfo) -> Reaction:
        record = outcome.record
        reaction = Reaction()
        counts = jobcore.counts(record)
        for change in outcome.phase_changes:
            decision(
                "job_phase_changed",
                job=record.name,
                hyperjob=info.hyperjob,
                cluster=self.cluster,
                old=change.old,
                new=change.new,
                reason=change.reason,
            )
            reaction.publish(
                subjects.job_phase(self.cluster),
                events.JobPhaseChanged(
                    **self.rt.envelope(cause, f"phase/{record.uid}/{record.version}/{change.old}/{change.new}"),
                    cluster=self.cluster,
                    job=record.name,
                    hyperjob=info.hyperjob,
                    replicated_job=info.replicated_job,
                    old=change.old,
                    new=change.new,
                    reason=change.reason,
                    attempt=info.attempt,
                    retry_count=record.retry_count,
                    counts=counts,
                ),
            )
        if outcome.stop:
            reaction.publish(
                subjects.stop_pods(self.cluster),
                events.StopPods(
                    **self.rt.envelope(cause, f"stop/{record.uid}/" + ",".join(f"{p}:{u}" for p, _, u in outcome.stop)),
                    cluster=self.cluster,
                    pods=[events.PodStop(pod=p, node=n, uid=u, job=record.name) for p, n, u in outcome.stop],
                ),
            )
        return reaction

    # -- the scheduler's view, once per unit of work -----------------------------------------------

    def flush(self) -> Reaction | None:
        """The latest ``JobState`` of every job this unit changed (only the parts that changed)."""
        if not self.dirty:
            return None
        reaction, sent = Reaction(), []
        for job in sorted(self.dirty):
            for part, message, digest in self._states(job):
                if self.published.get((job, part)) != digest:
                    reaction.publish(subjects.job_state(self.cluster, job, part), message)
                    sent.append(((job, part), digest))
        self.dirty.clear()

        async def remember() -> None:
            for key, digest in sent:
                if digest:
                    self.published[key] = digest
                else:
                    self.published.pop(key, None)

        reaction.after.append(remember)
        return reaction

    def _states(self, job: str) -> list[tuple[int, events.JobState, str]]:
        record, info = self.jobs.get(job), self.children.get(job) or records.ChildInfo()
        bare = self.bare.get(job)
        if bare is not None:
            message = self._state(job, domain.bare_state(bare, self.cluster), self.bare.versions.get(job, 0))
            return [(0, message, _digest(message))]
        if record is None:  # removed: a tombstone for every part it had
            parts = sorted(p for j, p in self.published if j == job) or [0]
            return [
                (
                    p,
                    self._state(
                        job,
                        {
                            "cluster": self.cluster,
                            "job": job,
                            "uid": "",
                            "version": 0,
                            "created": 0.0,
                            "part": p,
                            "parts": len(parts),
                            "deleted": True,
                        },
                        f"gone/{self.rt.now()!r}",
                    ),
                    "",
                )
                for p in parts
            ]
        out = []
        for fields in domain.job_state_parts(record, info, self.cluster):
            message = self._state(job, fields, self.jobs.versions.get(job, 0))
            out.append((fields["part"], message, _digest(message)))
        return out

    def _state(self, job: str, fields: domain.StateFields, version: object) -> events.JobState:
        """A part's message; its id names the job's incarnation and record version, so a state
        that returns to an earlier content is still a new message."""
        body = msgspec.json.encode(fields)
        digest = hashlib.sha1(body).hexdigest()
        return events.JobState(
            event_id=events.derive_id(f"{self.cluster}/{job}/{fields['part']}", f"{fields['uid']}/{version}/{digest}"),
            occurred_at=self.rt.now(),
            producer=self.rt.service,
            **fields,
        )


def _digest(message: events.JobState) -> str:
    """What a part says, whatever its id: unchanged parts are not sent again."""
    return hashlib.sha1(msgspec.json.encode(msgspec.structs.replace(message, event_id="", occurred_at=0.0))).hexdigest()


def _version(record: jm.JobRecord, pod: str) -> int:
    current = record.pods.get(pod)
    return current.version if current is not None else record.version


def _pod_events(reports: list[events.PodReport]) -> Callable[[jm.JobRecord], list[jm.JobEvent | None]]:
    """What one job's pod reports say, decided on its record when it is fed."""
    return lambda record: [domain.pod_event(record, report) for report in reports]
