"""Applying agenda entries: scenario events, pod completions and the cores' timers.

``create`` admits a manifest exactly as ``hyperjob apply`` would on the live system: the api's
strict decoding and validation, then the references (queue exists, is Open and a leaf; clusters
exist). A manifest the live system would reject becomes one ``Rejected`` event, whose ``object``
is the manifest's name and ``reason`` the message naming the field path, and changes nothing else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import api
from fleetcore import CLUSTER_SILENCE_TIMEOUT

from .kubelet import PodFinish
from .scenario import TimedEvent

if TYPE_CHECKING:
    from .engine import Engine

JOB_ACTIONS = {"abort": "AbortJob", "resume": "ResumeJob", "restart": "RestartJob", "terminate": "TerminateJob",
               "complete": "CompleteJob"}


class Timer:
    """Agenda entry for a core's timer; ``owner`` is the driver that started it."""

    def __init__(self, owner: Any, key: Any) -> None:
        self.owner = owner
        self.key = key


class Wake:
    """Agenda entry that only ends an idle stretch: something time-driven may change then
    (a silent cluster becomes lost), though no event happens."""


class EventHandler:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def apply(self, item: Any) -> None:
        if isinstance(item, PodFinish):
            self.engine.kubelet.finish(item)
        elif isinstance(item, Timer):
            item.owner.timer_fired(item.key)
        elif isinstance(item, Wake):
            pass
        elif isinstance(item, TimedEvent):
            getattr(self, "_" + item.kind)(item.body)
        else:  # pragma: no cover - the agenda only holds the three kinds above
            raise TypeError(f"unknown agenda entry {item!r}")

    # -- scenario events ----------------------------------------------------------------------

    def _create(self, document: dict[str, Any]) -> None:
        name = _name_of(document)
        try:
            manifest = api.decode(document)
            try:
                self._admit(manifest)
            except api.ManifestError as exc:
                # api.decode names the fields of the form the user wrote; so must the checks here.
                if isinstance(manifest, api.HyperJob):
                    raise api.ManifestError(api.user_path(manifest, exc.path), exc.message) from None
                raise
        except api.ManifestError as exc:
            self.engine.world.emit("Rejected", name, reason=str(exc))

    def _admit(self, manifest: Any) -> None:
        e, w = self.engine, self.engine.world
        if isinstance(manifest, api.Queue):
            parent = manifest.spec.parent
            if parent and parent != "root" and parent not in w.queues:
                raise api.ManifestError("$.spec.parent", f"queue {parent!r} does not exist")
            w.add_queue(manifest)
        elif isinstance(manifest, api.PriorityClass):
            w.priority_classes[manifest.metadata.name] = manifest
        elif isinstance(manifest, api.Job):
            self._check_job_references(manifest.spec, "$.spec")
            if manifest.metadata.name in w.jobs:
                raise api.ManifestError("$.metadata.name", f"job {manifest.metadata.name!r} already exists")
            e.fleet.submit_job(manifest)
        elif isinstance(manifest, api.HyperJob):
            if manifest.metadata.name in w.hyperjobs:
                raise api.ManifestError("$.metadata.name", f"HyperJob {manifest.metadata.name!r} already exists")
            api.check_references(manifest, list(w.clusters), w.queue_states())
            for i, rj in enumerate(manifest.spec.replicated_jobs):
                self._check_job_references(rj.template_spec, f"$.spec.replicatedJobs[{i}].templateSpec")
            e.fleet.submit_hyperjob(manifest)
        elif isinstance(manifest, api.PodGroup):
            self._check_queue(manifest.spec.queue, "$.spec.queue")
            e.clusters.add_bare_podgroup(manifest)

    def _check_job_references(self, spec: api.JobSpec, path: str) -> None:
        self._check_queue(spec.queue, f"{path}.queue")
        w = self.engine.world
        if spec.priority_class_name and spec.priority_class_name not in w.priority_classes:
            raise api.ManifestError(f"{path}.priorityClassName",
                                    f"priority class {spec.priority_class_name!r} does not exist")

    def _check_queue(self, queue: str, path: str) -> None:
        w = self.engine.world
        api.check_queue_reference(queue, w.queue_states(), path)
        name = queue or api.DEFAULT_QUEUE
        if not w.is_leaf(name):
            raise api.ManifestError(path, f"queue {name!r} is not a leaf queue; jobs go to leaf queues")

    def _delete(self, ref: Any) -> None:
        e, w = self.engine, self.engine.world
        if ref.kind == "Job" and ref.name in w.jobs and w.jobs[ref.name].hyperjob is None:
            e.fleet.delete_job(ref.name)
        elif ref.kind == "HyperJob" and ref.name in w.hyperjobs:
            e.fleet.delete_hyperjob(ref.name)
        elif ref.kind == "Queue" and ref.name in w.queues and ref.name not in (api.DEFAULT_QUEUE, "root"):
            # Volcano refuses to delete a queue that still holds jobs or has child queues.
            if not e.clusters.queue_in_use(ref.name) and w.is_leaf(ref.name):
                del w.queues[ref.name]
        elif ref.kind == "PriorityClass":
            w.priority_classes.pop(ref.name, None)
        elif ref.kind == "PodGroup":
            e.clusters.delete_bare_podgroup(ref.name)

    def _nodeDown(self, ref: Any) -> None:  # noqa: N802 - named after the event's YAML key
        self.engine.kubelet.node_down(ref.cluster, ref.node)

    def _nodeUp(self, ref: Any) -> None:  # noqa: N802
        self.engine.kubelet.node_up(ref.cluster, ref.node)

    def _clusterDown(self, ref: Any) -> None:  # noqa: N802
        cluster = self.engine.world.clusters[ref.cluster]
        if cluster.up:
            cluster.up = False
            cluster.silent_since = self.engine.world.now
            self.engine.world.emit("ClusterDown", ref.cluster, cluster=ref.cluster)
            # Lost once silent for longer than the timeout: the first instant after it.
            self.engine.wake_after(cluster.silent_since + CLUSTER_SILENCE_TIMEOUT)

    def _clusterUp(self, ref: Any) -> None:  # noqa: N802
        cluster = self.engine.world.clusters[ref.cluster]
        if not cluster.up:
            cluster.up = True
            cluster.silent_since = None
            self.engine.world.emit("ClusterUp", ref.cluster, cluster=ref.cluster)

    def _podFail(self, body: Any) -> None:  # noqa: N802
        self.engine.kubelet.fail(body.pod, body.exit_code)

    def _command(self, body: Any) -> None:
        e, w = self.engine, self.engine.world
        if body.kind == "Queue":
            if body.name in w.queues:
                w.queues[body.name].state = "Open" if body.action == "open" else "Closed"
        elif body.kind == "Job" and body.name in w.jobs:
            e.jobs.command(w.jobs[body.name], JOB_ACTIONS[body.action])
        elif body.kind == "HyperJob" and body.name in w.hyperjobs:
            e.fleet.command(body.name, body.action)


def _name_of(document: Any) -> str:
    metadata = document.get("metadata") if isinstance(document, dict) else None
    name = metadata.get("name") if isinstance(metadata, dict) else None
    return name if isinstance(name, str) and name else "?"
