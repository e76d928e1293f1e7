"""``decide(record, event, now) -> (record, effects)``: one observation in, the reaction out.

Each event is first *observed* (the pod record updated); an observation that changes nothing —
a redelivered event, a pod of an older job version, an unknown pod, a timer already cancelled —
returns the record unchanged and no effects. Otherwise the event is mapped to Volcano's policy
event, the policy resolved, and the action executed in the current phase (or delayed).
"""

from __future__ import annotations

import msgspec

from .machine import Result, Target, execute, settle
from .model import (
    CommandIssued,
    JobEvent,
    JobRecord,
    PodBound,
    PodDeleted,
    PodEvicted,
    PodFailed,
    PodGroupAdmitted,
    PodGroupUnknown,
    PodRecord,
    PodRestarted,
    PodRunning,
    PodStatus,
    PodSucceeded,
    TimerFired,
    _PodEvent,
)
from .policy import INTERNAL_ACTIONS, arm, cancel_all, cancel_for_pod_event, resolve, take_fired
from .status import task_counts

COMMAND_VERBS = {
    "abort": "AbortJob",
    "resume": "ResumeJob",
    "restart": "RestartJob",
    "terminate": "TerminateJob",
    "complete": "CompleteJob",
}


def _unchanged(record: JobRecord) -> Result:
    """The answer to an event that says nothing new: same record, no effects."""
    return record, []


def decide(record: JobRecord, event: JobEvent, now: float) -> Result:
    """React to one event. Pure; idempotent for duplicate and stale events (they change nothing).

    Called by the job-controller service and the simulator for every event about this job, in the
    order they happened; ``now`` is the driver's clock in seconds.
    """
    if isinstance(event, _PodEvent):
        return _on_pod_event(record, event, now)
    if isinstance(event, PodGroupAdmitted):
        if event.job_version != record.version or not record.podgroup_exists or record.podgroup_admitted:
            return _unchanged(record)
        return react(msgspec.structs.replace(record, podgroup_admitted=True), "OutOfSync", Target(), now)
    if isinstance(event, PodGroupUnknown):
        if event.job_version != record.version or not record.podgroup_exists:
            return _unchanged(record)
        return react(record, "Unknown", Target(reason="Unknown"), now)
    if isinstance(event, CommandIssued):
        return _on_command(record, event, now)
    if isinstance(event, TimerFired):
        return _on_timer(record, event, now)
    raise TypeError(f"jobcore.decide: unknown event {type(event).__name__}")


def react(record: JobRecord, policy_event: str, target: Target, now: float, exit_code: int | None = None) -> Result:
    """Resolve the policy for ``policy_event`` and run (or delay) its action."""
    resolution = resolve(record, policy_event, target.task, exit_code)
    reason = f"{policy_event}: {resolution.action}" if resolution.action != "SyncJob" else target.reason
    target = msgspec.structs.replace(target, reason=reason)
    if resolution.timeout is not None:
        return arm(
            record,
            target.pod,
            resolution.action,
            policy_event,
            now + resolution.timeout,
            task=target.task,
            pod=target.pod,
        )
    return run_action(record, resolution.action, target, now)


def run_action(record: JobRecord, action: str, target: Target, now: float) -> Result:
    """Execute an action now, then settle phase changes; a non-internal action cancels all delays."""
    before = record.phase
    record, effects = execute(record, action, target, now)
    record, effects = settle(record, effects, before, now)
    if action not in INTERNAL_ACTIONS:
        record, cancelled = cancel_all(record)
        effects = effects + cancelled
    return record, effects


def _on_command(record: JobRecord, event: CommandIssued, now: float) -> Result:
    if event.id:
        if event.id in record.commands:
            return _unchanged(record)
        record = msgspec.structs.replace(record, commands=[*record.commands, event.id])
    action = COMMAND_VERBS.get(event.action.lower(), event.action)
    return run_action(record, action, Target(task=event.task, pod=event.pod, reason=f"Command {action}"), now)


def _on_timer(record: JobRecord, event: TimerFired, now: float) -> Result:
    record, delayed = take_fired(record, event.key)
    if delayed is None:
        return _unchanged(record)
    target = Target(task=delayed.task, pod=delayed.pod, reason=f"{delayed.event}: {delayed.action} (timeout)")
    return run_action(record, delayed.action, target, now)


# --------------------------------------------------------------------------------------- pod events
def _on_pod_event(record: JobRecord, event: _PodEvent, now: float) -> Result:
    pod = record.pods.get(event.pod)
    if pod is None or pod.version != event.job_version or (event.uid and event.uid != pod.uid):
        return _unchanged(record)
    observed = _observe(record, pod, event, now)
    if observed is None:
        return _unchanged(record)
    record, policy_event = observed
    record, cancelled = cancel_for_pod_event(record, pod.name, policy_event)
    exit_code = event.exit_code if isinstance(event, PodFailed) else None
    target = Target(task=pod.task, pod=pod.name, reason=policy_event)
    record, effects = react(record, policy_event, target, now, exit_code)
    return record, cancelled + effects


def _observe(record: JobRecord, pod: PodRecord, event: _PodEvent, now: float) -> tuple[JobRecord, str] | None:
    """Apply what the event says about the pod; None when it says nothing new (a duplicate)."""
    phase, node = pod.status.phase, pod.status.node
    live = phase in ("Pending", "Running")
    if isinstance(event, PodBound):
        if phase != "Pending" or node is not None:
            return None
        return _set_status(record, pod, node=event.node), "OutOfSync"
    if isinstance(event, PodRunning):
        if phase != "Pending":
            return None
        return _set_status(record, pod, phase="Running", started_at=now), "PodRunning"
    if isinstance(event, (PodSucceeded, PodFailed)):
        if phase == "Terminating":
            # Its container ended by itself while jobcore's delete was on the way: the node has
            # nothing left to stop (so no PodDeleted will come), and the pod is gone as a deleted one
            # is. A pod whose end was already seen (``finished_at``) hears it again: nothing new.
            return (_remove(record, pod), "OutOfSync") if pod.status.finished_at is None else None
        if phase == "Pending" and node is None:
            return None  # never bound, so it never ran: a late report of the pod this one replaced
    if isinstance(event, PodSucceeded):
        if not live:
            return None
        record = _set_status(record, pod, phase="Succeeded", finished_at=now, exit_code=0)
        return record, _succeeded_event(record, pod.task)
    if isinstance(event, PodFailed):
        if not live:
            return None
        ended = {"exit_code": event.exit_code, "reason": event.reason}
        return _set_status(record, pod, phase="Failed", finished_at=now, **ended), "PodFailed"
    if isinstance(event, PodRestarted):
        if not live or event.restarts <= pod.status.container_restarts:
            return None
        ended = {"exit_code": event.exit_code, "reason": event.reason} if event.exit_code is not None else {}
        record = _set_status(record, pod, container_restarts=event.restarts, **ended)
        return record, _restarted_event(record, pod.task)
    return _observe_gone(record, pod, event)


def _observe_gone(record: JobRecord, pod: PodRecord, event: _PodEvent) -> tuple[JobRecord, str] | None:
    phase = pod.status.phase
    if isinstance(event, PodEvicted):
        # Only a pod holding a node can be evicted; a pod that is already finished is not recreated.
        if phase in ("Succeeded", "Failed") or (phase in ("Pending", "Terminating") and pod.status.node is None):
            return None
        return _remove(record, pod), "OutOfSync" if phase == "Terminating" else "PodEvicted"
    if isinstance(event, PodDeleted):
        # Only a pod jobcore deleted (Terminating) can be reported deleted: a redelivered PodDeleted
        # must not remove the pod recreated under the same name. Unlike Volcano, this deletion does
        # not fire PodEvicted policies (a removal jobcore did not ask for is a PodEvicted).
        return (_remove(record, pod), "OutOfSync") if phase == "Terminating" else None
    raise TypeError(f"jobcore.decide: unknown pod event {type(event).__name__}")


def _succeeded_event(record: JobRecord, task: str) -> str:
    replicas = next(t.replicas for t in record.spec.tasks if t.name == task)
    return "TaskCompleted" if task_counts(record)[task].succeeded >= replicas else "OutOfSync"


def _restarted_event(record: JobRecord, task: str) -> str:
    """TaskFailed once the task's Pending/Running pods restarted ≥ task maxRetry times (−1: never)."""
    max_retry = next(t.max_retry for t in record.spec.tasks if t.name == task) or 3
    restarts = sum(
        p.status.container_restarts
        for p in record.pods.values()
        if p.task == task and p.status.phase in ("Pending", "Running")
    )
    return "TaskFailed" if max_retry >= 0 and restarts >= max_retry else "OutOfSync"


def _set_status(record: JobRecord, pod: PodRecord, **changes: object) -> JobRecord:
    # msgspec checks ``changes`` against PodStatus's fields when it replaces them (TypeError otherwise).
    status: PodStatus = msgspec.structs.replace(pod.status, **changes)
    return msgspec.structs.replace(record, pods={**record.pods, pod.name: msgspec.structs.replace(pod, status=status)})


def _remove(record: JobRecord, pod: PodRecord) -> JobRecord:
    pods = {name: p for name, p in record.pods.items() if name != pod.name}
    incarnations = {**record.incarnations, pod.name: record.incarnations.get(pod.name, 0) + 1}
    return msgspec.structs.replace(record, pods=pods, incarnations=incarnations)
