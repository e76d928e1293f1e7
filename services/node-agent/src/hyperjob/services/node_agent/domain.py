"""Pure pod bookkeeping for a node-agent: (state, command, now) → (state, reports).

The same rules serve both modes: a simulated pod finishes when its duration is up (``advance``),
an exec-mode pod when its process exits (``exited``). A container that fails under
``OnFailure``/``Always``, or succeeds under ``Always``, restarts in place as Kubernetes does.
"""

from __future__ import annotations

import re

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


class DownNode(msgspec.Struct, frozen=True, kw_only=True):
    """A node an injected ``node-down`` fault took down, until its ``node-up``."""

    since: float


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
    reason: str = ""  # why the container ended (OOMKilled, Error, ...), when known
    # When it happened, where that is not when it is reported (0): a simulated pod that came due, or
    # a process that exited, while the agent could not record it (its store away) ended then.
    at: float = 0.0


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


def failed(pods: dict[str, RunningPod], names: list[str], exit_code: int, reason: str) -> list[Report]:
    """Take ``names`` off the node as Failed with ``reason`` (lost to a restart, fenced), in order."""
    return [_report(pods.pop(name), "Failed", exit_code=exit_code, reason=reason) for name in sorted(names)]


def advance(pods: dict[str, RunningPod], now: float, still_until: float = 0.0) -> list[Report]:
    """Finish every simulated pod whose time has come, in a stable order, each reported as
    happening at its due time: a timer that fired late (its store away) does not make it run on.
    Pods stood still until ``still_until`` (frozen, their node down), so none ended before then."""
    reports = []
    due = {n: p.finishes_at for n, p in pods.items() if p.finishes_at is not None and p.finishes_at <= now}
    for name in sorted(due):
        pod = pods[name]  # each exit changes only its own pod: this is still the one found due
        duration = due[name] - pod.started_at
        ended = exited(pods, name, pod.uid, pod.exit_code, now, next_duration=duration)
        reports += [msgspec.structs.replace(r, at=max(due[name], still_until)) for r in ended]
    return reports


def exited(
    pods: dict[str, RunningPod],
    name: str,
    uid: str,
    exit_code: int,
    now: float,
    next_duration: float | None = None,
    reason: str = "",
) -> list[Report]:
    """The container of pod ``name`` (incarnation ``uid``) ended with ``exit_code``.

    Restarting in place keeps the pod Running with one more restart (a simulated pod runs
    ``next_duration`` again); otherwise it is Succeeded or Failed (with ``reason``, as the kubelet's
    ``OOMKilled``) and leaves the node. An exit of
    an incarnation that is no longer here (stopped, replaced) reports nothing.
    """
    pod = pods.get(name)
    if pod is None or pod.uid != uid:
        return []
    if restarts_in_place(pod.restart_policy, exit_code):
        finishes = now + next_duration if next_duration is not None else None
        pods[name] = msgspec.structs.replace(pod, started_at=now, finishes_at=finishes, restarts=pod.restarts + 1)
        return [_report(pods[name], "Running", exit_code=exit_code, reason=reason, at=now)]
    del pods[name]
    return [_report(pod, "Failed" if exit_code != 0 else "Succeeded", exit_code=exit_code, reason=reason, at=now)]


def restarts_in_place(restart_policy: str, exit_code: int) -> bool:
    return restart_policy == "Always" or (exit_code != 0 and restart_policy == "OnFailure")


# ``<pod>.<subdomain>``: the svc plugin's pod hostnames, which only a cluster DNS would resolve.
_POD_HOST = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\.[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LOOPBACK = "127.0.0.1"


def _host_vars(env: dict[str, str]) -> list[str]:
    """The variables that name hosts: ``MASTER_ADDR`` and every ``*_ADDR`` / ``*_HOSTS``."""
    return [key for key in env if key == "MASTER_ADDR" or key.endswith(("_ADDR", "_HOSTS"))]


def pod_hosts(env: dict[str, str]) -> set[str]:
    """The pods whose hostnames (``<pod>.<subdomain>``, also inside comma-separated lists) the
    env's host variables name: where each runs must be known before the pod starts."""
    return {item.split(".", 1)[0] for key in _host_vars(env) for item in env[key].split(",") if _POD_HOST.match(item)}


def resolve_hosts(env: dict[str, str], addresses: dict[str, str], here: str) -> dict[str, str]:
    """The pod env with each pod hostname in its host variables replaced by the address of the
    node that pod runs on (``addresses``: pod -> node address), for there is no cluster DNS.

    Pods run on their host's network, each on its own ports, so a pod is reached at its node's
    address. A peer on this machine (its address is ``here``) is 127.0.0.1, as is a pod whose
    address is unknown (an agent that reports none: every pod on one machine, as before). Other
    variables and values are left alone.
    """
    out = dict(env)
    for key in _host_vars(env):
        out[key] = ",".join(_resolve(item, addresses, here) for item in env[key].split(","))
    return out


def _resolve(item: str, addresses: dict[str, str], here: str) -> str:
    if not _POD_HOST.match(item):
        return item
    address = addresses.get(item.split(".", 1)[0], "")
    return LOOPBACK if address in ("", here) else address


def local_env(env: dict[str, str]) -> dict[str, str]:
    """The pod env with the pod hostnames still in it mapped to 127.0.0.1 (``resolve_hosts``
    knowing no pod's address): the runtimes' last word on names the agent left unresolved."""
    return resolve_hosts(env, {}, "")


def _report(pod: RunningPod, phase: str, exit_code: int | None = None, reason: str = "", at: float = 0.0) -> Report:
    return Report(
        pod=pod.pod,
        uid=pod.uid,
        job=pod.job,
        node=pod.node,
        job_version=pod.job_version,
        phase=phase,
        exit_code=exit_code,
        restarts=pod.restarts,
        reason=reason,
        at=at,
    )
