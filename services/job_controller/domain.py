"""Driving jobcore for one job: events in, the record and what to do outside out (pure).

``jobcore.decide`` may ask to delete pods. A pod that never reached a node is gone at once, so it
is reported back (``PodDeleted``) right away; a pod on a node must be stopped there first, and the
node's report brings the ``PodDeleted`` later. This mirrors the simulator's driver.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import msgspec

import jobcore
from jobcore import model as jm


class Outcome(msgspec.Struct, kw_only=True):
    """What the rest of the system must learn or do after some events were decided."""

    record: jm.JobRecord
    stop: list[tuple[str, str]] = []  # (pod, node)
    phase_changes: list[jm.JobPhaseChanged] = []
    podgroup: jm.PodGroupInfo | None = None
    podgroup_deleted: bool = False
    pods_created: bool = False


def run(record: jm.JobRecord, events: list[Any], now: float, initial: list[Any] | None = None) -> Outcome:
    """Decide every event in order, following up on deletions of pods that are on no node."""
    outcome = Outcome(record=record)
    work: deque[Any] = deque(events)
    for effect in initial or []:
        work.extend(_carry_out(outcome, effect))
    while work:
        outcome.record, effects = jobcore.decide(outcome.record, work.popleft(), now)
        for effect in effects:
            work.extend(_carry_out(outcome, effect))
    return outcome


def _carry_out(outcome: Outcome, effect: Any) -> list[Any]:
    if isinstance(effect, jm.DeletePods):
        followups = []
        for name in effect.names:
            pod = outcome.record.pods.get(name)
            if pod is None:
                continue
            if pod.node is None:
                followups.append(jm.PodDeleted(pod=name, job_version=pod.version, uid=pod.uid))
            else:
                outcome.stop.append((name, pod.node))
        return followups
    if isinstance(effect, jm.CreatePods):
        outcome.pods_created = True
    elif isinstance(effect, jm.CreatePodGroup):
        outcome.podgroup, outcome.podgroup_deleted = effect.podgroup, False
    elif isinstance(effect, jm.DeletePodGroup):
        outcome.podgroup, outcome.podgroup_deleted = None, True
    elif isinstance(effect, jm.JobPhaseChanged):
        outcome.phase_changes.append(effect)
    # StartTimer/CancelTimer: the delays live in record.delayed; the timer loop reads them there.
    return []


def pod_event(record: jm.JobRecord, pod: str, uid: str, phase: str, exit_code: int | None,
              restarts: int) -> Any | None:
    """Translate a node's report about a pod into jobcore's event (None: nothing to say).

    The report names the incarnation (``uid``); jobcore ignores one about an older incarnation.
    """
    current = record.pods.get(pod)
    if current is None:
        return None
    common = {"pod": pod, "job_version": current.version, "uid": uid or current.uid}
    if phase == "Running":
        if restarts > current.status.container_restarts:
            return jm.PodRestarted(restarts=restarts, exit_code=exit_code, **common)
        return jm.PodRunning(**common)
    if phase == "Succeeded":
        return jm.PodSucceeded(**common)
    if phase == "Failed":
        return jm.PodFailed(exit_code=exit_code if exit_code is not None else 1, **common)
    if phase == "Deleted":
        return jm.PodDeleted(**common)
    return None


def due_timers(record: jm.JobRecord, now: float) -> list[jm.TimerFired]:
    return [jm.TimerFired(key=key) for key, delayed in sorted(record.delayed.items()) if delayed.at <= now]


def removable(record: jm.JobRecord) -> bool:
    """A job being removed may be forgotten once no pod of it runs anywhere: finished pods hold
    nothing on their nodes, the others must be stopped (and reported gone) first."""
    return all(pod.phase in ("Succeeded", "Failed") for pod in record.pods.values())
