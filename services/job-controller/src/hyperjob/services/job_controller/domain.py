"""Driving jobcore for one job, and what the rest of the system learns from it (pure).

``jobcore.decide`` may ask to delete pods. A pod that never reached a node is gone at once, so it
is reported back (``PodDeleted``) right away; a pod on a node must be stopped there first, and the
node's report brings the ``PodDeleted`` later.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

import msgspec

from hyperjob import api, events, fleetcore, jobcore, records
from hyperjob.jobcore import model as jm

REPLICATED_JOB_LABEL = fleetcore.REPLICATED_JOB_LABEL
HYPERJOB_LABEL = fleetcore.HYPERJOB_NAME_LABEL


class Outcome(msgspec.Struct, kw_only=True):
    """What the rest of the system must learn or do after some events were decided."""

    record: jm.JobRecord
    stop: list[tuple[str, str, str]] = []  # (pod, node, uid)
    phase_changes: list[jm.JobPhaseChanged] = []
    timers: list[jm.StartTimer | jm.CancelTimer] = []


# ``events.JobState`` keyword fields (plain data: hashed as JSON first), checked by its constructor.
StateFields = dict[str, Any]


def run(record: jm.JobRecord, todo: list[jm.JobEvent], now: float, initial: list[jm.Effect] | None = None) -> Outcome:
    """Decide every event in order, following up on deletions of pods that are on no node."""
    outcome = Outcome(record=record)
    work: deque[jm.JobEvent] = deque(todo)
    for effect in initial or []:
        work.extend(_carry_out(outcome, effect))
    while work:
        outcome.record, effects = jobcore.decide(outcome.record, work.popleft(), now)
        for effect in effects:
            work.extend(_carry_out(outcome, effect))
    return outcome


def _carry_out(outcome: Outcome, effect: jm.Effect) -> list[jm.JobEvent]:
    if isinstance(effect, jm.DeletePods):
        followups: list[jm.JobEvent] = []
        for name in effect.names:
            pod = outcome.record.pods.get(name)
            if pod is None:
                continue
            if pod.node is None:
                followups.append(jm.PodDeleted(pod=name, job_version=pod.version, uid=pod.uid))
            else:
                outcome.stop.append((name, pod.node, pod.uid))
        return followups
    if isinstance(effect, jm.JobPhaseChanged):
        outcome.phase_changes.append(effect)
    elif isinstance(effect, jm.StartTimer | jm.CancelTimer):
        outcome.timers.append(effect)
    # CreatePods / CreatePodGroup / DeletePodGroup: the record says it all (``job_state``).
    return []


def pod_event(record: jm.JobRecord, report: events.PodReport) -> jm.JobEvent | None:
    """A node's report about a pod as jobcore's event (None: nothing to say). The report names the
    incarnation (``uid``); jobcore ignores one about an older incarnation."""
    current = record.pods.get(report.pod)
    if current is None:
        return None
    pod, version, uid = report.pod, current.version, report.uid or current.uid
    if report.phase == "Running":
        if report.restarts > current.status.container_restarts:
            return jm.PodRestarted(
                restarts=report.restarts,
                exit_code=report.exit_code,
                reason=report.reason,
                pod=pod,
                job_version=version,
                uid=uid,
            )
        return jm.PodRunning(pod=pod, job_version=version, uid=uid)
    if report.phase == "Succeeded":
        return jm.PodSucceeded(pod=pod, job_version=version, uid=uid)
    if report.phase == "Failed":
        exit_code = report.exit_code if report.exit_code is not None else 1
        return jm.PodFailed(exit_code=exit_code, reason=report.reason, pod=pod, job_version=version, uid=uid)
    if report.phase == "Deleted":
        return jm.PodDeleted(pod=pod, job_version=version, uid=uid)
    return None


def removable(record: jm.JobRecord) -> bool:
    """A job being removed may be forgotten once no pod of it runs anywhere: finished pods hold
    nothing on their nodes, the others must be stopped (and reported gone) first."""
    return all(pod.phase in ("Succeeded", "Failed") for pod in record.pods.values())


def with_default_priority(job: api.Job, classes: Mapping[str, tuple[int, bool]]) -> api.Job:
    """A job that names no PriorityClass gets the ``globalDefault`` one, as Kubernetes' admission does."""
    if job.spec.priority_class_name:
        return job
    default = sorted(name for name, (_, is_default) in classes.items() if is_default)
    if not default:
        return job
    return msgspec.structs.replace(job, spec=msgspec.structs.replace(job.spec, priority_class_name=default[0]))


def training_envs(world: events.World | None) -> Callable[[str, str, int], dict[str, str]]:
    """The cross-cluster training environment of the pods of a HyperJob's child, as a function of
    (child, task, index). The HyperJob is decoded once for all the pods a bind starts: decoding it
    per pod was 45 % of the job-controller's CPU under load."""
    if world is None:
        return lambda child, task, index: {}
    hyperjob = api.expect_kind(api.decode_stored(world.hyperjob), api.HyperJob)
    plan = fleetcore.plan_in_force(hyperjob.metadata.name, world.plan, world.world_size)
    return functools.partial(fleetcore.training_env, hyperjob, plan)


# -- what the cluster-scheduler sees of a job ------------------------------------------------------


def job_state_parts(record: jm.JobRecord, info: records.ChildInfo, cluster: str) -> list[StateFields]:
    """The job's scheduling state as ``JobState`` fields, split into parts of at most
    ``events.PART_SIZE`` pods (task order, then index). A job without pods has one part."""
    order = {t.name: i for i, t in enumerate(record.spec.tasks)}
    pods = sorted(record.pods.values(), key=lambda p: (order.get(p.task, len(order)), p.task, p.index))
    tasks: dict[str, events.TaskScheduling] = {}
    for pod in pods:
        tasks.setdefault(pod.task, _task_scheduling(pod.scheduling))
    states = [
        events.PodState(
            name=p.name,
            task=p.task,
            index=p.index,
            uid=p.uid,
            version=p.version,
            phase=p.phase,
            node=p.node or "",
            created=p.status.created_at,
        )
        for p in pods
    ]
    chunks = [states[i : i + events.PART_SIZE] for i in range(0, len(states), events.PART_SIZE)] or [[]]
    podgroup = _podgroup(record) if record.podgroup_exists else None
    common = {
        "cluster": cluster,
        "job": record.name,
        "uid": record.uid,
        "version": record.version,
        "created": record.created_at,
        "parts": len(chunks),
        "namespace": record.namespace,
        "gang": info.gang,
        "gang_attempt": info.gang_attempt,
        "podgroup": podgroup,
    }
    return [
        {
            **common,
            "part": i,
            "tasks": {t: s for t, s in tasks.items() if any(p.task == t for p in chunk)},
            "pods": chunk,
        }
        for i, chunk in enumerate(chunks)
    ]


def bare_state(doc: records.BarePodGroupDoc, cluster: str) -> StateFields:
    """The ``JobState`` of a PodGroup applied on its own: its podgroup, no pods."""
    pg = api.expect_kind(api.decode_stored(doc.manifest), api.PodGroup)
    spec = pg.spec
    resources = api.quantity.parse_resource_list(spec.min_resources) if spec.min_resources is not None else {}
    topology = msgspec.to_builtins(spec.network_topology) if spec.network_topology is not None else None
    podgroup = events.PodGroupSpec(
        min_member=spec.min_member,
        min_task_member=dict(spec.min_task_member),
        min_resources=resources,
        queue=spec.queue or api.DEFAULT_QUEUE,
        priority_class_name=spec.priority_class_name,
        network_topology=topology,
    )
    return {
        "cluster": cluster,
        "job": pg.metadata.name,
        "uid": doc.uid,
        "version": 0,
        "created": doc.created,
        "part": 0,
        "parts": 1,
        "podgroup": podgroup,
    }


def _podgroup(record: jm.JobRecord) -> events.PodGroupSpec:
    pg = jobcore.derive_podgroup(record)
    topology = msgspec.to_builtins(pg.network_topology) if pg.network_topology is not None else None
    return events.PodGroupSpec(
        min_member=pg.min_member,
        min_task_member=dict(pg.min_task_member),
        min_resources=dict(pg.min_resources),
        queue=pg.queue,
        priority_class_name=pg.priority_class_name,
        priority=pg.priority,
        job_version=pg.job_version,
        network_topology=topology,
    )


def _task_scheduling(s: jm.PodScheduling) -> events.TaskScheduling:
    return events.TaskScheduling(
        request=dict(s.request),
        priority=s.priority,
        priority_class_name=s.priority_class_name,
        preemption_policy=s.preemption_policy,
        preemptable=s.preemptable,
        node_selector=dict(s.node_selector),
        tolerations=[msgspec.to_builtins(t) for t in s.tolerations],
        affinity=msgspec.to_builtins(s.affinity) if s.affinity is not None else None,
        node_name=s.node_name,
        topology_policy=s.topology_policy,
    )
