"""The ten-phase state machine: what an action does in each phase (Volcano's ``state/*.go``).

``execute(record, action, target, now)`` applies one action in the record's current phase and
returns the new record and effects. The primitives are ``kill_job`` (delete pods not retained,
bump the version, delete the podgroup), ``kill_target`` (delete one task's or one pod's pods) and
``sync_job`` (create the podgroup if missing, create missing pods once it is admitted), followed
by the phase check of the table in ``jobcore``'s docstring.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from hyperjob import api

from .model import CreatePodGroup, CreatePods, DeletePodGroup, DeletePods, Effect, JobPhaseChanged, JobRecord, PodRecord
from .podgroup import derive_podgroup
from .pods import build_pod
from .policy import arm, resolve
from .status import counts, task_counts, total_replicas

TARGET_ACTIONS = frozenset({"RestartTask", "RestartPod", "RestartPartition"})
SOFT_RETAIN = frozenset({"Succeeded", "Failed"})
FINISHED = frozenset({"Completed", "Terminated", "Failed"})

Result = tuple[JobRecord, list[Effect]]


class Target(msgspec.Struct, frozen=True, kw_only=True):
    """What an action is about: the event's task and pod (for KillTarget) and why, for reasons."""

    task: str = ""
    pod: str = ""
    reason: str = ""


def execute(record: JobRecord, action: str, target: Target, now: float) -> Result:
    """Run ``action`` in the record's phase; the caller settles follow-up phases (see ``settle``)."""
    return _STATES[record.phase](record, action, target, now)


def settle(record: JobRecord, effects: list[Effect], before: str, now: float) -> Result:
    """Re-sync after a phase change, as Volcano's job-update event does: e.g. a job that just
    became Completed kills its remaining pods, Aborting with nothing left becomes Aborted."""
    for _ in range(len(_STATES)):  # each pass changes the phase; no cycle is longer than the phase count
        if record.phase == before:
            break
        before = record.phase
        record, more = execute(record, "SyncJob", Target(reason=record.phase), now)
        effects = effects + more
    return record, effects


# ----------------------------------------------------------------------------------------- states
def _pending_or_running(record: JobRecord, action: str, target: Target, now: float) -> Result:
    if action == "RestartJob":
        return _with_phase(kill_job(record, soft=False, reason=target.reason), "Restarting", target.reason, retry=True)
    if action in TARGET_ACTIONS:
        return _with_phase(kill_target(record, action, target), "Restarting", target.reason, retry=True)
    if action == "AbortJob":
        return _with_phase(kill_job(record, soft=True, reason=target.reason), "Aborting", target.reason)
    if action == "CompleteJob":
        return _with_phase(clean_finished(record, reason=target.reason), "Completing", target.reason)
    if action == "TerminateJob":
        return _with_phase(kill_job(record, soft=True, reason=target.reason), "Terminating", target.reason)
    record, effects = sync_job(record, now)
    check = _pending_check if record.phase == "Pending" else _running_check
    phase, reason = check(record)
    return _with_phase((record, effects), phase, reason)


def _restarting(record: JobRecord, action: str, target: Target, now: float) -> Result:
    if action == "SyncJob":
        result = sync_job(record, now)
    elif action in TARGET_ACTIONS:
        result = kill_target(record, action, target)
    else:
        result = kill_job(record, soft=False, reason=target.reason)
    phase, reason = _restarting_check(result[0])
    return _with_phase(result, phase, reason)


def _aborting(record: JobRecord, action: str, target: Target, now: float) -> Result:
    result = kill_job(record, soft=True, reason=target.reason)
    if action == "ResumeJob":
        return _with_phase(result, "Restarting", target.reason, retry=True)
    return _with_phase(result, "Aborted" if _all_gone(result[0]) else "Aborting", "all pods gone")


def _aborted(record: JobRecord, action: str, target: Target, now: float) -> Result:
    if action == "ResumeJob":
        return _with_phase((record, []), "Restarting", target.reason, retry=True)
    return kill_job(record, soft=True, reason=target.reason)


def _ending(final: str) -> Callable[[JobRecord, str, Target, float], Result]:
    def state(record: JobRecord, action: str, target: Target, now: float) -> Result:
        if _terminated(record, action):
            result = kill_job(record, soft=True, reason=target.reason)
        else:
            result = clean_finished(record, reason=target.reason)
            if clean_pod_policy(record) == "None":
                return _with_phase(result, final, "pods left as they are (cleanPodPolicy None)")
        return _with_phase(result, final if _all_gone(result[0]) else record.phase, "all pods gone")

    return state


def _finished(record: JobRecord, action: str, target: Target, now: float) -> Result:
    if _terminated(record, action):
        return kill_job(record, soft=True, reason=record.phase)
    return clean_finished(record, reason=record.phase)


def _terminated(record: JobRecord, action: str) -> bool:
    """A TerminateJob (the job deleted, or a policy's action) stops every running pod whatever the
    cleanPodPolicy: a deleted job's pods go with it, as Kubernetes' garbage collector takes a
    deleted Kubeflow job's pods. The policy is for a job that ends by itself."""
    return action == "TerminateJob" or record.phase in ("Terminating", "Terminated")


_STATES: dict[str, Callable[[JobRecord, str, Target, float], Result]] = {
    "Pending": _pending_or_running,
    "Running": _pending_or_running,
    "Restarting": _restarting,
    "Aborting": _aborting,
    "Aborted": _aborted,
    "Completing": _ending("Completed"),
    "Terminating": _ending("Terminated"),
    "Completed": _finished,
    "Terminated": _finished,
    "Failed": _finished,
}


# ----------------------------------------------------------------------------------------- checks
def _pending_check(record: JobRecord) -> tuple[str, str]:
    c = counts(record)
    if record.spec.min_available <= c.running + c.succeeded + c.failed:
        return "Running", "minAvailable pods running"
    return "Pending", ""


def _running_check(record: JobRecord) -> tuple[str, str]:
    spec, c, replicas = record.spec, counts(record), total_replicas(record)
    if replicas == 0:
        return record.phase, ""
    if spec.min_success is not None and c.succeeded >= spec.min_success:
        return "Completed", "minSuccess pods succeeded"
    if c.succeeded + c.failed == replicas:
        task_min_total = sum(t.min_available or 0 for t in spec.tasks)
        per_task = task_counts(record)
        if spec.min_available >= task_min_total and any(
            per_task[t.name].succeeded < (t.min_available or 0) for t in spec.tasks
        ):
            return "Failed", "a task has fewer succeeded pods than its minAvailable"
        if spec.min_success is not None and c.succeeded < spec.min_success:
            return "Failed", "fewer succeeded pods than minSuccess"
        if c.succeeded >= spec.min_available:
            return "Completed", "all pods finished"
        return "Failed", "fewer succeeded pods than minAvailable"
    if c.pending > replicas - spec.min_available:
        return "Pending", "too many pods pending"
    return "Running", ""


def _restarting_check(record: JobRecord) -> tuple[str, str]:
    if record.retry_count >= record.spec.max_retry:
        return "Failed", f"retried {record.retry_count} times (maxRetry {record.spec.max_retry})"
    if total_replicas(record) - counts(record).terminating >= record.spec.min_available:
        return "Pending", "restarted"
    return "Restarting", ""


def _all_gone(record: JobRecord) -> bool:
    c = counts(record)
    return c.terminating == 0 and c.pending == 0 and c.running == 0


def _with_phase(result: Result, phase: str, reason: str, retry: bool = False) -> Result:
    record, effects = result
    if retry:
        record = msgspec.structs.replace(record, retry_count=record.retry_count + 1)
    if phase == record.phase:
        return record, effects
    changed = JobPhaseChanged(old=record.phase, new=phase, reason=reason)
    return msgspec.structs.replace(record, phase=phase), [*effects, changed]


# ------------------------------------------------------------------------------------- primitives
def kill_job(record: JobRecord, soft: bool, reason: str) -> Result:
    """Delete every pod whose phase is not retained, delete the podgroup, bump the version.

    On the last retry (retryCount ≥ maxRetry−1) soft retain is used whatever was asked. Unlike
    Volcano, the version is bumped only when something was deleted, so repeating a kill (every
    event in a finished phase) is a no-op and ``decide`` stays idempotent.
    """
    soft = soft or record.retry_count >= record.spec.max_retry - 1
    doomed = [
        p
        for p in record.pods.values()
        if p.status.phase != "Terminating" and not (soft and p.status.phase in SOFT_RETAIN)
    ]
    return _kill(record, doomed, reason)


def clean_pod_policy(record: JobRecord) -> str:
    """The Kubeflow ``runPolicy.cleanPodPolicy`` the job was translated with (``api.kubeflow``
    carries it as an annotation); ``Running``, a Volcano Job's own rule, when none was given."""
    return record.job.metadata.annotations.get(api.CLEAN_POD_POLICY_ANNOTATION, "Running")


def clean_finished(record: JobRecord, reason: str) -> Result:
    """A finishing (Completing, Terminating) or finished job's pods, as its cleanPodPolicy says, as
    the Kubeflow operators do: ``Running`` deletes the running pods and keeps the finished ones (for
    ``logs``), ``All`` deletes every pod, ``None`` leaves every pod as it is (running ones run on).
    The podgroup is deleted whatever the policy."""
    policy = clean_pod_policy(record)
    if policy == "All":
        return _kill(record, [p for p in record.pods.values() if p.status.phase != "Terminating"], reason)
    if policy == "None":
        return _kill(record, [], reason)
    return kill_job(record, soft=True, reason=reason)


def _kill(record: JobRecord, doomed: list[PodRecord], reason: str) -> Result:
    """Delete ``doomed`` and the podgroup and bump the version, unless nothing is left to delete."""
    if not doomed and not record.podgroup_exists:
        return record, []
    record, effects = _mark_terminating(record, doomed, reason)
    if record.podgroup_exists:
        effects.append(DeletePodGroup(name=record.name))
    return msgspec.structs.replace(
        record, version=record.version + 1, podgroup_exists=False, podgroup_admitted=False
    ), effects


def kill_target(record: JobRecord, action: str, target: Target) -> Result:
    """KillTarget: delete the target pod (RestartPod) or every pod of the target task; keep the podgroup.

    RestartPartition deletes the pods of the target pod's partition (pod ``index // partitionSize``
    of the task's ``partitionPolicy``); without a partition policy it restarts the whole task.
    """
    if action == "RestartPod":
        doomed = [record.pods[target.pod]] if target.pod in record.pods else []
    elif action == "RestartPartition" and (partition := _partition_of(record, target.pod)) is not None:
        task, size, group = partition
        doomed = [p for p in record.pods.values() if p.task == task and p.index // size == group]
    else:
        task = target.task or (record.pods[target.pod].task if target.pod in record.pods else "")
        doomed = [p for p in record.pods.values() if p.task == task]
    return _mark_terminating(record, [p for p in doomed if p.status.phase != "Terminating"], target.reason)


def dependencies_met(record: JobRecord, task: api.TaskSpec) -> bool:
    """Volcano's ``waitDependsOnTaskMeetCondition``: may the task's pods be created now?

    A named task is ready once at least its ``minAvailable`` pods are Running or Succeeded. With
    ``iteration: any`` and several names, one ready task is enough; otherwise all must be. A
    dependency that stops running later does not remove pods already created (as in Volcano).
    """
    depends = task.depends_on
    if depends is None or not depends.name:
        return True
    ready = [_task_ready(record, name) for name in depends.name]
    return any(ready) if depends.iteration == "any" and len(ready) > 1 else all(ready)


def _task_ready(record: JobRecord, name: str) -> bool:
    task = next((t for t in record.spec.tasks if t.name == name), None)
    if task is None:
        return True  # admission refuses unknown names; a record built in code is not blocked forever
    started = sum(1 for p in record.pods.values() if p.task == name and p.status.phase in ("Running", "Succeeded"))
    wanted = task.replicas if task.min_available is None else task.min_available
    return started >= wanted


def _partition_of(record: JobRecord, pod_name: str) -> tuple[str, int, int] | None:
    """(task, partitionSize, partition index) of a pod whose task has a partition policy."""
    pod = record.pods.get(pod_name)
    if pod is None:
        return None
    task = next((t for t in record.spec.tasks if t.name == pod.task), None)
    if task is None or task.partition_policy is None:
        return None
    size = task.partition_policy.partition_size
    return task.name, size, pod.index // size


def _mark_terminating(record: JobRecord, doomed: list[PodRecord], reason: str) -> Result:
    if not doomed:
        return record, []
    pods = dict(record.pods)
    for pod in doomed:
        pods[pod.name] = msgspec.structs.replace(pod, status=msgspec.structs.replace(pod.status, phase="Terminating"))
    return msgspec.structs.replace(record, pods=pods), [DeletePods(names=[p.name for p in doomed], reason=reason)]


def sync_job(record: JobRecord, now: float) -> Result:
    """Create the podgroup if it is missing; once it is admitted, create every missing pod.

    Pods exist only after the podgroup reached Inqueue (``PodGroupAdmitted``), and a task with
    ``dependsOn`` gets its pods only once the tasks it names run (``dependencies_met``). A created pod whose
    PodPending policy has a timeout arms that delayed action.
    """
    effects: list[Effect] = []
    if not record.podgroup_exists:
        record = msgspec.structs.replace(record, podgroup_exists=True, podgroup_admitted=False)
        effects.append(CreatePodGroup(podgroup=derive_podgroup(record)))
    if not record.podgroup_admitted:
        return record, effects
    created = [
        build_pod(record, task, i, now)
        for task in record.spec.tasks
        if dependencies_met(record, task)
        for i in range(task.replicas)
        if f"{record.name}-{task.name}-{i}" not in record.pods
    ]
    if not created:
        return record, effects
    created = [msgspec.structs.replace(p, status=msgspec.structs.replace(p.status, created_at=now)) for p in created]
    record = msgspec.structs.replace(record, pods={**record.pods, **{p.name: p for p in created}})
    effects.append(CreatePods(pods=created))
    for pod in created:
        resolution = resolve(record, "PodPending", pod.task)
        if resolution.timeout is not None:
            record, armed = arm(
                record, pod.name, resolution.action, "PodPending", now + resolution.timeout, task=pod.task, pod=pod.name
            )
            effects += armed
    return record, effects
