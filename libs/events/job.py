"""Facts and commands from a cluster's job-controller.

Volcano Job phases: Pending, Aborting, Aborted, Running, Restarting, Completing, Completed,
Terminating, Terminated, Failed (see jobcore for the transitions). Pod phases reported by nodes:
Pending, Running, Succeeded, Failed.
"""

from __future__ import annotations

from .base import Message


class JobPhaseChanged(Message, frozen=True, kw_only=True, tag="job.phase.v1"):
    cluster: str
    job: str
    hyperjob: str = ""
    replicated_job: str = ""
    old: str
    new: str
    reason: str = ""
    retry_count: int = 0
    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    terminating: int = 0
    unknown: int = 0


class PodsReady(Message, frozen=True, kw_only=True, tag="job.pods.ready.v1"):
    """A job's pods exist (Pending) and wait for the cluster-scheduler; a wake-up, not state."""

    cluster: str
    job: str


class StartPod(Message, frozen=True, kw_only=True, tag="job.pod.start.v1"):
    """Run a bound pod on its node with its full environment (job plugins, HyperJob env)."""

    cluster: str
    node: str
    pod: str
    job: str
    task: str
    job_version: int
    command: list[str] = []
    args: list[str] = []
    env: dict[str, str] = {}
    files: dict[str, str] = {}
    restart_policy: str = "Always"
    sim_duration: float | None = None
    sim_exit_code: int = 0
    pod_uid: str = ""  # the pod incarnation; a report about an older one is ignored


class StopPod(Message, frozen=True, kw_only=True, tag="job.pod.stop.v1"):
    cluster: str
    node: str
    pod: str
    reason: str = ""


class JobRemoved(Message, frozen=True, kw_only=True, tag="job.removed.v1"):
    """A child job and every pod of it are gone from ``cluster`` (after ``RemoveChild``)."""

    cluster: str
    job: str
    hyperjob: str = ""
