"""Loading manifests: YAML or JSON text → typed objects, strictly, with field paths in errors."""

from __future__ import annotations

from typing import Any

import msgspec
import yaml

from .errors import ManifestError
from .hyperjob import CONCEPT_API_VERSION, TRAINING_API_VERSION, HyperJob, TemplatedHyperJob, normalize
from .job import JOB_API_VERSION, Job
from .queue import SCHEDULING_API_VERSION, PodGroup, PriorityClass, Queue
from .validation import check_hyperjob, check_job_spec, check_queue, check_sim_annotations

Manifest = Job | HyperJob | Queue | PodGroup | PriorityClass

KINDS: dict[tuple[str, str], type[Any]] = {
    (JOB_API_VERSION, "Job"): Job,
    (TRAINING_API_VERSION, "HyperJob"): HyperJob,
    (CONCEPT_API_VERSION, "HyperJob"): TemplatedHyperJob,
    (SCHEDULING_API_VERSION, "Queue"): Queue,
    (SCHEDULING_API_VERSION, "PodGroup"): PodGroup,
    ("scheduling.k8s.io/v1", "PriorityClass"): PriorityClass,
}
SHORT_KINDS = {"job": "Job", "vcjob": "Job", "hyperjob": "HyperJob", "hj": "HyperJob", "queue": "Queue",
               "podgroup": "PodGroup", "pg": "PodGroup", "priorityclass": "PriorityClass"}


def load_documents(text: str) -> list[dict[str, Any]]:
    """Split multi-document YAML (JSON is YAML too); empty documents are skipped."""
    try:
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise ManifestError("$", f"not valid YAML{where}: {getattr(exc, 'problem', exc)}") from None
    for i, document in enumerate(documents):
        if not isinstance(document, dict):
            raise ManifestError(f"$[{i}]", "a manifest must be a mapping with apiVersion, kind, metadata and spec")
    return documents


def decode(document: Any) -> Manifest:
    """Decode and validate one manifest; a HyperJob comes back in its normalized (upstream) form."""
    if not isinstance(document, dict):
        raise ManifestError("$", "a manifest must be a mapping with apiVersion, kind, metadata and spec")
    api_version, kind = document.get("apiVersion"), document.get("kind")
    if not isinstance(kind, str) or not kind:
        raise ManifestError("$.kind", "required")
    if not isinstance(api_version, str) or not api_version:
        raise ManifestError("$.apiVersion", "required")
    struct_type = KINDS.get((api_version, kind))
    if struct_type is None:
        known = ", ".join(f"{k} ({v})" for v, k in KINDS)
        raise ManifestError("$.kind", f"unknown kind {kind!r} in {api_version!r}; known: {known}")
    try:
        obj = msgspec.convert(document, struct_type, strict=True)
    except msgspec.ValidationError as exc:
        raise _from_validation_error(exc) from None
    return _validated(obj)


def _validated(obj: Any) -> Manifest:
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
    return obj  # type: ignore[no-any-return]


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
            name = (document.get("metadata") or {}).get("name", "?") if isinstance(document.get("metadata"), dict) else "?"
            raise ManifestError(f"document {i} ({document.get('kind', '?')} {name}) {exc.path}", exc.message) from None
    return manifests


def encode(obj: Manifest) -> dict[str, Any]:
    """The manifest as plain data (camelCase), e.g. to print as YAML or JSON; ``decode`` reads it back.

    Defaults are omitted, except ``apiVersion`` and ``kind``, which say what the data is.
    """
    data: dict[str, Any] = msgspec.to_builtins(obj)
    return {"apiVersion": obj.api_version, "kind": obj.kind, **data}


def _from_validation_error(exc: msgspec.ValidationError) -> ManifestError:
    # msgspec says "Expected `int` >= 0, got `-2` - at `$.spec.x`": put the path first.
    text = str(exc)
    message, sep, where = text.rpartition(" - at `")
    if sep:
        return ManifestError(where.rstrip("`"), message)
    return ManifestError("$", text)
