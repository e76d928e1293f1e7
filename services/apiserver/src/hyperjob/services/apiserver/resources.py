"""The resources the apiserver serves: each Kubernetes resource (group, version, plural) with its
kind, names, scope, verbs and how it is read (a loader, table rows and manifest of
``hyperjob.client.views``, the same read model as ``hyperjob get``).

HyperJob is served in both groups its two manifest forms have (``training.volcano.sh``, listed
first, so ``kubectl get hyperjobs`` means it, and ``batch.volcano.sh``); both list every HyperJob.
Short names are those of Volcano's CRDs (``vcjob``/``vj``, ``q``, ``pg`` ...), of Kubernetes for
its own kinds (``po``, ``no``, ``ev``, ``ns``, ``pc``) and HyperJob's ``hj``; Volcano's CRDs declare no
categories, so none is served.

Kubeflow's MPIJob, PyTorchJob and TFJob are served in ``kubeflow.org/v1`` (training-operator's CRDs)
and MPIJob also in ``v2beta1`` (mpi-operator's), as ``hyperjob get pytorchjobs`` shows them
(``hyperjob.client.workloads``): their CRDs declare no short names and no categories. Each runs as a
plain Volcano Job, so a delete names that Job. Both MPIJob versions list every MPIJob, each in the
version it was applied in (no conversion between the two operators' shapes).
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from hyperjob import api
from hyperjob.client import Client, eventlog, workloads
from hyperjob.client import views as v

View = v.View
Loader = Callable[[Client, str | None], Awaitable[list[View]]]
Rows = Callable[[list[View], bool], tuple[list[str], list[list[str]]]]

READ_VERBS = ("get", "list", "watch")
WRITE_VERBS = ("create", "update", "patch", "delete")
BUILTIN_GROUPS = ("", "scheduling.k8s.io")


@dataclass(frozen=True)
class Resource:
    group: str  # "" for the core group
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    load: Loader
    rows: Rows
    manifest: Callable[[View], View]
    short_names: tuple[str, ...] = ()
    writable: bool = True  # False: the system owns these objects (pods, nodes, events ...)
    categories: tuple[str, ...] = field(default=())
    runs_as: str = ""  # the kind the contract's requests name, when not ``kind`` (a PyTorchJob runs as a Job)
    status: bool = True  # served with a ``status`` subresource, as its CRD or Kubernetes declares

    @property
    def builtin(self) -> bool:
        """One of Kubernetes' own kinds (core, ``scheduling.k8s.io``), not a custom resource's."""
        return self.group in BUILTIN_GROUPS

    @property
    def request_kind(self) -> str:
        """The kind a ``DeleteObject`` names: a Kubeflow job is deleted as the Volcano Job running it."""
        return self.runs_as or self.kind

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def verbs(self) -> tuple[str, ...]:
        return READ_VERBS + WRITE_VERBS if self.writable else READ_VERBS

    @property
    def served_at(self) -> str:
        """``kubeflow.org/v1/mpijobs``: one resource in one version (MPIJob is served in two)."""
        return f"{self.group_version}/{self.plural}"

    @property
    def qualified(self) -> str:
        """``hyperjobs.training.volcano.sh`` as kubectl names a resource in its messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural


def node_manifest(item: View) -> View:
    """A node as core/v1 shows it: its labels, capacity, allocatable and Ready condition."""
    ready = "True" if item.get("ready") else "False"
    metadata = {"name": item["name"], "labels": item.get("labels", {})}
    status = {
        "allocatable": {k: str(val) for k, val in item.get("allocatable", {}).items()},
        "conditions": [{"type": "Ready", "status": ready}],
        "hyperjob": {k: val for k, val in item.items() if k not in ("name", "labels")},
    }
    return {"apiVersion": "v1", "kind": "Node", "metadata": metadata, "status": status}


def cluster_manifest(item: View) -> View:
    """One member cluster of the fleet, with what it last reported."""
    status = {k: val for k, val in item.items() if k != "name"}
    return {
        "apiVersion": "hyperjob.io/v1alpha1",
        "kind": "Cluster",
        "metadata": {"name": item["name"]},
        "status": status,
    }


async def namespaces(client: Client, name: str | None) -> list[View]:
    """The namespaces objects live in (``default`` always): HyperJob has no Namespace objects of its
    own, a namespace exists by being used."""
    used = {"default"}
    for load in (v.hyperjobs, v.jobs):
        used |= {item.get("namespace", "default") for item in await load(client, None)}
    return [{"name": n, "created": 0.0} for n in sorted(used) if not name or n == name]


def namespace_rows(items: list[View], wide: bool = False) -> tuple[list[str], list[list[str]]]:
    return ["NAME", "STATUS"], [[i["name"], "Active"] for i in items]


def namespace_manifest(item: View) -> View:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": item["name"]},
        "status": {"phase": "Active"},
    }


async def event_views(client: Client, name: str | None) -> list[View]:
    """The Events of the event log (``hyperjob.client.eventlog``, what ``hyperjob get events``
    lists), each with the object it is about."""
    now = time.time()
    found = await v.load_events(client)
    return [{**eventlog.item(e, now), "kind": e.kind, "objectName": e.name} for e in found]


def event_manifest(item: View) -> View:
    """A core/v1 Event, field for field (ADR 0007's table). The event log knows no namespace yet:
    an object's key (``team-a/x``) says it, else it is listed in ``default``."""
    namespace, name = api.split_key(item["objectName"])
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": item["name"], "namespace": namespace},
        "involvedObject": {"kind": item["kind"], "name": name, "namespace": namespace},
        "type": item["type"],
        "reason": item["reason"],
        "message": item["message"],
        "count": item["count"],
        "firstTimestamp": _timestamp(item["firstTimestamp"]),
        "lastTimestamp": _timestamp(item["lastTimestamp"]),
        "source": {"component": "hyperjob", "host": item["cluster"]},
    }


def _timestamp(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


RESOURCES: tuple[Resource, ...] = (
    Resource("training.volcano.sh", "v1alpha1", "HyperJob", "hyperjobs", "hyperjob", True,
             v.hyperjobs, v.hyperjob_rows, v.hyperjob_manifest, ("hj",)),
    Resource("training.volcano.sh", "v1alpha1", "HyperJobTemplate", "hyperjobtemplates", "hyperjobtemplate", True,
             v.hyperjobtemplates, v.jobtemplate_rows, v.jobtemplate_manifest, ("hjt",)),
    # The conceptual form (``template`` + ``splitPolicy``): the same HyperJobs, applied as written.
    Resource("batch.volcano.sh", "v1alpha1", "HyperJob", "hyperjobs", "hyperjob", True,
             v.hyperjobs, v.hyperjob_rows, v.hyperjob_manifest),
    Resource("batch.volcano.sh", "v1alpha1", "Job", "jobs", "job", True,
             v.jobs, v.job_rows, v.job_manifest, ("vcjob", "vj")),
    Resource("batch.volcano.sh", "v1alpha1", "CronJob", "cronjobs", "cronjob", True,
             v.cronjobs, v.cronjob_rows, v.cronjob_manifest, ("cronvcjob", "cronvj")),
    Resource("scheduling.volcano.sh", "v1beta1", "Queue", "queues", "queue", False,
             v.queues, v.queue_rows, v.queue_manifest, ("q", "queue-v1beta1")),
    Resource("scheduling.volcano.sh", "v1beta1", "PodGroup", "podgroups", "podgroup", True,
             v.podgroups, v.podgroup_rows, v.podgroup_manifest, ("pg", "podgroup-v1beta1"), writable=False),
    Resource("flow.volcano.sh", "v1alpha1", "JobFlow", "jobflows", "jobflow", True,
             v.jobflows, v.jobflow_rows, v.jobflow_manifest, ("jf",)),
    Resource("flow.volcano.sh", "v1alpha1", "JobTemplate", "jobtemplates", "jobtemplate", True,
             v.jobtemplates, v.jobtemplate_rows, v.jobtemplate_manifest, ("jt",)),
    *(
        Resource("kubeflow.org", version, kind, kind.lower() + "s", kind.lower(), True,
                 workloads.loader(kind), workloads.rows, workloads.manifest, runs_as="Job")
        for version, kind in (("v1", "MPIJob"), ("v1", "PyTorchJob"), ("v1", "TFJob"), ("v2beta1", "MPIJob"))
    ),
    Resource("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", "priorityclass", False,
             v.priorityclasses, v.priorityclass_rows, v.priorityclass_manifest, ("pc",), status=False),
    Resource("", "v1", "Pod", "pods", "pod", True, v.pods, v.pod_rows, v.pod_manifest, ("po",), writable=False),
    Resource("", "v1", "Node", "nodes", "node", False, v.nodes, v.node_rows, node_manifest, ("no",), writable=False),
    Resource("", "v1", "Event", "events", "event", True,
             event_views, v.event_rows, event_manifest, ("ev",), writable=False, status=False),
    Resource("", "v1", "Namespace", "namespaces", "namespace", False,
             namespaces, namespace_rows, namespace_manifest, ("ns",), writable=False),
    Resource("hyperjob.io", "v1alpha1", "Cluster", "clusters", "cluster", False,
             v.clusters, v.cluster_rows, cluster_manifest, writable=False),
)  # fmt: skip


def group_versions() -> dict[str, list[Resource]]:
    """The resources of each group/version (``v1`` for the core group), in the order served."""
    found: dict[str, list[Resource]] = {}
    for resource in RESOURCES:
        found.setdefault(resource.group_version, []).append(resource)
    return found


def api_versions(kind: str) -> tuple[str, ...]:
    """Every group/version serving ``kind``: a HyperJob is applied in either form, and its object
    keeps the form it was applied in, whichever group it is read through."""
    return tuple(r.group_version for r in RESOURCES if r.kind == kind)


PODS = next(r for r in RESOURCES if (r.group, r.version, r.plural) == ("", "v1", "pods"))


def find(group: str, version: str, plural: str) -> Resource | None:
    return next(
        (r for r in RESOURCES if (r.group, r.version, r.plural) == (group, version, plural)),
        None,
    )
