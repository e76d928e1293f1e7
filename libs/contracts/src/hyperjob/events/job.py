"""Facts and commands from a cluster's job-controller.

Volcano Job phases: Pending, Aborting, Aborted, Running, Restarting, Completing, Completed,
Terminating, Terminated, Failed (see jobcore for the transitions). Pod phases: Pending, Running,
Succeeded, Failed, Terminating (deleted, still on its node).

``JobState`` is the job as the cluster-scheduler needs it, on the latest-value subject
``jobstate.<cluster>.<job>.<part>``: big jobs are split into parts of at most ``PART_SIZE`` pods
so that no message grows past the bus's limit; a removed job leaves a tombstone (``deleted``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from .base import Message

PART_SIZE = 256


class PodCounts(msgspec.Struct, frozen=True, kw_only=True):
    """How many pods are in each phase: Volcano's job status counters, of one job or summed.

    The one declaration of these counters. jobcore derives them from a job's pods, the
    job-controller's ``JobPhaseChanged`` carries them, and fleetcore's child and replicated-job
    statuses extend this struct. Its fields are keyword-only on purpose: a struct extending it with
    positional fields encodes those first, as upstream's ``replicatedJobsStatus`` puts ``name``
    and ``jobStates`` before the counters.
    """

    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    terminating: int = 0
    unknown: int = 0

    @staticmethod
    def summed(parts: Iterable[PodCounts]) -> PodCounts:
        """Each counter added up over ``parts`` (any structs extending ``PodCounts``)."""
        totals = dict.fromkeys(PodCounts.__struct_fields__, 0)
        for part in parts:
            for field in totals:
                totals[field] += getattr(part, field)
        return PodCounts(**totals)


class JobPhaseChanged(Message, frozen=True, kw_only=True, tag="job.phase.v2"):
    """A child job's phase changed; ``counts`` are its pods' counters at that moment.

    v2 nests the counters (``PodCounts``) that v1 (``JobPhaseChangedV1``) declared flat.
    """

    cluster: str
    job: str
    hyperjob: str = ""
    replicated_job: str = ""
    old: str
    new: str
    reason: str = ""
    attempt: int = 0  # the HyperJob's plan attempt this child was dispatched for
    retry_count: int = 0
    counts: PodCounts = PodCounts()


class JobPhaseChangedV1(Message, frozen=True, kw_only=True, tag="job.phase.v1"):
    """Retired: what job-controllers published before ``job.phase.v2``. Still read, because a
    stream being upgraded holds some; ``events.decoder`` turns each into ``JobPhaseChanged``."""

    cluster: str
    job: str
    hyperjob: str = ""
    replicated_job: str = ""
    old: str
    new: str
    reason: str = ""
    attempt: int = 0
    retry_count: int = 0
    pending: int = 0
    running: int = 0
    succeeded: int = 0
    failed: int = 0
    terminating: int = 0
    unknown: int = 0

    def upgrade(self) -> JobPhaseChanged:
        """The same fact in the current form (envelope and every field kept)."""
        fields = msgspec.structs.asdict(self)
        counts = PodCounts(**{name: fields.pop(name) for name in PodCounts.__struct_fields__})
        return JobPhaseChanged(**fields, counts=counts)


class JobRemoved(Message, frozen=True, kw_only=True, tag="job.removed.v1"):
    """A child job and every pod of it are gone from ``cluster`` (after ``RemoveChild``), or the
    cluster refused it at dispatch (``reason`` says why: its queue closed meanwhile)."""

    cluster: str
    job: str
    hyperjob: str = ""
    reason: str = ""


class TaskScheduling(msgspec.Struct, frozen=True, kw_only=True):
    """What the scheduler needs of every pod of one task (base units; ``pods: 1`` included).
    ``tolerations`` and ``affinity`` are the pod template's, as Kubernetes writes them."""

    request: dict[str, float]
    priority: int = 1
    priority_class_name: str = ""
    preemption_policy: str = ""
    preemptable: bool = True
    node_selector: dict[str, str] = {}
    tolerations: list[dict[str, Any]] = []
    affinity: dict[str, Any] | None = None
    node_name: str = ""
    topology_policy: str = ""


class PodState(msgspec.Struct, frozen=True, kw_only=True, array_like=True):
    """One pod incarnation as the job-controller knows it (compact: an array on the wire)."""

    name: str
    task: str
    index: int
    uid: str
    version: int
    phase: str
    node: str = ""
    created: float = 0.0


class PodGroupSpec(msgspec.Struct, frozen=True, kw_only=True):
    min_member: int
    min_task_member: dict[str, int] = {}
    min_resources: dict[str, float] = {}
    queue: str
    priority_class_name: str = ""
    priority: int = 0
    job_version: int = 0
    network_topology: dict[str, Any] | None = None


class JobState(Message, frozen=True, kw_only=True, tag="job.state.v1"):
    """Part ``part`` of ``parts`` of a job's scheduling state. ``gang`` names the HyperJob whose
    cross-cluster gang holds the job's pods back; ``podgroup`` is None once it is deleted."""

    cluster: str
    job: str
    uid: str
    version: int
    created: float
    part: int = 0
    parts: int = 1
    namespace: str = "default"
    gang: str = ""
    gang_attempt: int = 0
    deleted: bool = False
    podgroup: PodGroupSpec | None = None
    tasks: dict[str, TaskScheduling] = {}
    pods: list[PodState] = []


class PodMount(msgspec.Struct, frozen=True, kw_only=True):
    """A volume mounted into a pod's main container (``volumeMounts`` joined with ``volumes``):
    ``source`` as Kubernetes names it (``hostPath``, ``emptyDir``, ...), ``host_path`` the node's
    path of a ``hostPath`` volume. An ``emptyDir`` is the node's to make, one per pod and volume."""

    volume: str
    mount_path: str
    source: str = "emptyDir"
    host_path: str = ""
    read_only: bool = False
    sub_path: str = ""  # a path inside the volume mounted instead of its root


class PodStart(msgspec.Struct, frozen=True, kw_only=True):
    """Run one bound pod on its node with its full environment (job plugins, HyperJob env)."""

    pod: str
    uid: str
    node: str
    task: str
    command: list[str] = []
    args: list[str] = []
    env: dict[str, str] = {}
    files: dict[str, str] = {}
    restart_policy: str = "Always"
    sim_duration: float | None = None
    sim_exit_code: int = 0
    # What a container-mode node needs beyond the command: the image, the working directory, the
    # main container's ``resources.limits`` as written ("500m", "64Mi"), and the GPU device indexes
    # the scheduler chose on ``node`` (empty: none recorded, or not a GPU pod).
    image: str = ""
    working_dir: str = ""
    limits: dict[str, str | int | float] = {}
    devices: tuple[int, ...] = ()
    grace_period: float | None = None  # terminationGracePeriodSeconds: SIGTERM, then SIGKILL after it
    mounts: list[PodMount] = []  # the main container's volumeMounts
    requests: dict[str, str | int | float] = {}  # the main container's resources.requests, as written
    # When a container-mode node pulls ``image``: Always, IfNotPresent or Never ("" from a
    # job-controller that predates it: Kubernetes' default for the image, ``api.pull_policy``).
    image_pull_policy: str = ""
    # When the pod's job was created (the job-controller's clock): a peer its env names whose
    # incarnation ended after this was one of its own world (it ran and finished first), so the
    # pod does not wait for it; one that ended before is a former job's of the same name (0: none
    # is taken for its own, as from a job-controller that predates it).
    world_since: float = 0.0


class StartPods(Message, frozen=True, kw_only=True, tag="job.pods.start.v1"):
    cluster: str
    job: str
    job_version: int
    pods: list[PodStart]
    # Only resume the pods a node-agent froze when it was cut off from the bus (issue 33): start
    # nothing that is not there (a pod that ended meanwhile stays ended).
    resume_only: bool = False


class PodStop(msgspec.Struct, frozen=True, kw_only=True):
    pod: str
    node: str
    uid: str = ""
    job: str = ""
    reason: str = ""


class StopPods(Message, frozen=True, kw_only=True, tag="job.pods.stop.v1"):
    cluster: str
    pods: list[PodStop]
