"""Pure pod bookkeeping for a simulated fleet: (state, command, now) → (state, reports)."""

from __future__ import annotations

import msgspec


class RunningPod(msgspec.Struct, frozen=True, kw_only=True):
    pod: str
    uid: str = ""
    job: str
    node: str
    job_version: int
    started_at: float
    finishes_at: float | None
    exit_code: int
    restart_policy: str
    restarts: int = 0


class Report(msgspec.Struct, frozen=True, kw_only=True):
    """A pod phase to report: Running, Succeeded, Failed or Deleted."""

    pod: str
    uid: str
    job: str
    node: str
    job_version: int
    phase: str
    exit_code: int | None = None
    restarts: int = 0


def start(pods: dict[str, RunningPod], pod: RunningPod) -> list[Report]:
    """Start a pod; a repeated start of the same incarnation changes nothing."""
    current = pods.get(pod.pod)
    if current is not None and (current.uid, current.job_version) == (pod.uid, pod.job_version):
        return []
    pods[pod.pod] = pod
    return [_report(pod, "Running")]


def stop(pods: dict[str, RunningPod], name: str) -> list[Report]:
    """Kill a pod (eviction, delete); stopping a pod that is not here reports nothing."""
    pod = pods.pop(name, None)
    return [] if pod is None else [_report(pod, "Deleted")]


def advance(pods: dict[str, RunningPod], now: float) -> list[Report]:
    """Finish every pod whose time has come, in a stable order.

    A failing container under ``OnFailure``/``Always`` restarts in place (the pod stays Running and
    its restarts grow), and so does a succeeding one under ``Always``, as Kubernetes does.
    """
    reports = []
    for name in sorted(n for n, p in pods.items() if p.finishes_at is not None and p.finishes_at <= now):
        pod = pods[name]
        failed = pod.exit_code != 0
        restarts_in_place = pod.restart_policy == "Always" or (failed and pod.restart_policy == "OnFailure")
        if restarts_in_place:
            duration = pod.finishes_at - pod.started_at  # type: ignore[operator]
            pods[name] = msgspec.structs.replace(pod, started_at=now, finishes_at=now + duration, restarts=pod.restarts + 1)
            reports.append(_report(pods[name], "Running"))
            continue
        del pods[name]
        reports.append(_report(pod, "Failed" if failed else "Succeeded", exit_code=pod.exit_code))
    return reports


def _report(pod: RunningPod, phase: str, exit_code: int | None = None) -> Report:
    return Report(pod=pod.pod, uid=pod.uid, job=pod.job, node=pod.node, job_version=pod.job_version, phase=phase,
                  exit_code=exit_code, restarts=pod.restarts)
