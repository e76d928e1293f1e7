"""What ``apply`` checks against the running system before it sends anything: what each object
refers to (queues, priority classes, clusters), with the splitter's own pure checks
(``services.splitter.domain``) over the configuration the system publishes, as it will be once the
objects before it in the batch are applied. So a batch whose third object names a missing queue
creates nothing, instead of the first two.

It is a preview, not a lock: the splitter checks again when each object arrives, and what changed
in between is still reported per object.
"""

from __future__ import annotations

from typing import Protocol

from hyperjob import api, records
from hyperjob.client import Client
from hyperjob.services.splitter import domain

from .manifests import Object


async def check(client: Client, objects: list[Object]) -> None:
    """Set ``error`` on every object the splitter would reject for what it refers to."""
    queues = await client.docs(records.QUEUE, records.QueueDoc)
    classes = await client.docs(records.PRIORITY_CLASS, records.PriorityClassDoc)
    clusters = await client.cluster_names()
    for obj in objects:
        manifest = api.decode(obj.document)
        cfg = domain.config(queues, classes, clusters)
        try:
            _check(manifest, cfg)
        except api.ManifestError as exc:
            obj.error = str(exc)
            continue
        if isinstance(manifest, api.Queue):
            previous = queues.get(manifest.metadata.name)
            state = previous.state if previous else "Open"
            queues = {**queues, manifest.metadata.name: records.QueueDoc(manifest=api.encode(manifest), state=state)}
        elif isinstance(manifest, api.PriorityClass):
            doc = records.PriorityClassDoc(
                manifest=api.encode(manifest), value=manifest.value, global_default=manifest.global_default
            )
            classes = {**classes, manifest.metadata.name: doc}


class _StoredManifest(Protocol):
    """A stored document that keeps the manifest it was applied with."""

    @property
    def manifest(self) -> dict[str, object]: ...


async def outcome(client: Client, obj: Object) -> str:
    """What applying ``obj`` would report: created, configured or unchanged (as the splitter
    compares: the stored manifest against the new one, both as ``api.encode`` writes them)."""
    manifest = api.encode(api.decode(obj.document))
    doc_types: dict[str, tuple[str, type[_StoredManifest]]] = {
        "Queue": (records.QUEUE, records.QueueDoc),
        "PriorityClass": (records.PRIORITY_CLASS, records.PriorityClassDoc),
        "CronJob": (records.CRONJOB, records.CronJobDoc),
        "JobFlow": (records.JOBFLOW, records.JobFlowDoc),
        "JobTemplate": (records.JOBTEMPLATE, records.JobTemplateDoc),
    }
    kind, doc_type = doc_types.get(obj.kind, (records.HYPERJOB, records.HyperJobDoc))
    key = obj.name  # a Queue or a PriorityClass: no namespace
    if kind == records.HYPERJOB:
        key = domain.owner_key(obj.kind, obj.namespace, obj.name)
    elif obj.kind in api.WORKFLOW_KINDS:  # the workflow-controller keeps its kinds by namespace and name
        key = api.object_key(obj.namespace, obj.name)
    existing = await client.doc(kind, key, doc_type)
    if existing is None:
        return "created"
    return "unchanged" if existing.manifest == manifest else "configured"


def _check(manifest: api.Manifest, cfg: domain.Config) -> None:
    if isinstance(manifest, api.Queue):
        domain.check_queue(manifest, cfg)
    elif isinstance(manifest, api.Job):
        domain.check_job_references(manifest.spec, "$.spec", cfg)
    elif isinstance(manifest, api.HyperJob):
        domain.check_hyperjob_references(manifest, cfg)
    elif isinstance(manifest, api.PodGroup):
        domain.check_podgroup_references(manifest, cfg)


__all__ = ["check"]
