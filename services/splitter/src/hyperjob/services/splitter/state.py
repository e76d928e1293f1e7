"""The state every unit of the splitter shares: the documents it owns and what it hears of the fleet."""

from __future__ import annotations

from msgspec.structs import replace

from hyperjob import api, records
from hyperjob.records.capacity import Capacity
from hyperjob.servicekit import Runtime

from . import domain


class SplitterState:
    """The splitter's tables (HyperJobs and plain Jobs and PodGroups, queues, priority classes),
    the fleet's capacity as the clusters report it, and the decoded manifests.

    Invariants, enforced here:
    - A HyperJob document changes only through ``put`` or ``drop``, which mark it to be announced
      (``SpecAnnouncer.flush``) before the unit of work that changed it commits; a reload of the
      tables forgets the marks (nothing of a unit that did not commit is announced).
    - ``owners_of_name`` is kept by the table with every change: the job names each HyperJob's
      children (or a plain Job itself) go by, looked up without scanning every HyperJob.
    """

    def __init__(self, runtime: Runtime) -> None:
        self.rt = runtime
        self.hyperjobs = runtime.table(records.HYPERJOB, records.HyperJobDoc)
        # Which HyperJob (or plain Job) goes by a job name: looked up on every split, a scan of
        # every HyperJob's children made accepting a burst of HyperJobs quadratic.
        self.owners_of_name = self.hyperjobs.index_many(names_used)
        self.queues = runtime.table(records.QUEUE, records.QueueDoc)
        self.classes = runtime.table(records.PRIORITY_CLASS, records.PriorityClassDoc)
        self.capacity = Capacity()
        self.decoded = domain.DecodedManifests()
        self.dirty: set[str] = set()  # HyperJobs whose spec is to be announced by this unit
        runtime.on_load(self.dirty.clear)

    def cfg(self) -> domain.Config:
        return domain.config(self.queues.rows, self.classes.rows, sorted(self.capacity.clusters))

    def put(self, doc: records.HyperJobDoc) -> None:
        self.hyperjobs.put(doc.name, doc)
        self.dirty.add(doc.name)

    def drop(self, doc: records.HyperJobDoc) -> None:
        self.hyperjobs.delete(doc.name)
        self.dirty.add(doc.name)

    def find(self, kind: str, namespace: str, name: str) -> records.HyperJobDoc | None:
        """The HyperJob, plain Job or PodGroup ``namespace/name``, or None."""
        doc = self.hyperjobs.get(domain.owner_key(kind, namespace, name))
        if doc is None or doc.manifest.get("kind") != kind or domain.namespace_of(doc) != namespace:
            return None
        return doc

    def hyperjob(self, doc: records.HyperJobDoc) -> api.HyperJob:
        """The HyperJob as the fleet knows it: named by its fleet name, which its children's names
        start with (``team-a-x-worker-0`` for ``team-a/x``; unchanged in ``default``)."""
        hyperjob = api.expect_kind(self.decoded.of(doc), api.HyperJob)
        meta = hyperjob.metadata
        return replace(hyperjob, metadata=replace(meta, name=api.fleet_name(meta)))


def names_used(doc: records.HyperJobDoc) -> list[str]:
    """The job names a HyperJob's children (or a plain Job itself) go by."""
    return [doc.name] if doc.plain else [ref.name for ref in doc.children]
