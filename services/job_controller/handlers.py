"""One handler per consumed message: load the job, decide with jobcore, write, announce."""

from __future__ import annotations

import asyncio
import random
import time
from collections import defaultdict
from typing import Any

import msgspec

import api
import events
import jobcore
import records
from events import subjects
from jobcore import model as jm
from servicekit import Cause, Reaction, Runtime, emit
from store import Write

from . import domain

PRODUCER = "job-controller"
ADMITTED_PHASES = ("Inqueue", "Running", "Unknown", "Completed")


class JobController:
    def __init__(self, runtime: Runtime, cluster: str) -> None:
        self.rt = runtime
        self.cluster = cluster
        self.kind = records.job_kind(cluster)
        self.pg_kind = records.podgroup_kind(cluster)
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)

    # -- consumed messages ----------------------------------------------------------------------

    async def on_dispatch(self, msg: events.DispatchChild) -> Reaction:
        async with self._locks[msg.child]:
            if await self.rt.store.get(self.kind, msg.child) is not None:
                return Reaction()  # already admitted here: a repeated dispatch changes nothing
            record = await self._admit(msg)
            outcome = domain.run(record, [], time.time(), initial=jobcore.initial_effects(record))
            reaction = self._reaction(msg, outcome, expected_version=0, hyperjob=msg.hyperjob, pod_env={})
            if msg.env_by_pod:
                reaction.writes.append(Write.put(records.podenv_kind(self.cluster), msg.child,
                                                 records.PodEnvDoc(env_by_pod=msg.env_by_pod)))
            if msg.gang:
                # Written with the podgroup, so the scheduler never sees the pods without the gate.
                reaction.writes.append(Write.put(records.gate_kind(self.cluster), msg.child,
                                                 records.GateDoc(gang=msg.gang)))
            return reaction

    async def _admit(self, msg: events.DispatchChild) -> jm.JobRecord:
        manifest = api.decode(msg.job)
        assert isinstance(manifest, api.Job)
        if not manifest.metadata.uid:
            # Each dispatch is a new incarnation of the job: its uid (and so its pods' uids and the
            # ids derived from them) must differ from a deleted job's of the same name, or the
            # bus would drop their messages as duplicates and the dedup markers would swallow them.
            manifest = msgspec.structs.replace(
                manifest, metadata=msgspec.structs.replace(manifest.metadata, uid=msg.event_id))
        queues = {name: doc.decode(records.QueueDoc).state for name, doc in (await self.rt.store.list(records.QUEUE)).items()}
        queues.setdefault(api.DEFAULT_QUEUE, "Open")
        classes = {name: doc.decode(records.PriorityClassDoc).value
                   for name, doc in (await self.rt.store.list(records.PRIORITY_CLASS)).items()}
        rank = jm.RankOverride(rank_offset=msg.rank_offset, world_size=msg.world_size)
        # jobcore's default ssh key pair is derived from the job uid (fine for the simulator's
        # byte-identical output); a live job gets a key pair from the system's randomness.
        return jobcore.admit(manifest, queues, time.time(), classes, rank=rank, extra_env=msg.env,
                             keygen=lambda _uid: jobcore.generate_rsa_keypair(random.SystemRandom()))

    async def on_podgroup_phase(self, msg: events.PodGroupPhaseChanged) -> Reaction:
        def event(record: jm.JobRecord) -> Any:
            if msg.phase == "Unknown":
                return jm.PodGroupUnknown(job_version=record.version)
            if msg.phase in ADMITTED_PHASES and not record.podgroup_admitted:
                return jm.PodGroupAdmitted(job_version=record.version)
            return None

        return await self._feed(msg, msg.job, event)

    async def on_bound(self, msg: events.PodBound) -> Reaction:
        return await self._feed(msg, msg.job, lambda r: jm.PodBound(pod=msg.pod, node=msg.node, uid=msg.pod_uid,
                                                                    job_version=msg.job_version))

    async def on_evicted(self, msg: events.PodEvicted) -> Reaction:
        reaction = await self._feed(msg, msg.job, lambda r: jm.PodEvicted(pod=msg.pod, reason=msg.reason, uid=msg.pod_uid,
                                                                          job_version=msg.job_version))
        # The scheduler took the node's resources back; the node must stop the pod too.
        stop = emit(events.StopPod, msg, "stop-evicted", PRODUCER, cluster=self.cluster, node=msg.node, pod=msg.pod,
                    reason=msg.reason)
        return reaction.publish(subjects.stop_pod(self.cluster), stop)

    async def on_pod_phase(self, msg: events.PodPhaseReported) -> Reaction:
        return await self._feed(msg, msg.job, lambda r: domain.pod_event(r, msg.pod, msg.pod_uid, msg.phase,
                                                                         msg.exit_code, msg.restarts))

    async def on_command(self, msg: events.CommandChild) -> Reaction:
        return await self._feed(msg, msg.child, lambda r: jm.CommandIssued(action=msg.action, id=msg.event_id))

    async def on_remove(self, msg: events.RemoveChild) -> Reaction:
        return await self._feed(msg, msg.child, lambda r: jm.CommandIssued(action="TerminateJob", id=msg.event_id),
                                removing=True)

    # -- timers -----------------------------------------------------------------------------------

    async def fire_due_timers(self) -> None:
        now = time.time()
        for name, doc in (await self.rt.store.list(self.kind)).items():
            record = doc.decode(jm.JobRecord)
            for timer in domain.due_timers(record, now):
                at = record.delayed[timer.key].at
                cause = Cause(event_id=events.derive_id(record.uid, f"timer/{timer.key}/{at}"))
                reaction = await self._feed(cause, name, lambda r, t=timer: t)
                await self.rt.commit("job-controller-timers", cause.event_id, reaction)

    # -- the shared pipeline ----------------------------------------------------------------------

    async def _feed(self, msg: events.Message | Cause, job: str, make_event: Any, removing: bool = False) -> Reaction:
        async with self._locks[job]:
            doc = await self.rt.store.get(self.kind, job)
            if doc is None:
                return Reaction()  # a job this cluster no longer has: nothing to do
            record = doc.decode(jm.JobRecord)
            event = make_event(record)
            if event is None:
                return Reaction()
            outcome = domain.run(record, [event], time.time())
            hyperjob = record.job.metadata.labels.get("volcano.sh/hyperjob-name", "")
            pod_env = await self._pod_env(job) if isinstance(msg, events.PodBound) else {}
            return self._reaction(msg, outcome, expected_version=doc.version, hyperjob=hyperjob, pod_env=pod_env,
                                  removing=removing or record.job.metadata.annotations.get(REMOVING) == "true")

    async def _pod_env(self, job: str) -> dict[str, dict[str, str]]:
        doc = await self.rt.store.get(records.podenv_kind(self.cluster), job)
        return doc.decode(records.PodEnvDoc).env_by_pod if doc is not None else {}

    def _reaction(self, cause: events.Message | Cause, outcome: domain.Outcome, *, expected_version: int, hyperjob: str,
                  pod_env: dict[str, dict[str, str]], removing: bool = False) -> Reaction:
        record = outcome.record
        if removing and record.job.metadata.annotations.get(REMOVING) != "true":
            record = _mark_removing(record)
        reaction = Reaction()
        if removing and domain.removable(record):
            reaction.writes += [Write.delete(self.kind, record.name, expected_version or None),
                                Write.delete(self.pg_kind, record.name),
                                Write.delete(records.podenv_kind(self.cluster), record.name),
                                Write.delete(records.gate_kind(self.cluster), record.name)]
            reaction.publish(subjects.job_removed(self.cluster), emit(
                events.JobRemoved, cause, "removed", PRODUCER, cluster=self.cluster, job=record.name, hyperjob=hyperjob))
            return reaction
        reaction.writes.append(Write.put(self.kind, record.name, record, expected_version))
        self._podgroup_writes(reaction, outcome, record.name)
        self._announce(reaction, cause, outcome, hyperjob, pod_env)
        return reaction

    def _podgroup_writes(self, reaction: Reaction, outcome: domain.Outcome, name: str) -> None:
        if outcome.podgroup is not None:
            reaction.writes.append(Write.put(self.pg_kind, name, outcome.podgroup))
        elif outcome.podgroup_deleted:
            reaction.writes.append(Write.delete(self.pg_kind, name))

    def _announce(self, reaction: Reaction, cause: events.Message | Cause, outcome: domain.Outcome, hyperjob: str,
                  pod_env: dict[str, dict[str, str]]) -> None:
        record = outcome.record
        rj = record.job.metadata.labels.get("volcano.sh/replicatedjob-name", "")
        counts = jobcore.counts(record)
        for i, change in enumerate(outcome.phase_changes):
            reaction.publish(subjects.job_phase(self.cluster), emit(
                events.JobPhaseChanged, cause, f"phase/{i}", PRODUCER, cluster=self.cluster, job=record.name,
                hyperjob=hyperjob, replicated_job=rj, old=change.old, new=change.new, reason=change.reason,
                retry_count=record.retry_count, pending=counts.pending, running=counts.running,
                succeeded=counts.succeeded, failed=counts.failed, terminating=counts.terminating))
        for pod, node in outcome.stop:
            reaction.publish(subjects.stop_pod(self.cluster), emit(
                events.StopPod, cause, f"stop/{pod}", PRODUCER, cluster=self.cluster, node=node, pod=pod))
        if outcome.pods_created or outcome.podgroup is not None:
            reaction.publish(subjects.pods_ready(self.cluster), emit(
                events.PodsReady, cause, "pods-ready", PRODUCER, cluster=self.cluster, job=record.name))
        for bound in _newly_bound(cause, record):
            env, files = jobcore.pod_environment(record, bound.name, pod_env.get(bound.name))
            reaction.publish(subjects.start_pod(self.cluster), emit(
                events.StartPod, cause, f"start/{bound.name}", PRODUCER, cluster=self.cluster, node=bound.node or "",
                pod=bound.name, pod_uid=bound.uid, job=record.name, task=bound.task, job_version=bound.version,
                command=bound.run.command, args=bound.run.args, env={**bound.run.env, **env},
                files={**bound.run.files, **files}, restart_policy=bound.run.restart_policy,
                sim_duration=bound.run.sim_duration, sim_exit_code=bound.run.sim_exit_code))


REMOVING = "hyperjob.io/removing"


def _mark_removing(record: jm.JobRecord) -> jm.JobRecord:
    metadata = msgspec.structs.replace(record.job.metadata,
                                       annotations={**record.job.metadata.annotations, REMOVING: "true"})
    return msgspec.structs.replace(record, job=msgspec.structs.replace(record.job, metadata=metadata))


def _newly_bound(cause: events.Message | Cause, record: jm.JobRecord) -> list[jm.PodRecord]:
    """The pod a binding just placed, if it is still there to start."""
    if not isinstance(cause, events.PodBound):
        return []
    pod = record.pods.get(cause.pod)
    return [pod] if pod is not None and pod.node == cause.node else []
