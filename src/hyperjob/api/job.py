"""Volcano Job (``batch.volcano.sh/v1alpha1``, kind ``Job``)."""

from __future__ import annotations

from typing import Literal

from .base import NonNegative, ObjectMeta, Spec
from .pod import PodTemplateSpec

JOB_API_VERSION = "batch.volcano.sh/v1alpha1"

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


class LifecyclePolicy(Spec, frozen=True, kw_only=True):
    action: PolicyAction = "SyncJob"
    event: PolicyEvent | None = None
    events: list[PolicyEvent] = []
    exit_code: int | None = None
    timeout: str | None = None


class NetworkTopology(Spec, frozen=True, kw_only=True):
    mode: Literal["hard", "soft"] = "hard"
    highest_tier_allowed: NonNegative | None = None


class DependsOn(Spec, frozen=True, kw_only=True):
    name: list[str] = []
    iteration: Literal["any", "all"] = "all"


class TaskSpec(Spec, frozen=True, kw_only=True):
    name: str = ""
    replicas: NonNegative = 0
    min_available: NonNegative | None = None
    template: PodTemplateSpec
    policies: list[LifecyclePolicy] = []
    max_retry: int = 0
    depends_on: DependsOn | None = None
    topology_policy: str = ""


class JobSpec(Spec, frozen=True, kw_only=True):
    tasks: list[TaskSpec]
    scheduler_name: str = "volcano"
    min_available: NonNegative = 0
    queue: str = ""
    max_retry: NonNegative = 0
    ttl_seconds_after_finished: NonNegative | None = None
    priority_class_name: str = ""
    min_success: NonNegative | None = None
    policies: list[LifecyclePolicy] = []
    plugins: dict[str, list[str]] = {}
    running_estimate: str | None = None
    network_topology: NetworkTopology | None = None
    volumes: list[dict[str, object]] = []


class Job(Spec, frozen=True, kw_only=True):
    api_version: Literal["batch.volcano.sh/v1alpha1"] = JOB_API_VERSION
    kind: Literal["Job"] = "Job"
    metadata: ObjectMeta
    spec: JobSpec
