"""Volcano Job (``batch.volcano.sh/v1alpha1``, kind ``Job``).

Field set and bounds follow Volcano's CRD (volcano-sh/volcano ed72c7c81,
``staging/src/volcano.sh/apis/pkg/apis/batch/v1alpha1/job.go``): counts are ``int32``, so a
value Kubernetes' API server would refuse (more than 2^31-1) is refused here too. The checks of
Volcano's validating webhook that need only the Job itself (``pkg/webhooks/admission/jobs/validate``:
``validatePolicies``, ``validatePartitionPolicy``, the task-dependency DAG) run when the manifest is
decoded, in ``__post_init__``, and fail with the path of the object and the field named in the
message (``$.spec: policies[1].event: duplicate event PodFailed across different policies``).
"""

from __future__ import annotations

import zoneinfo
from typing import Annotated, Final, Literal, get_args

import croniter
import msgspec

from .base import ObjectMeta, Opaque, Spec
from .pod import PodTemplateSpec

JOB_API_VERSION: Final = "batch.volcano.sh/v1alpha1"
INT32_MAX = 2**31 - 1

Int32 = Annotated[int, msgspec.Meta(ge=0, le=INT32_MAX)]
"""A non-negative Kubernetes ``int32``."""
PositiveInt32 = Annotated[int, msgspec.Meta(ge=1, le=INT32_MAX)]

PolicyEvent = Literal[
    "*",
    "PodFailed",
    "PodEvicted",
    "PodPending",
    "PodRunning",
    "TaskCompleted",
    "TaskFailed",
    "Unknown",
    "OutOfSync",
    "CommandIssued",
    "JobUpdated",
]
PolicyAction = Literal[
    "AbortJob",
    "RestartJob",
    "RestartTask",
    "RestartPod",
    "RestartPartition",
    "TerminateJob",
    "CompleteJob",
    "ResumeJob",
    "SyncJob",
    "EnqueueJob",
]
NumaPolicy = Literal["", "none", "best-effort", "restricted", "single-numa-node"]
"""``tasks[].topologyPolicy`` (the CRD's enum); honoured by the scheduler's ``numa-aware`` plugin."""


class LifecyclePolicy(Spec, frozen=True, kw_only=True):
    action: PolicyAction = "SyncJob"
    event: PolicyEvent | None = None
    events: list[PolicyEvent] = []
    exit_code: Annotated[int, msgspec.Meta(ge=-(2**31), le=INT32_MAX)] | None = None
    timeout: str | None = None


class NetworkTopology(Spec, frozen=True, kw_only=True):
    mode: Literal["hard", "soft"] = "hard"
    highest_tier_allowed: Int32 | None = None


class DependsOn(Spec, frozen=True, kw_only=True):
    """Task start dependency: the task's pods are created once the tasks named here run.

    ``iteration: all`` (the default) waits for every named task, ``any`` for one of them; a named
    task "runs" once at least its ``minAvailable`` pods are Running or Succeeded (Volcano's
    ``waitDependsOnTaskMeetCondition``).
    """

    name: list[str] = []
    iteration: Literal["any", "all"] = "all"


class PartitionPolicy(Spec, frozen=True, kw_only=True):
    """``tasks[].partitionPolicy``: the task's pods in ``totalPartitions`` groups of ``partitionSize``.

    ``minPartitions`` > 0 sets the task's ``minAvailable`` to ``minPartitions × partitionSize``
    (Volcano's mutating webhook), and ``RestartPartition`` restarts the failed pod's group (pod
    ``index // partitionSize``). A per-partition ``networkTopology`` (sub-group placement under one
    HyperNode) is refused by name: the scheduler places whole jobs under a HyperNode, not groups.
    """

    total_partitions: PositiveInt32
    partition_size: PositiveInt32
    min_partitions: Int32 = 0
    network_topology: NetworkTopology | None = None

    def __post_init__(self) -> None:
        if self.network_topology is not None:
            raise ValueError(
                "networkTopology: a per-partition network topology is not supported (HyperJob places a "
                "whole job under one HyperNode with spec.networkTopology, not each partition)"
            )


class TaskSpec(Spec, frozen=True, kw_only=True):
    name: str = ""
    replicas: Int32 = 0
    min_available: Int32 | None = None
    template: PodTemplateSpec
    policies: list[LifecyclePolicy] = []
    max_retry: Annotated[int, msgspec.Meta(le=INT32_MAX)] = 0
    depends_on: DependsOn | None = None
    topology_policy: NumaPolicy = ""
    partition_policy: PartitionPolicy | None = None

    def __post_init__(self) -> None:
        check_policies(self.policies, "policies")
        _check_partition_policy(self)


class JobSpec(Spec, frozen=True, kw_only=True):
    tasks: list[TaskSpec]
    scheduler_name: str = "volcano"
    min_available: Int32 = 0
    queue: str = ""
    max_retry: Int32 = 0
    ttl_seconds_after_finished: Int32 | None = None
    priority_class_name: str = ""
    min_success: PositiveInt32 | None = None
    policies: list[LifecyclePolicy] = []
    plugins: dict[str, list[str]] = {}
    running_estimate: str | None = None
    network_topology: NetworkTopology | None = None
    volumes: list[dict[str, object]] = []

    def __post_init__(self) -> None:
        check_policies(self.policies, "policies")
        check_task_dependencies(self.tasks)


class Job(Spec, frozen=True, kw_only=True):
    api_version: Literal["batch.volcano.sh/v1alpha1"] = JOB_API_VERSION
    kind: Literal["Job"] = "Job"
    metadata: ObjectMeta
    spec: JobSpec


def policy_events(policy: LifecyclePolicy) -> list[str]:
    """The events a policy reacts to (``event`` and ``events`` together, each once)."""
    listed = [*policy.events, *([policy.event] if policy.event is not None else [])]
    return list(dict.fromkeys(listed))


# What Volcano's webhook lets a user write in an event policy (``policyEventMap``, ``policyActionMap``):
# PodRunning, OutOfSync and CommandIssued are the controller's own events, SyncJob and EnqueueJob its
# own actions (an event policy that names no action means SyncJob, and is refused too).
_CONTROLLER_EVENTS = ("PodRunning", "OutOfSync", "CommandIssued")
_CONTROLLER_ACTIONS = ("SyncJob", "EnqueueJob")
USER_POLICY_EVENTS = tuple(e for e in get_args(PolicyEvent) if e not in _CONTROLLER_EVENTS)
USER_POLICY_ACTIONS = tuple(a for a in get_args(PolicyAction) if a not in _CONTROLLER_ACTIONS)


def check_policies(policies: list[LifecyclePolicy], path: str) -> None:
    """Volcano's ``validatePolicies``: events and actions a user may write; an event or an exit code
    belongs to one policy of the list only, and ``*`` stands alone. (A repeated event would make the
    action that runs depend on list order.)"""
    seen_events: set[str] = set()
    seen_codes: set[int] = set()
    for p, policy in enumerate(policies):
        events = policy_events(policy)
        for event in events:
            if event not in USER_POLICY_EVENTS:
                raise ValueError(
                    f"{path}[{p}]: {event} is not an event a policy may name (one of {', '.join(USER_POLICY_EVENTS)})"
                )
        if events and policy.action not in USER_POLICY_ACTIONS:
            raise ValueError(
                f"{path}[{p}].action: {policy.action} is not a policy action (one of {', '.join(USER_POLICY_ACTIONS)})"
            )
        for event in events:
            if event in seen_events:
                raise ValueError(f"{path}[{p}]: duplicate event {event} across different policies")
            seen_events.add(event)
        if policy.exit_code is not None:
            if policy.exit_code in seen_codes:
                raise ValueError(f"{path}[{p}].exitCode: duplicate exitCode {policy.exit_code}")
            seen_codes.add(policy.exit_code)
    if "*" in seen_events and len(seen_events) > 1:
        raise ValueError(f"{path}: a policy for event * leaves no room for policies on other events")


def task_names(tasks: list[TaskSpec]) -> list[str]:
    """Task names as admission defaults them (``default<i>`` for an unnamed task)."""
    return [task.name or f"default{i}" for i, task in enumerate(tasks)]


def check_task_dependencies(tasks: list[TaskSpec]) -> None:
    """Every ``dependsOn`` names another task of the job, and the dependencies form a DAG
    (Volcano's webhook: "job has dependencies between tasks, but doesn't form a directed acyclic graph")."""
    names = task_names(tasks)
    graph: dict[str, list[str]] = {}
    for i, task in enumerate(tasks):
        if task.depends_on is None:
            continue
        if not task.depends_on.name:
            raise ValueError(f"tasks[{i}].dependsOn.name: names no task")
        for j, wanted in enumerate(task.depends_on.name):
            if wanted not in names:
                raise ValueError(f"tasks[{i}].dependsOn.name[{j}]: {wanted!r} is not a task of this job")
            if wanted == names[i]:
                raise ValueError(f"tasks[{i}].dependsOn.name[{j}]: a task cannot depend on itself")
        graph[names[i]] = list(task.depends_on.name)
    cycle = _cycle(graph)
    if cycle:
        raise ValueError(f"tasks: dependsOn does not form a directed acyclic graph ({' -> '.join(cycle)})")


def _cycle(graph: dict[str, list[str]]) -> list[str]:
    """One dependency cycle of ``graph`` (task → the tasks it waits for), or [] if there is none."""
    done: set[str] = set()

    def visit(node: str, trail: list[str]) -> list[str]:
        if node in trail:
            return [*trail[trail.index(node) :], node]
        if node in done:
            return []
        for nxt in graph.get(node, []):
            found = visit(nxt, [*trail, node])
            if found:
                return found
        done.add(node)
        return []

    for start in graph:
        found = visit(start, [])
        if found:
            return found
    return []


def _check_partition_policy(task: TaskSpec) -> None:
    """Volcano's ``validatePartitionPolicy``: the partitions tile the replicas, and minPartitions the minimum."""
    policy = task.partition_policy
    if policy is None:
        return
    if task.replicas != policy.total_partitions * policy.partition_size:
        raise ValueError(
            f"partitionPolicy: replicas ({task.replicas}) must equal totalPartitions × partitionSize "
            f"({policy.total_partitions} × {policy.partition_size})"
        )
    if policy.min_partitions > policy.total_partitions:
        raise ValueError(
            f"partitionPolicy.minPartitions: {policy.min_partitions} is more than totalPartitions "
            f"({policy.total_partitions})"
        )
    minimum = policy.min_partitions * policy.partition_size
    if task.min_available is not None and policy.min_partitions > 0 and task.min_available != minimum:
        raise ValueError(
            f"minAvailable: {task.min_available} must equal minPartitions × partitionSize "
            f"({policy.min_partitions} × {policy.partition_size} = {minimum})"
        )


class JobTemplateSpec(Spec, frozen=True, kw_only=True):
    """A CronJob's ``jobTemplate``: the metadata and spec of every Job it creates."""

    metadata: Opaque = {}
    spec: JobSpec


class CronJobSpec(Spec, frozen=True, kw_only=True):
    """Volcano's ``batch.volcano.sh/v1alpha1`` CronJob (Kubernetes CronJob semantics, Volcano Jobs).

    ``schedule`` is standard 5-field cron (or an ``@hourly``-style macro) in ``timeZone`` (default
    UTC); a ``TZ=`` prefix is refused, as Kubernetes does. Runs are decided by ``jobcore.cronjob``.
    """

    schedule: str
    time_zone: str | None = None
    starting_deadline_seconds: Annotated[int, msgspec.Meta(ge=0)] | None = None
    concurrency_policy: Literal["Allow", "Forbid", "Replace"] = "Allow"
    suspend: bool = False
    job_template: JobTemplateSpec
    successful_jobs_history_limit: Int32 = 3
    failed_jobs_history_limit: Int32 = 1

    def __post_init__(self) -> None:
        if "TZ=" in self.schedule:
            raise ValueError("schedule: a TZ= or CRON_TZ= prefix is not allowed; set timeZone")
        if not croniter.croniter.is_valid(self.schedule):
            raise ValueError(f"schedule: {self.schedule!r} is not a valid cron schedule")
        if self.time_zone is not None:
            try:
                zoneinfo.ZoneInfo(self.time_zone)
            except (zoneinfo.ZoneInfoNotFoundError, ValueError):
                raise ValueError(f"timeZone: unknown time zone {self.time_zone!r}") from None


class CronJob(Spec, frozen=True, kw_only=True):
    api_version: Literal["batch.volcano.sh/v1alpha1"] = JOB_API_VERSION
    kind: Literal["CronJob"] = "CronJob"
    metadata: ObjectMeta
    spec: CronJobSpec


def narrowed_task(task: TaskSpec, replicas: int, min_available: int | None, present: set[str]) -> TaskSpec:
    """``task`` with ``replicas`` of its template's, as one child of a split HyperJob holds it.

    ``present`` are the tasks the child keeps. A ``dependsOn`` name of a task held by other children
    only is dropped: start order across clusters is not kept (a child waits only for its own tasks).
    A partition policy is scaled to the child's whole partitions (``minPartitions`` in proportion,
    which then sets ``minAvailable``); a child holding a part of a partition keeps no partition policy.
    """
    depends_on = task.depends_on
    if depends_on is not None:
        names = [name for name in depends_on.name if name in present]
        depends_on = msgspec.structs.replace(depends_on, name=names) if names else None
    policy = task.partition_policy
    if policy is not None:
        if replicas % policy.partition_size:
            policy = None
        else:
            total = replicas // policy.partition_size
            least = min(total, -(-total * policy.min_partitions // policy.total_partitions))
            policy = msgspec.structs.replace(policy, total_partitions=total, min_partitions=least)
            min_available = least * policy.partition_size if least else min_available
    return msgspec.structs.replace(
        task, replicas=replicas, min_available=min_available, depends_on=depends_on, partition_policy=policy
    )
