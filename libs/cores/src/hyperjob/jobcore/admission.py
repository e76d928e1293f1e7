"""Admission: Volcano's webhook defaults and rejections, then the initial ``JobRecord``.

Defaults (``mutate_job.go``): queue ``default``; ``maxRetry`` 3 when 0; task name ``default<i>``;
``task.minAvailable`` = replicas (``minPartitions × partitionSize`` with a partition policy that sets
``minPartitions``); ``task.maxRetry`` 3 when 0; ``job.minAvailable`` = Σ task
minAvailable when 0; plugins tensorflow/mpi/pytorch/ray add ``svc`` and mpi adds ``ssh``.
Rejections are ``api.ManifestError(path, message)``; an admitted job is a value, never an exception.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import get_args

import msgspec

from hyperjob import api
from hyperjob.api import job as api_job

from .model import JobRecord, RankOverride, SshKeyPair
from .sshkeys import deterministic_keygen

DEFAULT_MAX_RETRY = 3
POLICY_EVENTS = frozenset(get_args(api_job.PolicyEvent))
POLICY_ACTIONS = frozenset(get_args(api_job.PolicyAction))
_SVC_PLUGINS = ("tensorflow", "mpi", "pytorch", "ray")

KeyGen = Callable[[str], SshKeyPair]
"""Makes the ssh plugin's key pair from a seed (the job uid). Inject a CSPRNG-backed one in production."""

__all__ = ["DEFAULT_MAX_RETRY", "KeyGen", "admit", "apply_defaults"]


def admit(
    job: api.Job,
    queues: Mapping[str, str],
    now: float,
    priority_classes: Mapping[str, int] | None = None,
    *,
    parents: Mapping[str, str] | None = None,
    keygen: KeyGen | None = None,
    rank: RankOverride | None = None,
    extra_env: Mapping[str, str] | None = None,
) -> JobRecord:
    """Admit a Volcano Job as the webhook would; raise ``api.ManifestError`` naming the field on rejection.

    ``queues`` maps queue name → state (only ``Open`` admits). ``parents`` (queue → parent queue), when
    given, lets admission reject a non-leaf queue. ``priority_classes`` maps PriorityClass name →
    value. ``keygen`` makes the ssh plugin's key pair (default: a pure RSA-2048 generator seeded by
    the job uid — deterministic, fine for the simulator, not for production secrets). ``rank`` and
    ``extra_env`` are the HyperJob hooks (global rank offset / world size, env for every pod); a
    child's cross-cluster world comes with the job itself (annotation ``hyperjob.io/world``).
    The record is Pending with its podgroup (``derive_podgroup``) to be created by the driver.
    """
    _check_spec(job.spec)
    api.check_sim_annotations(job.metadata.annotations, "$.metadata")
    queue = job.spec.queue or api.DEFAULT_QUEUE
    api.check_queue_reference(queue, queues, "$.spec.queue")
    if parents is not None and any(parent == queue for parent in parents.values()):
        raise api.ManifestError("$.spec.queue", f"queue {queue!r} is not a leaf queue (it has child queues)")
    defaulted = apply_defaults(job)
    classes = priority_classes or {}
    uid = job.metadata.uid or f"{job.metadata.namespace}/{job.metadata.name}"
    ssh = (keygen or deterministic_keygen)(uid) if "ssh" in defaulted.spec.plugins else None
    return JobRecord(
        name=job.metadata.name,
        namespace=job.metadata.namespace,
        uid=uid,
        job=defaulted,
        created_at=now,
        priority=classes.get(defaulted.spec.priority_class_name, 0),
        ssh=ssh,
        rank=rank or RankOverride(),
        extra_env=dict(extra_env or {}),
        priority_classes=dict(classes),
        world=_world(job),
    )


def _world(job: api.Job) -> api.World | None:
    """The HyperJob world a child carries (``hyperjob.io/world``), checked: it names this job and its plugins parse."""
    text = job.metadata.annotations.get(api.WORLD_ANNOTATION)
    if text is None:
        return None
    path = f"$.metadata.annotations.{api.WORLD_ANNOTATION}"
    world = api.decode_world(text, path)
    if job.metadata.name not in {child.name for child in world.children}:
        raise api.ManifestError(path, f"the world of HyperJob {world.hyperjob!r} has no child {job.metadata.name!r}")
    api.check_plugins(world.plugins, world.task_names(), f"{path}.plugins", hyperjob=True)
    return world


def apply_defaults(job: api.Job) -> api.Job:
    """The webhook's mutations; idempotent (defaulting a defaulted job changes nothing)."""
    spec = job.spec
    tasks = [_default_task(task, i) for i, task in enumerate(spec.tasks)]
    plugins = {name: list(args) for name, args in spec.plugins.items()}
    if any(name in plugins for name in _SVC_PLUGINS):
        plugins.setdefault("svc", [])
    if "mpi" in plugins:
        plugins.setdefault("ssh", [])
    min_available = spec.min_available or sum(task.min_available or 0 for task in tasks)
    new_spec = msgspec.structs.replace(
        spec,
        tasks=tasks,
        plugins=plugins,
        queue=spec.queue or api.DEFAULT_QUEUE,
        max_retry=spec.max_retry or DEFAULT_MAX_RETRY,
        min_available=min_available,
    )
    return msgspec.structs.replace(job, spec=new_spec)


def _default_task(task: api.TaskSpec, index: int) -> api.TaskSpec:
    return msgspec.structs.replace(
        task,
        name=task.name or f"default{index}",
        min_available=_task_min_available(task),
        max_retry=task.max_retry or DEFAULT_MAX_RETRY,
    )


def _task_min_available(task: api.TaskSpec) -> int:
    """Given, else ``minPartitions × partitionSize`` when the partition policy sets a minimum, else replicas."""
    if task.min_available is not None:
        return task.min_available
    policy = task.partition_policy
    if policy is not None and policy.min_partitions > 0:
        return policy.min_partitions * policy.partition_size
    return task.replicas


def _check_spec(spec: api.JobSpec) -> None:
    """api's checks, plus what a decoded manifest guarantees but a struct built in code may lack."""
    for i, task in enumerate(spec.tasks):
        if task.replicas < 0:
            raise api.ManifestError(f"$.spec.tasks[{i}].replicas", f"{task.replicas} is negative")
        for p, policy in enumerate(task.policies):
            _check_policy_names(policy, f"$.spec.tasks[{i}].policies[{p}]")
    for p, policy in enumerate(spec.policies):
        _check_policy_names(policy, f"$.spec.policies[{p}]")
    api.check_job_spec(spec)  # includes each task's simulation annotations


def _check_policy_names(policy: api.LifecyclePolicy, path: str) -> None:
    if policy.action not in POLICY_ACTIONS:
        raise api.ManifestError(f"{path}.action", f"unknown action {policy.action!r}")
    for j, event in enumerate([policy.event] if policy.event is not None else policy.events):
        if event not in POLICY_EVENTS:
            where = f"{path}.event" if policy.event is not None else f"{path}.events[{j}]"
            raise api.ManifestError(where, f"unknown event {event!r}")
