"""Loading manifests: YAML or JSON text → typed objects, strictly, with field paths in errors."""

from __future__ import annotations

import functools
from typing import TypeVar

import msgspec
import yaml

from .base import RawDocument
from .errors import ManifestError
from .flow import FLOW_API_VERSION, HyperJobTemplate, JobFlow, JobTemplate, check_workflow
from .hyperjob import CONCEPT_API_VERSION, TRAINING_API_VERSION, HyperJob, TemplatedHyperJob, normalize
from .job import JOB_API_VERSION, CronJob, Job
from .kubeflow import to_volcano_job
from .kubeflow import user_path as kubeflow_user_path
from .kubeflow_kinds import KUBEFLOW_KINDS, KubeflowJob, MPIJob, MPIJobV1, PyTorchJob, TFJob
from .pod import with_default_requests
from .queue import SCHEDULING_API_VERSION, PodGroup, PriorityClass, Queue
from .rawdoc import name_map_keys, without_nulls
from .torchrun import check_in_hyperjob
from .validation import check_hyperjob, check_job_spec, check_queue, check_sim_annotations

Manifest = Job | HyperJob | Queue | PodGroup | PriorityClass | CronJob | JobFlow | JobTemplate | HyperJobTemplate
# What a document decodes to before ``_validated`` turns it into a ``Manifest``.
Decoded = Manifest | TemplatedHyperJob | KubeflowJob
_Struct = TypeVar("_Struct", bound=msgspec.Struct)

KINDS: dict[tuple[str, str], type[Decoded]] = {
    (JOB_API_VERSION, "Job"): Job,
    (TRAINING_API_VERSION, "HyperJob"): HyperJob,
    (CONCEPT_API_VERSION, "HyperJob"): TemplatedHyperJob,
    (SCHEDULING_API_VERSION, "Queue"): Queue,
    (SCHEDULING_API_VERSION, "PodGroup"): PodGroup,
    ("scheduling.k8s.io/v1", "PriorityClass"): PriorityClass,
    (JOB_API_VERSION, "CronJob"): CronJob,
    (FLOW_API_VERSION, "JobFlow"): JobFlow,
    (FLOW_API_VERSION, "JobTemplate"): JobTemplate,
    (TRAINING_API_VERSION, "HyperJobTemplate"): HyperJobTemplate,
    **KUBEFLOW_KINDS,
}
"""Every kind ``decode`` accepts; Kubeflow's come back as the Volcano Job that runs them."""
SHORT_KINDS = {
    "job": "Job",
    "vcjob": "Job",
    "hyperjob": "HyperJob",
    "hj": "HyperJob",
    "queue": "Queue",
    "podgroup": "PodGroup",
    "pg": "PodGroup",
    "priorityclass": "PriorityClass",
    "cronjob": "CronJob",
    "cronvcjob": "CronJob",
    "cronvj": "CronJob",
    "jobflow": "JobFlow",
    "jf": "JobFlow",
    "jobtemplate": "JobTemplate",
    "jt": "JobTemplate",
    "hyperjobtemplate": "HyperJobTemplate",
    "hjt": "HyperJobTemplate",
}
# Job plugins of a Kubeflow template that a HyperJob runs at its own level, so the world spans its children.
_WORLD_PLUGINS = ("mpi", "tensorflow", "pytorch")


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Bounds on a manifest's shape, checked before anything is built from it: deeper nesting blows
# the parser's stack (a segfault in libyaml's composer), and YAML aliases can make a few lines
# stand for 10^9 values (a "billion laughs"). No real manifest comes near either.
MAX_DEPTH = 64
MAX_VALUES = 1_000_000


class _Frame:
    __slots__ = ("index", "key", "mapping", "size", "anchor", "expect_key")

    def __init__(self, mapping: bool, anchor: str | None) -> None:
        self.mapping, self.anchor = mapping, anchor
        self.size, self.index, self.key, self.expect_key = 1, -1, "", True


def _path(frames: list[_Frame]) -> str:
    parts = [f".{f.key}" if f.mapping else f"[{f.index}]" for f in frames]
    shown = "".join(parts[:12]) + ("..." if len(parts) > 12 else "")
    return "$" + shown


def check_shape(text: str) -> None:
    """Refuse YAML nested deeper than ``MAX_DEPTH`` or standing for more than ``MAX_VALUES``
    values once its aliases are expanded, naming where; reads the parser's events only (flat,
    no recursion, nothing built)."""
    frames: list[_Frame] = []
    expanded: dict[str, int] = {}  # anchor -> values it stands for
    total = 0

    def place(event: yaml.Event) -> None:
        """Where a node goes in its parent: a mapping's key or value, a sequence's next item."""
        if not frames:
            return
        parent = frames[-1]
        if not parent.mapping:
            parent.index += 1
        elif parent.expect_key:
            parent.key = str(event.value)[:40] if isinstance(event, yaml.ScalarEvent) else "?"
            parent.expect_key = False
            return
        else:
            parent.expect_key = True

    def add(size: int) -> None:
        nonlocal total
        if frames:
            frames[-1].size += size
            if frames[-1].size > MAX_VALUES:
                raise ManifestError(_path(frames), f"stands for more than {MAX_VALUES} values (YAML aliases?)")
        else:
            total += size
            if total > MAX_VALUES:
                raise ManifestError("$", f"stands for more than {MAX_VALUES} values (YAML aliases?)")

    for event in yaml.parse(text, Loader=_LOADER):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            place(event)
            frames.append(_Frame(isinstance(event, yaml.MappingStartEvent), event.anchor))
            if len(frames) > MAX_DEPTH:
                raise ManifestError(_path(frames[:-1]), f"nested more than {MAX_DEPTH} levels deep")
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            done = frames.pop()
            if done.anchor:
                expanded[done.anchor] = done.size
            add(done.size)
        elif isinstance(event, yaml.ScalarEvent):
            place(event)
            if event.anchor:
                expanded[event.anchor] = 1
            add(1)
        elif isinstance(event, yaml.AliasEvent):
            place(event)
            add(expanded.get(event.anchor or "", 1))


def check_plain(document: object) -> None:
    """The same bounds on data already built (a manifest that came as JSON over the bus):
    iterative, so depth cannot exhaust the stack of what would walk it recursively."""
    stack: list[tuple[object, int]] = [(document, 0)]
    seen = 0
    while stack:
        value, depth = stack.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        seen += len(children)
        if seen > MAX_VALUES:
            raise ManifestError("$", f"stands for more than {MAX_VALUES} values")
        if children and depth >= MAX_DEPTH:
            raise ManifestError(_deep_path(document), f"nested more than {MAX_DEPTH} levels deep")
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))


def _deep_path(document: object) -> str:
    """Where ``document`` first goes deeper than ``MAX_DEPTH`` (for the error only)."""
    path, value = "$", document
    for depth in range(MAX_DEPTH):
        items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        deeper = [(k, v) for k, v in items if isinstance(v, dict | list) and _depth_over(v, MAX_DEPTH - depth - 1)]
        if not deeper:
            break
        key, value = deeper[0]
        if depth < 12:
            path += f"[{key}]" if isinstance(key, int) else f".{str(key)[:40]}"
    return path if len(path) < 400 else path[:400] + "..."


def _depth_over(value: object, limit: int) -> bool:
    stack = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        for child in children:
            if isinstance(child, dict | list):
                if depth + 1 > limit:
                    return True
                stack.append((child, depth + 1))
    return False


def load_documents(text: str) -> list[RawDocument]:
    """Split multi-document YAML (JSON is YAML too); empty documents are skipped. Text nested too
    deep or standing for too many values (aliases) is refused before it is built (``check_shape``)."""
    try:
        check_shape(text)
        # libyaml's loader where present: the pure-Python one takes minutes on a few megabytes.
        documents = [d for d in yaml.load_all(text, Loader=_LOADER) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise ManifestError("$", f"not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    for i, document in enumerate(documents):
        if not isinstance(document, dict):
            raise ManifestError(f"$[{i}]", "a manifest must be a mapping with apiVersion, kind, metadata and spec")
    return [item for document in documents for item in _list_items(document)]


def _list_items(document: RawDocument) -> list[RawDocument]:
    """A ``kind: List`` (what ``get -o yaml`` prints for several objects) stands for its items."""
    items = document.get("items")
    if document.get("kind") != "List" or not isinstance(items, list):
        return [document]
    checked: list[RawDocument] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ManifestError(
                f"$.items[{i}]", "a manifest must be a mapping with apiVersion, kind, metadata and spec"
            )
        checked.append(item)
    return checked


# Metadata the API server sets (kubectl get -o yaml shows it); kubectl apply ignores it, and so do we.
SERVER_SET_METADATA = (
    "ownerReferences",
    "resourceVersion",
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
    "generation",
    "finalizers",
)


def without_server_fields(document: RawDocument) -> RawDocument:
    """The document as a user would apply it: server-set metadata and ``status`` dropped, as kubectl
    does with an exported object (a Queue is opened or closed by command, not by its status)."""
    if not isinstance(document, dict):
        return document
    cleaned = {k: v for k, v in document.items() if k != "status"}
    metadata = document.get("metadata")
    if isinstance(metadata, dict):
        cleaned["metadata"] = {k: v for k, v in metadata.items() if k not in SERVER_SET_METADATA}
    return cleaned


def decode(document: object) -> Manifest:
    """Decode and validate one manifest; a HyperJob comes back in its normalized (upstream) form, a
    Kubeflow MPIJob, PyTorchJob or TFJob as the Volcano Job that runs it (``api.kubeflow``).

    A field written with no value (YAML null) is unset, as on a Kubernetes API server
    (``rawdoc.without_nulls``); container ``requests`` default to ``limits`` (``with_default_requests``),
    for every kind.
    """
    if not isinstance(document, dict):
        raise ManifestError("$", "a manifest must be a mapping with apiVersion, kind, metadata and spec")
    check_plain(document)  # bounds depth before anything below walks the document recursively
    written: RawDocument = without_nulls(document)
    api_version, kind = written.get("apiVersion"), written.get("kind")
    if not isinstance(kind, str) or not kind:
        raise ManifestError("$.kind", "required")
    if not isinstance(api_version, str) or not api_version:
        raise ManifestError("$.apiVersion", "required")
    struct_type = KINDS.get((api_version, kind))
    if struct_type is None:
        known = ", ".join(f"{k} ({v})" for v, k in KINDS)
        raise ManifestError("$.kind", f"unknown kind {kind!r} in {api_version!r}; known: {known}")
    raw = with_default_requests(_without_default_namespace(written))
    if struct_type is TemplatedHyperJob:
        raw = _with_kubeflow_template(raw)
    return _validated(_convert(raw, struct_type))


def decode_stored(document: RawDocument) -> Manifest:
    """``decode`` of a manifest the system holds (validated when it came in), through a cache keyed
    by its content: services decode the same stored HyperJob or Job again on every event about it
    (0.1-0.5 ms each, the most expensive step of a status update); encoding it to find it in the
    cache costs 1-2 us. Callers share the decoded object: treat it as read-only (it is frozen)."""
    return _decode_cached(msgspec.json.encode(document))


@functools.lru_cache(maxsize=2048)
def _decode_cached(encoded: bytes) -> Manifest:
    return decode(msgspec.json.decode(encoded))


def _without_default_namespace(document: RawDocument) -> RawDocument:
    """``namespace: default`` written out is the default: drop it, so that the object encodes the same
    either way (msgspec omits a default only when it is the default object itself)."""
    metadata = document.get("metadata")
    if isinstance(metadata, dict) and metadata.get("namespace") == "default":
        return {**document, "metadata": {k: v for k, v in metadata.items() if k != "namespace"}}
    return document


def _convert(document: RawDocument, struct_type: type[_Struct], at: str = "$") -> _Struct:
    try:
        return msgspec.convert(document, struct_type, strict=True)
    except msgspec.ValidationError as exc:
        error = _from_validation_error(exc)
        path = name_map_keys(document, error.path, lambda raw: msgspec.convert(raw, struct_type, strict=True))
        raise ManifestError(at + path[1:], error.message) from None


def _kubeflow_job(manifest: KubeflowJob) -> Job:
    job = to_volcano_job(manifest)
    check_sim_annotations(job.metadata.annotations, "$.metadata")
    try:
        check_job_spec(job.spec)
    except ManifestError as exc:
        raise ManifestError(kubeflow_user_path(manifest, exc.path), exc.message) from None
    return job


def _mapping(value: object) -> RawDocument:
    """``value`` if it is a mapping, else an empty one (the decoder reports the wrong shape itself)."""
    return value if isinstance(value, dict) else {}


def _with_kubeflow_template(document: RawDocument) -> RawDocument:
    """A conceptual HyperJob whose ``template`` is a Kubeflow job, with the template translated into
    a Volcano Job and its framework plugin raised to the HyperJob (unless the HyperJob sets its own),
    so that one world spans every child: one hostfile, one TF_CONFIG, one set of ranks."""
    spec = _mapping(document.get("spec"))
    template = _mapping(spec.get("template"))
    api_version, kind_name = template.get("apiVersion"), template.get("kind")
    # Only strings name a kind (a list there is unhashable; the template's own check reports it).
    if not isinstance(api_version, str) or not isinstance(kind_name, str):
        return document
    kind = KUBEFLOW_KINDS.get((api_version, kind_name))
    if kind is None:
        return document
    name = _mapping(document.get("metadata")).get("name", "template")
    metadata = {"name": name, **_mapping(template.get("metadata"))}
    manifest = _convert({**template, "metadata": metadata}, kind, "$.spec.template")
    if isinstance(manifest, PyTorchJob):
        check_in_hyperjob(manifest.spec.elastic_policy, manifest.spec.nproc_per_node)
    try:
        job = _kubeflow_job(manifest)
    except ManifestError as exc:
        raise ManifestError("$.spec.template" + exc.path[1:], exc.message) from None
    promoted = {plugin: args for plugin, args in job.spec.plugins.items() if plugin in _WORLD_PLUGINS}
    if "pytorch" in promoted:  # the HyperJob's pytorch takes the master and the port only
        promoted["pytorch"] = [arg for arg in promoted["pytorch"] if arg.startswith(("--master=", "--port="))]
        if not any(task.name == "master" for task in job.spec.tasks):
            del promoted["pytorch"]
    translated = {
        "apiVersion": JOB_API_VERSION,
        "kind": "Job",
        "spec": msgspec.to_builtins(job.spec),
        "metadata": {"labels": job.metadata.labels, "annotations": job.metadata.annotations},
    }
    plugins = _mapping(spec.get("plugins"))
    return {**document, "spec": {**spec, "template": translated, "plugins": {**promoted, **plugins}}}


def _validated(obj: Decoded) -> Manifest:
    if isinstance(obj, (MPIJob, MPIJobV1, PyTorchJob, TFJob)):
        return _kubeflow_job(obj)
    if isinstance(obj, TemplatedHyperJob):
        hyperjob = normalize(obj)
        check_hyperjob(hyperjob)
        return hyperjob
    if isinstance(obj, HyperJob):
        check_hyperjob(obj)
    elif isinstance(obj, Job):
        check_sim_annotations(obj.metadata.annotations, "$.metadata")
        check_job_spec(obj.spec)
    elif isinstance(obj, Queue):
        check_queue(obj)
    elif isinstance(obj, (CronJob, JobFlow, JobTemplate, HyperJobTemplate)):
        check_workflow(obj)
    return obj


def load(text: str) -> list[Manifest]:
    """Every manifest of a (multi-document) text, or the first error with the document's index."""
    manifests: list[Manifest] = []
    documents = load_documents(text)
    for i, document in enumerate(documents):
        try:
            manifests.append(decode(document))
        except ManifestError as exc:
            if len(documents) == 1:
                raise
            name = _mapping(document.get("metadata")).get("name", "?")
            raise ManifestError(f"document {i} ({document.get('kind', '?')} {name}) {exc.path}", exc.message) from None
    return manifests


def encode(obj: Manifest) -> RawDocument:
    """The manifest as plain data (camelCase), e.g. to print as YAML or JSON; ``decode`` reads it back.

    Defaults are omitted, except ``apiVersion`` and ``kind``, which say what the data is.
    """
    data: RawDocument = msgspec.to_builtins(obj)
    return {"apiVersion": obj.api_version, "kind": obj.kind, **data}


def _from_validation_error(exc: msgspec.ValidationError) -> ManifestError:
    # msgspec says "Expected `int` >= 0, got `-2` - at `$.spec.x`": put the path first.
    text = str(exc)
    message, sep, where = text.rpartition(" - at `")
    if sep and where.startswith("key` in `"):  # a mapping's key is wrong (an unknown replica type)
        return ManifestError(where.removeprefix("key` in `").rstrip("`"), f"{message} (a key of this mapping)")
    if sep:
        return ManifestError(where.rstrip("`"), message)
    return ManifestError("$", text)
