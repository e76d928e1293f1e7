"""Lifecycle policies: which action an event triggers, and delayed actions (policy timeouts).

Resolution follows Volcano's ``applyPolicies``: internal events (OutOfSync, CommandIssued,
PodRunning) and events without a match give ``SyncJob``; the event's task policies are tried
before the job's, the first match wins; a policy matches on its event(s) (or ``*``) or on its
exitCode; ``PodPending`` only matches a policy with a timeout.

Delayed actions are kept in the record, one per pod name ("" for job-wide events) exactly as
Volcano's ``delayActionMap`` keys them, and realised as timers: ``StartTimer(key, at)`` out,
``TimerFired(key)`` in. Keys carry a sequence number, so a timer that fires after its action was
cancelled (or replaced) finds nothing and is ignored.
"""

from __future__ import annotations

import msgspec

from hyperjob import api

from .model import CancelTimer, DelayedAction, Effect, JobRecord, StartTimer

INTERNAL_EVENTS = frozenset({"OutOfSync", "CommandIssued", "PodRunning"})
INTERNAL_ACTIONS = frozenset({"SyncJob", "EnqueueJob"})


class Resolution(msgspec.Struct, frozen=True, kw_only=True):
    action: str = "SyncJob"
    timeout: float | None = None
    policy: str = ""  # where the matching policy sits, e.g. "task worker policies[0]"


def resolve(record: JobRecord, event: str, task: str = "", exit_code: int | None = None) -> Resolution:
    """The action an event triggers for this job (pure; no state is changed)."""
    if event in INTERNAL_EVENTS:
        return Resolution()
    for where, policies in _policy_lists(record, task):
        for i, policy in enumerate(policies):
            if _matches(policy, event, exit_code):
                timeout = api.parse_duration(policy.timeout) if policy.timeout is not None else None
                return Resolution(action=policy.action, timeout=timeout, policy=f"{where}policies[{i}]")
    return Resolution()


def _policy_lists(record: JobRecord, task: str) -> list[tuple[str, list[api.LifecyclePolicy]]]:
    lists: list[tuple[str, list[api.LifecyclePolicy]]] = []
    for spec in record.spec.tasks:
        if task and spec.name == task:
            lists.append((f"task {task} ", spec.policies))
    lists.append(("job ", record.spec.policies))
    return lists


def _matches(policy: api.LifecyclePolicy, event: str, exit_code: int | None) -> bool:
    if event == "PodPending" and policy.timeout is None:
        return False
    events = [policy.event] if policy.event is not None else policy.events
    if events and (event in events or "*" in events):
        return True
    return policy.exit_code is not None and exit_code is not None and policy.exit_code == exit_code


# ---------------------------------------------------------------------------------- delayed actions
def arm(
    record: JobRecord, scope: str, action: str, event: str, at: float, task: str = "", pod: str = ""
) -> tuple[JobRecord, list[Effect]]:
    """Register a delayed action under ``scope`` (a pod name, or "").

    As in Volcano, an identical action already waiting under the same scope is kept (its timer is
    not restarted); a different one replaces it.
    """
    existing = record.delayed.get(scope)
    if existing is not None and existing.action == action:
        return record, []
    effects: list[Effect] = [CancelTimer(key=existing.key)] if existing is not None else []
    seq = record.timer_seq + 1
    key = f"{record.uid}/delay/{seq}"
    delayed = {**record.delayed, scope: DelayedAction(key=key, action=action, event=event, at=at, task=task, pod=pod)}
    effects.append(StartTimer(key=key, at=at))
    return msgspec.structs.replace(record, delayed=delayed, timer_seq=seq), effects


def cancel_for_pod_event(record: JobRecord, pod: str, event: str) -> tuple[JobRecord, list[Effect]]:
    """Volcano's CleanPodDelayActionsIfNeed: a later non-PodPending event of a pod cancels its
    PodPending delay; the pod becoming Running also cancels its PodFailed/PodEvicted delay."""
    waiting = record.delayed.get(pod)
    if waiting is None or event == "PodPending":
        return record, []
    cancel = waiting.event == "PodPending" or (waiting.event in ("PodFailed", "PodEvicted") and event == "PodRunning")
    if not cancel:
        return record, []
    delayed = {scope: d for scope, d in record.delayed.items() if scope != pod}
    return msgspec.structs.replace(record, delayed=delayed), [CancelTimer(key=waiting.key)]


def cancel_all(record: JobRecord) -> tuple[JobRecord, list[Effect]]:
    """Executing a non-internal action cancels every delayed action of the job (cleanupDelayActions)."""
    if not record.delayed:
        return record, []
    effects: list[Effect] = [CancelTimer(key=d.key) for d in record.delayed.values()]
    return msgspec.structs.replace(record, delayed={}), effects


def take_fired(record: JobRecord, key: str) -> tuple[JobRecord, DelayedAction | None]:
    """Remove and return the delayed action whose timer fired; None for a cancelled or unknown key."""
    for scope, delayed in record.delayed.items():
        if delayed.key == key:
            rest = {s: d for s, d in record.delayed.items() if s != scope}
            return msgspec.structs.replace(record, delayed=rest), delayed
    return record, None
