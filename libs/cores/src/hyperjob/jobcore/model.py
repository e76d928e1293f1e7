"""The values jobcore works with: the job and pod records, the events in and the effects out.

Every struct is frozen; ``decide`` returns new records and never mutates the ones it is given.
Events and effects are tagged (``tag="jobcore.<Name>"``) so a service can decode a union of them
with one msgspec decoder.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from hyperjob import api
from hyperjob.events import PodMount

Phase = Literal[
    "Pending",
    "Aborting",
    "Aborted",
    "Running",
    "Restarting",
    "Completing",
    "Completed",
    "Terminating",
    "Terminated",
    "Failed",
]
PHASES: tuple[str, ...] = (
    "Pending",
    "Aborting",
    "Aborted",
    "Running",
    "Restarting",
    "Completing",
    "Completed",
    "Terminating",
    "Terminated",
    "Failed",
)
PodPhase = Literal["Pending", "Running", "Succeeded", "Failed", "Terminating"]


class _Frozen(msgspec.Struct, frozen=True, kw_only=True):
    """Base of every jobcore struct."""


# --------------------------------------------------------------------------------------------- pods
class PodScheduling(_Frozen, frozen=True, kw_only=True):
    """What the scheduler needs of a pod; ``request`` is in base units and includes ``pods: 1``."""

    request: api.ResourceList
    priority: int = 1
    priority_class_name: str = ""
    preemption_policy: str = ""
    preemptable: bool = True
    node_selector: dict[str, str] = {}
    tolerations: list[api.Toleration] = []
    affinity: api.pod.Affinity | None = None
    scheduler_name: str = "volcano"
    node_name: str = ""  # spec.nodeName: bound there at creation, never scheduled
    topology_policy: str = ""  # tasks[].topologyPolicy of a Guaranteed pod (numa-aware); "" otherwise


class PodRun(_Frozen, frozen=True, kw_only=True):
    """What a node (or the simulator) needs to run a pod: the main container plus plugin env/files.

    ``ports`` are the main container's ports (name → number), the template's and the plugins'.

    ``sim_duration`` / ``sim_exit_code`` come from the ``hyperjob.io/sim-duration`` and
    ``hyperjob.io/sim-exit-code`` annotations (pod template first, then the job's).
    """

    image: str = ""
    # The main container's, as Kubernetes defaults it (``api.pull_policy``).
    image_pull_policy: str = ""
    command: list[str] = []
    args: list[str] = []
    env: dict[str, str] = {}
    files: dict[str, str] = {}
    ports: dict[str, int] = {}
    restart_policy: str = "Always"
    sim_duration: float | None = None
    sim_exit_code: int = 0
    working_dir: str = ""
    limits: dict[str, str | int | float] = {}  # the main container's resources.limits, as written
    grace_period: float | None = None  # the pod's terminationGracePeriodSeconds
    mounts: list[PodMount] = []  # the main container's volumeMounts, each with its volume
    requests: dict[str, str | int | float] = {}  # the main container's resources.requests, as written


class PodStatus(_Frozen, frozen=True, kw_only=True):
    """What has been observed of one incarnation of a pod.

    ``exit_code`` and ``reason`` say how its container last ended, as the node reported it (the
    kubelet's terminated state: ``137``, ``OOMKilled``): the end of a Failed pod, or the last end of
    one restarted in place."""

    phase: PodPhase = "Pending"
    node: str | None = None
    container_restarts: int = 0
    exit_code: int | None = None
    created_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    reason: str = ""


class PodRecord(_Frozen, frozen=True, kw_only=True):
    """One pod of a job, ``<job>-<task>-<index>``.

    ``version`` is the job version that created it (annotation ``volcano.sh/job-version``);
    ``incarnation`` counts the earlier pods of the same name (evicted or deleted and recreated);
    ``uid`` names this incarnation exactly, so a driver that echoes it makes duplicates harmless.
    """

    name: str
    job: str
    namespace: str = "default"
    task: str
    index: int
    version: int = 0
    incarnation: int = 0
    uid: str
    annotations: dict[str, str] = {}
    labels: dict[str, str] = {}
    hostname: str = ""
    subdomain: str = ""
    scheduling: PodScheduling
    run: PodRun
    status: PodStatus = PodStatus()

    @property
    def phase(self) -> str:
        return self.status.phase

    @property
    def node(self) -> str | None:
        return self.status.node

    @property
    def request(self) -> api.ResourceList:
        return self.scheduling.request

    @property
    def restarts(self) -> int:
        """Earlier incarnations plus in-place container restarts (the simulator's ``restarts``)."""
        return self.incarnation + self.status.container_restarts


# ---------------------------------------------------------------------------------------- the job
class SshKeyPair(_Frozen, frozen=True, kw_only=True):
    """``id_rsa`` (PEM, PKCS#1) and ``id_rsa.pub`` (OpenSSH authorized_keys line) texts."""

    private_key: str
    public_key: str


class DelayedAction(_Frozen, frozen=True, kw_only=True):
    """A policy action waiting for its timeout; one per pod name ("" for job-wide), as Volcano keys them."""

    key: str
    action: str
    event: str
    at: float
    task: str = ""
    pod: str = ""


class RankOverride(_Frozen, frozen=True, kw_only=True):
    """Hook for the cross-cluster HyperJob: this child's ranks start at ``rank_offset`` in a world of ``world_size``."""

    rank_offset: int = 0
    world_size: int | None = None


class JobRecord(_Frozen, frozen=True, kw_only=True):
    """One admitted Volcano Job and everything jobcore knows of it.

    ``job`` carries the spec with admission defaults applied. Pod counters are derived from
    ``pods`` (see ``jobcore.counts``), never stored, so they cannot drift. ``world`` is the
    cross-cluster world of a HyperJob child (``api.World``, see ``jobcore.world``).
    """

    name: str
    namespace: str = "default"
    uid: str
    job: api.Job
    created_at: float = 0.0
    phase: Phase = "Pending"
    version: int = 0
    retry_count: int = 0
    priority: int = 0
    priority_classes: dict[str, int] = {}
    podgroup_exists: bool = True
    podgroup_admitted: bool = False
    pods: dict[str, PodRecord] = {}
    incarnations: dict[str, int] = {}
    delayed: dict[str, DelayedAction] = {}
    timer_seq: int = 0
    commands: list[str] = []
    ssh: SshKeyPair | None = None
    rank: RankOverride = RankOverride()
    extra_env: dict[str, str] = {}
    world: api.World | None = None

    @property
    def spec(self) -> api.JobSpec:
        return self.job.spec


class PodGroupInfo(_Frozen, frozen=True, kw_only=True):
    """The PodGroup a job needs; ``min_resources`` excludes ``pods`` (see ``derive_podgroup``)."""

    name: str
    namespace: str = "default"
    min_member: int
    min_task_member: dict[str, int]
    min_resources: api.ResourceList
    queue: str
    priority_class_name: str = ""
    priority: int = 0
    job_version: int = 0
    network_topology: api.NetworkTopology | None = None


# ------------------------------------------------------------------------------------------- events
class PodGroupAdmitted(_Frozen, frozen=True, kw_only=True, tag="jobcore.PodGroupAdmitted"):
    """The job's podgroup reached Inqueue (or later); ``job_version`` is ``PodGroupInfo.job_version``."""

    job_version: int = 0


class PodGroupUnknown(_Frozen, frozen=True, kw_only=True, tag="jobcore.PodGroupUnknown"):
    """The podgroup phase became Unknown (Volcano's JobUnknown event, policy event ``Unknown``)."""

    job_version: int = 0


class _PodEvent(_Frozen, frozen=True, kw_only=True):
    pod: str
    job_version: int = 0
    uid: str = ""


class PodBound(_PodEvent, frozen=True, kw_only=True, tag="jobcore.PodBound"):
    node: str


class PodRunning(_PodEvent, frozen=True, kw_only=True, tag="jobcore.PodRunning"):
    pass


class PodSucceeded(_PodEvent, frozen=True, kw_only=True, tag="jobcore.PodSucceeded"):
    pass


class PodFailed(_PodEvent, frozen=True, kw_only=True, tag="jobcore.PodFailed"):
    exit_code: int = 1
    reason: str = ""  # why its container ended, as the node says it (OOMKilled, Error), if known


class PodEvicted(_PodEvent, frozen=True, kw_only=True, tag="jobcore.PodEvicted"):
    """The pod is gone without jobcore asking (preempt, reclaim, nodeDown)."""

    reason: str = ""


class PodRestarted(_PodEvent, frozen=True, kw_only=True, tag="jobcore.PodRestarted"):
    """A container restarted in place; ``restarts`` is the pod's total restart count now."""

    restarts: int
    exit_code: int | None = None
    reason: str = ""  # why the container ended before this restart (OOMKilled, Error), if known


class PodDeleted(_PodEvent, frozen=True, kw_only=True, tag="jobcore.PodDeleted"):
    """A pod that jobcore deleted (``DeletePods``, so Terminating) is gone; ignored for other pods."""


class CommandIssued(_Frozen, frozen=True, kw_only=True, tag="jobcore.CommandIssued"):
    """A Volcano Command: ``action`` is an action name (``AbortJob``) or a verb (``abort``).

    ``id`` (the Command object's name or uid) makes a redelivered command a no-op; without one,
    the driver must not deliver the same command twice (Volcano's Command CRs are one-shot).
    """

    action: str
    task: str = ""
    pod: str = ""
    id: str = ""


class TimerFired(_Frozen, frozen=True, kw_only=True, tag="jobcore.TimerFired"):
    key: str


JobEvent = (
    PodGroupAdmitted
    | PodGroupUnknown
    | PodBound
    | PodRunning
    | PodSucceeded
    | PodFailed
    | PodEvicted
    | PodRestarted
    | PodDeleted
    | CommandIssued
    | TimerFired
)


# ------------------------------------------------------------------------------------------ effects
class CreatePods(_Frozen, frozen=True, kw_only=True, tag="jobcore.CreatePods"):
    pods: list[PodRecord]


class DeletePods(_Frozen, frozen=True, kw_only=True, tag="jobcore.DeletePods"):
    names: list[str]
    reason: str = ""


class CreatePodGroup(_Frozen, frozen=True, kw_only=True, tag="jobcore.CreatePodGroup"):
    podgroup: PodGroupInfo


class DeletePodGroup(_Frozen, frozen=True, kw_only=True, tag="jobcore.DeletePodGroup"):
    name: str


class JobPhaseChanged(_Frozen, frozen=True, kw_only=True, tag="jobcore.JobPhaseChanged"):
    old: str
    new: str
    reason: str = ""


class StartTimer(_Frozen, frozen=True, kw_only=True, tag="jobcore.StartTimer"):
    key: str
    at: float


class CancelTimer(_Frozen, frozen=True, kw_only=True, tag="jobcore.CancelTimer"):
    key: str


Effect = CreatePods | DeletePods | CreatePodGroup | DeletePodGroup | JobPhaseChanged | StartTimer | CancelTimer
