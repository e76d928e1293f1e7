"""What ``get`` and ``describe`` show: the read model of ``hyperjob.client.views`` (shared with the
apiserver and the dashboard), plus what only the CLI has: the event log's sections, the services
``up`` supervises (a local file) and the kinds ``get`` takes by name.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from hyperjob import api
from hyperjob.client import eventlog
from hyperjob.client.views import (
    HYPERJOB_LABEL,
    TERMINAL_HYPERJOB_PHASES,
    View,
    _age,
    child_owners,
    cluster_rows,
    clusters,
    cronjob_manifest,
    cronjob_rows,
    cronjobs,
    event_rows,
    hyperjob_manifest,
    hyperjob_rows,
    hyperjobs,
    hyperjobtemplates,
    job_manifest,
    job_rows,
    jobflow_manifest,
    jobflow_rows,
    jobflows,
    jobs,
    jobtemplate_manifest,
    jobtemplate_rows,
    jobtemplates,
    key_ok,
    load_events,
    node_rows,
    nodes,
    pod_manifest,
    pod_rows,
    podgroup_manifest,
    podgroup_rows,
    podgroups,
    pods,
    priorityclass_manifest,
    priorityclass_rows,
    priorityclasses,
    queue_manifest,
    queue_rows,
    queues,
    selector,
    table,
)

from .client import Client, ClientError
from .config import services_file


async def describe(client: Client, kind_name: str, name: str, namespace: str = api.DEFAULT_NAMESPACE) -> View | None:
    """Everything about one object, then its Events (as ``kubectl describe`` ends): a HyperJob
    with its child jobs, a CronJob or JobFlow with the jobs it made (as ``get jobs`` shows them),
    a Job, a Queue, a node, a JobTemplate."""
    shown = kind(kind_name)
    if shown is None or shown.load is None:
        return None
    found = [i for i in await shown.load(client, name) if i.get("namespace", namespace) == namespace]
    if not found:
        return None
    described = {k: v for k, v in found[0].items() if k != "manifest"}
    if shown.plural == "hyperjobs":
        children = {child["name"] for child in found[0]["children"]}
        listed = [j for j in await jobs(client, None) if j["name"] in children]
        described["jobs"] = [{k: v for k, v in j.items() if k not in ("pods", "manifest")} for j in listed]
    elif described.get("jobs"):
        listed = [j for j in await jobs(client, None) if j["name"] in described["jobs"]]
        described["runs"] = [{k: v for k, v in j.items() if k not in ("pods", "manifest")} for j in listed]
    listed_in = namespace if "namespace" in found[0] else api.DEFAULT_NAMESPACE  # cluster-scoped: default
    described["events"] = event_section(await load_events(client), f"{shown.singular}/{name}", listed_in)
    return described


def event_section(found: list[eventlog.Event], target: str, namespace: str) -> list[View] | str:
    """``describe``'s Events, kubectl's columns (type, reason, age, object, message; ``<none>``)."""
    try:
        mine = eventlog.about(found, target, namespace)
    except ValueError:
        mine = []
    if not mine:
        return "<none>"
    return [
        {
            "type": e.type,
            "reason": e.reason,
            "age": _age(e.last) + (f" (x{e.count} over {_age(e.first)})" if e.count > 1 else ""),
            "object": e.object,
            "message": e.message,
        }
        for e in mine
    ]


async def event_items(client: Client, target: str | None, namespace: str | None = None) -> list[View]:
    """``get events [KIND/NAME]``: the events of the log listed in ``namespace`` (None: every
    one), oldest first."""
    try:
        found = eventlog.about(await load_events(client), target, namespace)
    except ValueError as exc:
        raise ClientError(str(exc)) from None
    now = time.time()
    return [eventlog.item(e, now) for e in found]


def services(name: str | None) -> list[View]:
    """What ``hyperjob up`` supervises in this HYPERJOB_HOME (read from its status file)."""
    try:
        status = json.loads(services_file().read_text())
    except (OSError, ValueError):
        raise ClientError(f"no `hyperjob up` is running in {services_file().parent}") from None
    endpoints = {"nats": status["nats"], "redis": status["redis"]}
    return [
        {**s, "endpoints": {**endpoints, "metrics": _metrics_url(s, status.get("dashboard", ""))}}
        for s in status["services"]
        if not name or s["name"] == name
    ]


def _metrics_url(service: View, dashboard: str) -> str:
    """Where a service serves ``/metrics`` (``/healthz``, ``/readyz`` beside it): what its liveness
    file says (``servicekit.health`` listens on a free port under ``up``), the dashboard's own URL."""
    if service["name"] == "dashboard":
        return f"{dashboard.rstrip('/')}/metrics" if dashboard else ""
    if not service.get("log"):
        return ""  # NATS and Redis
    try:
        base = json.loads(Path(service["log"]).with_suffix(".alive").read_text()).get("metrics", "")
    except (OSError, ValueError, AttributeError):
        return ""
    return f"{base}/metrics" if base else ""


def service_rows(items: list[View], wide: bool = False) -> tuple[list[str], list[list[str]]]:
    rows = []
    for i in items:
        exited = "-" if i["lastExit"] is None else str(i["lastExit"])
        uptime = _age(i["startedAt"]) if i["state"] == "running" else "-"
        row = [i["name"], i["state"], str(i["restarts"]), uptime, str(i["pid"] or "-")]
        if wide:
            row += [exited, i["endpoints"]["metrics"] or "-", i["endpoints"]["nats"], i["endpoints"]["redis"], i["log"]]
        rows.append(row)
    header = ["NAME", "STATE", "RESTARTS", "UPTIME", "PID"]
    return header + (["LAST EXIT", "METRICS", "NATS", "REDIS", "LOG"] if wide else []), rows


@dataclass(frozen=True)
class Kind:
    """One kind ``get`` shows: how to load it, its table, and its manifest form (API objects)."""

    plural: str
    singular: str
    rows: Callable[[list[View], bool], tuple[list[str], list[list[str]]]]
    load: Callable[[Client, str | None], Awaitable[list[View]]] | None = None
    read_local: Callable[[str | None], list[View]] | None = None
    manifest: Callable[[View], View] | None = None
    namespaced: bool = False
    aliases: tuple[str, ...] = ()


KINDS = {
    k.plural: k
    for k in (
        Kind("hyperjobs", "hyperjob", hyperjob_rows, hyperjobs, None, hyperjob_manifest, True, ("hj",)),
        Kind("jobs", "job", job_rows, jobs, None, job_manifest, True, ("vcjob", "vj")),
        Kind("pods", "pod", pod_rows, pods, None, pod_manifest, True, ("po",)),
        Kind("podgroups", "podgroup", podgroup_rows, podgroups, None, podgroup_manifest, True, ("pg",)),
        Kind("queues", "queue", queue_rows, queues, None, queue_manifest, False, ("q",)),
        Kind(
            "priorityclasses",
            "priorityclass",
            priorityclass_rows,
            priorityclasses,
            None,
            priorityclass_manifest,
            False,
            ("pc",),
        ),
        Kind("cronjobs", "cronjob", cronjob_rows, cronjobs, None, cronjob_manifest, True, ("cronvcjob", "cronvj")),
        Kind("jobflows", "jobflow", jobflow_rows, jobflows, None, jobflow_manifest, True, ("jf",)),
        Kind("jobtemplates", "jobtemplate", jobtemplate_rows, jobtemplates, None, jobtemplate_manifest, True, ("jt",)),
        Kind(
            "hyperjobtemplates",
            "hyperjobtemplate",
            jobtemplate_rows,
            hyperjobtemplates,
            None,
            jobtemplate_manifest,
            True,
            ("hjt",),
        ),
        Kind("clusters", "cluster", cluster_rows, clusters),
        Kind("nodes", "node", node_rows, nodes, aliases=("no",)),
        Kind("services", "service", service_rows, None, services, aliases=("svc",)),
        Kind("events", "event", event_rows, event_items, namespaced=True, aliases=("ev",)),
    )
}


# The workflow-controller's kinds ``describe`` takes, by every name kubectl would accept.
DESCRIBED = ("cronjob", "cronvcjob", "cronvj", "jobflow", "jf", "jobtemplate", "jt", "hyperjobtemplate", "hjt")
# Every kind ``describe`` takes (each ends with its Events).
DESCRIBABLE = (
    *("hyperjob", "hj", "job", "vcjob", "vj", "pod", "po", "podgroup", "pg", "queue", "q", "cluster", "node", "no"),
    *("priorityclass", "pc"),
    *DESCRIBED,
)


def kind(name: str) -> Kind | None:
    """A kind by plural, singular or short name, any case, as kubectl accepts them."""
    name = name.lower()
    return next((k for k in KINDS.values() if name in (k.plural, k.singular, *k.aliases)), None)


# The read model's names, re-exported for the CLI's modules; and this module's own.
__all__ = [
    "HYPERJOB_LABEL",
    "TERMINAL_HYPERJOB_PHASES",
    "View",
    "child_owners",
    "cluster_rows",
    "clusters",
    "cronjob_manifest",
    "cronjob_rows",
    "cronjobs",
    "event_rows",
    "hyperjob_manifest",
    "hyperjob_rows",
    "hyperjobs",
    "hyperjobtemplates",
    "job_manifest",
    "job_rows",
    "jobflow_manifest",
    "jobflow_rows",
    "jobflows",
    "jobs",
    "jobtemplate_manifest",
    "jobtemplate_rows",
    "jobtemplates",
    "key_ok",
    "node_rows",
    "nodes",
    "pod_manifest",
    "pod_rows",
    "podgroup_manifest",
    "podgroup_rows",
    "podgroups",
    "pods",
    "priorityclass_manifest",
    "priorityclass_rows",
    "priorityclasses",
    "queue_manifest",
    "queue_rows",
    "queues",
    "selector",
    "table",
    "_age",
    "DESCRIBABLE",
    "DESCRIBED",
    "KINDS",
    "Kind",
    "describe",
    "event_items",
    "event_section",
    "kind",
    "service_rows",
    "services",
]
