"""Pure parts of the splitter: what an applied object must refer to, the plan of a HyperJob's
children, the changes a new plan makes, and what the rest of the system is told."""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import msgspec

from hyperjob import api, events, fleetcore, records

ROOT_QUEUE = "root"


# -- references ----------------------------------------------------------------------------------


class Config(msgspec.Struct, frozen=True, kw_only=True):
    """The configuration an applied object is checked against: queue states and parents,
    priority classes (value, globalDefault), and the clusters the splitter knows."""

    queues: dict[str, str]
    parents: dict[str, str]
    classes: dict[str, tuple[int, bool]]
    clusters: list[str]

    def is_leaf(self, queue: str) -> bool:
        """A queue is a leaf unless another queue names it as parent (root always has children)."""
        if queue == ROOT_QUEUE and any(self.parents.values()):
            return False
        return queue not in self.parents.values()

    def priority_values(self) -> dict[str, int]:
        """Class name → value, with ``""`` (no class named) → the ``globalDefault`` class's value."""
        values = {name: value for name, (value, _) in self.classes.items()}
        default = sorted(name for name, (_, is_default) in self.classes.items() if is_default)
        if default:
            values[""] = values[default[0]]
        return values


def config(
    queues: Mapping[str, records.QueueDoc], classes: Mapping[str, records.PriorityClassDoc], clusters: list[str]
) -> Config:
    states = {name: doc.state for name, doc in queues.items()}
    states.setdefault(api.DEFAULT_QUEUE, "Open")
    parents = {name: str(doc.manifest.get("spec", {}).get("parent") or "") for name, doc in queues.items()}
    return Config(
        queues=states,
        parents=parents,
        clusters=clusters,
        classes={name: (doc.value, doc.global_default) for name, doc in classes.items()},
    )


def check_job_references(spec: api.JobSpec, path: str, cfg: Config) -> None:
    """A Job's queue must exist, be Open and be a leaf; its PriorityClass must exist."""
    api.check_queue_reference(spec.queue, cfg.queues, f"{path}.queue")
    queue = spec.queue or api.DEFAULT_QUEUE
    if not cfg.is_leaf(queue):
        raise api.ManifestError(f"{path}.queue", f"queue {queue!r} is not a leaf queue; jobs go to leaf queues")
    if spec.priority_class_name and spec.priority_class_name not in cfg.classes:
        raise api.ManifestError(
            f"{path}.priorityClassName", f"priority class {spec.priority_class_name!r} does not exist"
        )


def check_hyperjob_references(hyperjob: api.HyperJob, cfg: Config) -> None:
    api.check_references(hyperjob, cfg.clusters, cfg.queues)
    for i, rj in enumerate(hyperjob.spec.replicated_jobs):
        check_job_references(rj.template_spec, f"$.spec.replicatedJobs[{i}].templateSpec", cfg)


def check_podgroup_references(podgroup: api.PodGroup, cfg: Config) -> None:
    spec = podgroup.spec
    api.check_queue_reference(spec.queue, cfg.queues, "$.spec.queue")
    if not cfg.is_leaf(spec.queue or api.DEFAULT_QUEUE):
        raise api.ManifestError("$.spec.queue", f"queue {spec.queue!r} is not a leaf queue")
    if spec.priority_class_name and spec.priority_class_name not in cfg.classes:
        raise api.ManifestError(
            "$.spec.priorityClassName", f"priority class {spec.priority_class_name!r} does not exist"
        )
    try:
        api.quantity.parse_resource_list(spec.min_resources or {})
    except api.QuantityError as exc:
        raise api.ManifestError("$.spec.minResources", str(exc)) from None


def check_queue(queue: api.Queue, cfg: Config) -> None:
    parent = queue.spec.parent
    if parent and parent != ROOT_QUEUE and parent not in cfg.queues:
        raise api.ManifestError("$.spec.parent", f"queue {parent!r} does not exist")


# -- decoded manifests -----------------------------------------------------------------------------


class DecodedManifests:
    """The object each owner's stored manifest decodes to, as the apply validated it.

    An applied HyperJob is decoded from what the user sent (the validation), then read again from
    its stored form when it is submitted and when it is split: decoding it costs more than the rest
    of its handling. The stored form is encoded from that validated object, so the object is what it
    decodes to. Known by the very document it was stored as (identity): a document read back from
    the store, or replaced by a new apply, is decoded as before. Bounded: the oldest are forgotten.
    """

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._by_owner: OrderedDict[str, tuple[dict[str, Any], api.Manifest]] = OrderedDict()

    def keep(self, owner: str, stored: dict[str, Any], manifest: api.Manifest) -> None:
        self._by_owner[owner] = (stored, manifest)
        self._by_owner.move_to_end(owner)
        while len(self._by_owner) > self.size:
            self._by_owner.popitem(last=False)

    def of(self, doc: records.HyperJobDoc) -> api.Manifest:
        found = self._by_owner.get(doc.name)
        if found is not None and found[0] is doc.manifest:
            return found[1]
        return api.decode_stored(doc.manifest)


# -- admission candidates --------------------------------------------------------------------------


def submission(
    envelope: events.Envelope, doc: records.HyperJobDoc, cfg: Config, decoded: DecodedManifests
) -> events.OwnerSubmitted:
    """The ``OwnerSubmitted`` of a HyperJob or plain Job."""
    candidate = candidate_of(doc, cfg, decoded)
    return events.OwnerSubmitted(
        **envelope,
        name=doc.name,
        plain=doc.plain,
        queue=candidate.queue,
        priority=candidate.priority,
        request=candidate.request,
        created=doc.created,
        generation=doc.generation,
    )


def candidate_of(doc: records.HyperJobDoc, cfg: Config, decoded: DecodedManifests) -> fleetcore.Candidate:
    """A HyperJob or plain Job as its queue weighs it (queue, request, priority)."""
    manifest = decoded.of(doc)
    values = cfg.priority_values()
    if isinstance(manifest, api.PodGroup):
        spec = manifest.spec
        candidate = fleetcore.Candidate(
            name=doc.name,
            queue=spec.queue or api.DEFAULT_QUEUE,
            request=api.quantity.parse_resource_list(spec.min_resources or {}),
            priority=values.get(spec.priority_class_name, 0),
            created=doc.created,
        )
    elif isinstance(manifest, api.Job):
        candidate = fleetcore.job_candidate(manifest, doc.created, values)
    else:
        candidate = fleetcore.hyperjob_candidate(api.expect_kind(manifest, api.HyperJob), doc.created, values)
    return candidate


def priority_of(doc: records.HyperJobDoc, cfg: Config, decoded: DecodedManifests) -> int:
    """The owner's admission priority (``submission``'s)."""
    return candidate_of(doc, cfg, decoded).priority


def running_children(
    doc: records.HyperJobDoc, decoded: DecodedManifests
) -> list[tuple[events.ChildRef, list[fleetcore.PodShape]]]:
    """Each child of ``doc`` running on its cluster, with its pods."""
    running = [ref for ref in doc.children if ref.cluster and doc.child_phases.get(ref.name) == "Running"]
    if not running:
        return []
    manifest = decoded.of(doc)
    if isinstance(manifest, api.Job):
        return [
            (ref, fleetcore.gang_pods(manifest.spec, {t.name: t.replicas for t in manifest.spec.tasks}))
            for ref in running
        ]
    if not isinstance(manifest, api.HyperJob):
        return []
    plan = {c.name: c for c in split_plan(doc).children}
    return [(ref, fleetcore.child_pods(manifest, plan[ref.name])) for ref in running if ref.name in plan]


# -- plans -----------------------------------------------------------------------------------------


class Planned(msgspec.Struct, frozen=True, kw_only=True):
    """A HyperJob's children as a split decided them."""

    refs: list[events.ChildRef]
    children: list[events.PlannedChild]
    world_size: int
    gang: int


def plan(
    hyperjob: api.HyperJob,
    clusters: Mapping[str, fleetcore.ClusterCapacity],
    now: float,
    current: fleetcore.SplitPlan | None = None,
    waited: float | None = None,
) -> Planned | fleetcore.Waiting:
    """The children of a HyperJob on the clusters as they are now, or why it must wait; with the
    plan in force (``current``, an update) its children keep their clusters and only what an
    update adds must fit. ``waited``: seconds since it was submitted (``dispatch: Incremental``)."""
    split = fleetcore.plan_split(hyperjob, clusters, now=now, current=current, waited=waited)
    if isinstance(split, fleetcore.Waiting):
        return split
    return planned(hyperjob, split)


def planned(hyperjob: api.HyperJob, split: fleetcore.SplitPlan) -> Planned:
    jobs = [_labelled_by_own_name(job, hyperjob.metadata) for job in fleetcore.child_jobs(hyperjob, split)]
    refs = [fleetcore.child_ref(c, job.template_hash) for c, job in zip(split.children, jobs, strict=True)]
    children = [
        events.PlannedChild(
            name=job.name,
            replicated_job=job.replicated_job,
            clusters=[job.cluster],
            job=api.encode(job.job),
            template_hash=job.template_hash,
        )
        for job in jobs
    ]
    return Planned(refs=refs, children=children, world_size=split.world_size, gang=gang_size(hyperjob, len(refs)))


def _labelled_by_own_name(child: fleetcore.ChildJob, meta: api.ObjectMeta) -> fleetcore.ChildJob:
    """The child with its HyperJob's own name in ``volcano.sh/hyperjob-name``, as a person
    selects by it: the HyperJob is planned under its fleet name (``api.fleet_name``: ``team-a-x``
    for ``team-a/x``), which names its children but is not its name."""
    fleet_prefix = f"{meta.namespace}-" if meta.namespace not in ("", api.DEFAULT_NAMESPACE) else ""
    own = meta.name.removeprefix(fleet_prefix)
    job_meta = child.job.metadata
    labels = {**job_meta.labels, fleetcore.HYPERJOB_NAME_LABEL: own}
    job = msgspec.structs.replace(child.job, metadata=msgspec.structs.replace(job_meta, labels=labels))
    return msgspec.structs.replace(child, job=job)


def gang_size(hyperjob: api.HyperJob, children: int) -> int:
    """How many children must hold their reservations before any starts: the HyperJob's
    ``minAvailable`` (default all); 0 when at most one child must (no cross-cluster gang)."""
    required = hyperjob.spec.min_available if hyperjob.spec.min_available is not None else children
    required = min(required, children)
    return required if required > 1 else 0


def split_plan(doc: records.HyperJobDoc) -> fleetcore.SplitPlan:
    """The plan in force, rebuilt from the HyperJob document."""
    return fleetcore.plan_in_force(doc.name, doc.children, doc.world_size, doc.generation)


def with_plan(doc: records.HyperJobDoc, split: fleetcore.SplitPlan) -> records.HyperJobDoc:
    """The document with each child's cluster as ``split`` now says."""
    clusters = {child.name: child.cluster for child in split.children}
    return msgspec.structs.replace(
        doc,
        children=[msgspec.structs.replace(ref, cluster=clusters.get(ref.name, ref.cluster)) for ref in doc.children],
    )


def changes(existing: list[events.ChildRef], desired: list[events.ChildRef]) -> tuple[list[str], list[events.ChildRef]]:
    """(children to place, children to remove): a child whose template or cluster changed is
    replaced; one that is no longer desired is removed; an identical one is left alone."""
    current = {ref.name: ref for ref in existing}
    wanted = {ref.name for ref in desired}
    place = [
        ref.name
        for ref in desired
        if ref.name not in current
        or (current[ref.name].template_hash, current[ref.name].cluster) != (ref.template_hash, ref.cluster)
    ]
    remove = [ref for ref in existing if ref.name not in wanted or ref.name in place]
    return place, remove


def plain_child(doc: records.HyperJobDoc, clusters: list[str]) -> events.PlannedChild:
    """A plain Job is placed as the one child of itself, on any cluster, under its fleet name
    (``owner_key``): its cluster names its pods from it, so team-a/x and team-b/x never share one."""
    return events.PlannedChild(name=doc.name, clusters=clusters, job=cluster_manifest(doc))


def cluster_manifest(doc: records.HyperJobDoc) -> api.RawDocument:
    """A plain Job's or PodGroup's manifest as its cluster gets it: named ``doc.name`` (its fleet
    name), the name it was applied under kept in ``api.APPLIED_NAME_ANNOTATION``."""
    metadata = doc.manifest.get("metadata")
    if not isinstance(metadata, dict) or metadata.get("name") == doc.name:
        return doc.manifest
    annotations = {**(metadata.get("annotations") or {}), api.APPLIED_NAME_ANNOTATION: metadata["name"]}
    return {**doc.manifest, "metadata": {**metadata, "name": doc.name, "annotations": annotations}}


def manifest_kind(manifest: dict[str, object]) -> tuple[str, str]:
    metadata = manifest.get("metadata")
    name = metadata.get("name", "") if isinstance(metadata, dict) else ""
    return str(manifest.get("kind", "")), str(name)


def queues_of(doc: records.HyperJobDoc) -> set[str]:
    manifest = api.decode_stored(doc.manifest)
    if isinstance(manifest, api.PodGroup | api.Job):
        return {manifest.spec.queue or api.DEFAULT_QUEUE}
    hyperjob = api.expect_kind(manifest, api.HyperJob)  # the splitter keeps HyperJobs and plain Jobs
    return {rj.template_spec.queue or api.DEFAULT_QUEUE for rj in hyperjob.spec.replicated_jobs}


# -- namespaces ------------------------------------------------------------------------------------
# How a request's subject bounds the namespace it acts in is the contract's (``events.manifest``),
# shared with the workflow-controller.
request_namespace = events.request_namespace
scoped_manifest = events.scoped_manifest


def namespace_of(doc: records.HyperJobDoc) -> str:
    metadata = doc.manifest.get("metadata")
    return str(metadata.get("namespace") or api.DEFAULT_NAMESPACE) if isinstance(metadata, dict) else "default"


def applied_name(doc: records.HyperJobDoc) -> str:
    """The name an owner was applied under (its ``metadata.name``; ``doc.name`` is its key)."""
    metadata = doc.manifest.get("metadata")
    return str(metadata.get("name") or doc.name) if isinstance(metadata, dict) else doc.name


def owner_key(kind: str, namespace: str, name: str) -> str:
    """Where an owner is kept: a HyperJob under ``api.object_key`` (namespaces apart); a plain Job
    or PodGroup under its fleet name (``api.fleet_key``: ``team-b-x`` for team-b/x, ``x`` in
    ``default``), the name its clusters know it by (ADR 0010)."""
    return api.object_key(namespace, name) if kind == "HyperJob" else api.fleet_key(namespace, name)


# -- commands ------------------------------------------------------------------------------------


def command_refused(action: str, doc: records.HyperJobDoc) -> str:
    """Why ``action`` would change nothing on this HyperJob ("" when it may go ahead), as a person
    should hear it instead of "commanded": a finished HyperJob takes no command (Volcano's finished
    Jobs take none either), and only a suspended one can be resumed (an aborted one has ended)."""
    phases = [doc.child_phases.get(ref.name, "Pending") for ref in doc.children]
    if doc.lifecycle == "Active" and phases and all(p in fleetcore.TERMINAL_CHILD_PHASES for p in phases):
        phase = fleetcore.finished_phase(phases)
        return f"is {phase}: a finished HyperJob takes no {action} (delete it and apply it again)"
    if action == "resume" and doc.lifecycle != "Suspended":
        return f"is not suspended ({doc.lifecycle}): nothing to resume"
    if action == "suspend" and doc.lifecycle == "Suspended":
        return "is suspended already: nothing to suspend"
    return ""


# -- requests that are not requests ----------------------------------------------------------------

# An id that can end a subject (``hj.result.<id>``): no dots, spaces or wildcards.
_REQUEST_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")


class _Envelope(msgspec.Struct):
    """What can be read of a malformed request to answer it: where, and about which object."""

    event_id: Any = None
    kind: Any = None
    name: Any = None
    manifest: Any = None


def unreadable_request(data: bytes) -> tuple[str, str, str] | None:
    """``(request id, kind, name)`` of a payload no handler could take, when it says where its
    answer goes (a JSON object with an ``event_id`` fit for a subject); else None."""
    try:
        envelope = msgspec.json.decode(data, type=_Envelope)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, ValueError, OverflowError):
        return None
    if not isinstance(envelope.event_id, str) or not _REQUEST_ID.match(envelope.event_id):
        return None
    kind, name = envelope.kind, envelope.name
    if isinstance(envelope.manifest, dict):
        kind, name = manifest_kind(envelope.manifest)
    return envelope.event_id, kind if isinstance(kind, str) else "", name if isinstance(name, str) else ""
