"""Child Volcano Jobs from a split plan, their template hash, and the diff an update applies."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

import msgspec

from hyperjob import api

from .model import (
    CHILD_INDEX_ANNOTATION,
    CLUSTER_ANNOTATION,
    HYPERJOB_NAME_LABEL,
    RANK_OFFSET_ANNOTATION,
    REPLICATED_JOB_LABEL,
    TEMPLATE_HASH_LABEL,
    WORLD_SIZE_ANNOTATION,
    ChildJob,
    ChildPlan,
    SplitPlan,
)
from .world import world_of


class ChildChanges(msgspec.Struct, frozen=True, kw_only=True):
    """What the splitter does to make the existing children match the desired ones.

    Apply in this order: ``delete`` (names; wait until gone), then ``create`` and ``update``.
    A name in both ``delete`` and ``create`` is a recreate: its task set or cluster changed,
    which Volcano's update rules do not allow in place.
    """

    create: tuple[ChildJob, ...] = ()
    update: tuple[ChildJob, ...] = ()
    delete: tuple[str, ...] = ()
    unchanged: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.create or self.update or self.delete)


def child_jobs(hyperjob: api.HyperJob, plan: SplitPlan) -> list[ChildJob]:
    """Every child of the plan as a full Volcano Job manifest, in plan order.

    Each child's spec is its replicated job's template with the child's task replicas, task and job
    ``minAvailable`` scaled to the child's share, and without the template's job plugins that the
    HyperJob replaces with its own of the same name (``pytorch``, ``mpi``, ``tensorflow``), whose
    per-child view would contradict the HyperJob-wide one (see ``training_env`` and ``world_of``).
    With a world-spanning plugin every child carries the world (annotation ``hyperjob.io/world``).
    """
    replicated = {rj.name: rj for rj in hyperjob.spec.replicated_jobs}
    world = world_of(hyperjob, plan)
    encoded = api.encode_world(world) if world is not None else ""
    return [_child_job(hyperjob, replicated[c.replicated_job], c, plan.world_size, encoded) for c in plan.children]


def _child_job(
    hyperjob: api.HyperJob, rj: api.ReplicatedJob, child: ChildPlan, world_size: int, world: str
) -> ChildJob:
    spec = child_spec(hyperjob, rj.template_spec, child)
    digest = template_hash(
        spec, world_size=world_size, rank_offset=child.rank_offset, wired=bool(hyperjob.spec.plugins), world=world
    )
    labels = {
        HYPERJOB_NAME_LABEL: hyperjob.metadata.name,
        REPLICATED_JOB_LABEL: child.replicated_job,
        TEMPLATE_HASH_LABEL: digest,
    }
    annotations = {
        CHILD_INDEX_ANNOTATION: str(child.index),
        RANK_OFFSET_ANNOTATION: str(child.rank_offset),
        WORLD_SIZE_ANNOTATION: str(world_size),
        CLUSTER_ANNOTATION: child.cluster,
    }
    if world:
        annotations[api.WORLD_ANNOTATION] = world
    template = rj.template_metadata
    metadata = api.ObjectMeta(
        name=child.name,
        namespace=hyperjob.metadata.namespace,
        labels={**(template.labels if template else {}), **labels},
        annotations={**(template.annotations if template else {}), **annotations},
    )
    return ChildJob(
        name=child.name,
        hyperjob=hyperjob.metadata.name,
        replicated_job=child.replicated_job,
        index=child.index,
        cluster=child.cluster,
        replicas=child.replicas,
        job=api.Job(metadata=metadata, spec=spec),
        template_hash=digest,
        rank_offset=child.rank_offset,
        world_size=world_size,
    )


def child_spec(hyperjob: api.HyperJob, template: api.JobSpec, child: ChildPlan) -> api.JobSpec:
    """The template narrowed to the child's tasks and replicas (see ``child_jobs``)."""
    tasks = []
    present = {task.name for task in template.tasks if child.tasks.get(task.name, 0)}
    for task in template.tasks:
        replicas = child.tasks.get(task.name, 0)
        if replicas == 0:
            continue
        min_available = task.min_available
        if min_available is not None and task.replicas and replicas != task.replicas:
            min_available = -(-replicas * min_available // task.replicas)
        tasks.append(api.job.narrowed_task(task, replicas, min_available, present))
    return msgspec.structs.replace(
        template,
        tasks=tasks,
        min_available=child.min_available,
        plugins=_child_plugins(template.plugins, hyperjob.spec.plugins),
    )


def _child_plugins(template: dict[str, list[str]], hyperjob: dict[str, list[str]]) -> dict[str, list[str]]:
    """The template's job plugins less those the HyperJob spans; what they bring along stays
    (svc for every framework, ssh for mpi, as Volcano's admission adds them)."""
    plugins = {
        name: args
        for name, args in template.items()
        if name not in ("pytorch", "mpi", "tensorflow") or name not in hyperjob
    }
    if "mpi" in hyperjob:
        plugins.setdefault("ssh", [])
    if {"mpi", "tensorflow"} & set(hyperjob):
        plugins.setdefault("svc", [])
    return plugins


def template_hash(
    spec: api.JobSpec, *, world_size: int = 0, rank_offset: int = 0, wired: bool = False, world: str = ""
) -> str:
    """A stable hash of a child's spec (dict keys sorted), 16 hex digits.

    With ``wired`` (HyperJob plugins set) the world size, rank offset and world are part of it,
    because the pods' training env depends on them: a change of any must reach every child.
    """
    payload = msgspec.json.encode(spec, order="deterministic")
    if wired:
        payload += f"|{world_size}|{rank_offset}".encode() + (f"|{world}".encode() if world else b"")
    return hashlib.sha256(payload).hexdigest()[:16]


def diff_children(existing: Mapping[str, ChildJob], desired: Sequence[ChildJob]) -> ChildChanges:
    """Compare the children that exist with the desired ones (idempotent: same inputs, same diff).

    Equal hash and cluster → unchanged; a changed hash with the same task names and cluster →
    update; a changed task set or cluster → recreate; an existing child not desired → delete.
    """
    create: list[ChildJob] = []
    update: list[ChildJob] = []
    delete: list[str] = []
    unchanged: list[str] = []
    wanted = {c.name for c in desired}
    for child in desired:
        old = existing.get(child.name)
        if old is None:
            create.append(child)
        elif old.template_hash == child.template_hash and old.cluster == child.cluster:
            unchanged.append(child.name)
        elif old.cluster == child.cluster and _task_names(old) == _task_names(child):
            update.append(child)
        else:
            delete.append(child.name)
            create.append(child)
    delete.extend(name for name in sorted(existing) if name not in wanted)
    return ChildChanges(create=tuple(create), update=tuple(update), delete=tuple(delete), unchanged=tuple(unchanged))


def _task_names(child: ChildJob) -> list[str]:
    return [t.name for t in child.job.spec.tasks]
