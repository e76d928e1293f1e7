"""The dashboard's Starlette application: JSON reads and one server-sent event stream."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from importlib import resources
from pathlib import Path
from typing import Any

import structlog
import yaml
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from hyperjob import api
from hyperjob.bus import BusError
from hyperjob.client import Client, eventlog, podlogs, spans, views
from hyperjob.client.views import View, hyperjob_manifest, hyperjob_queues, load_events
from hyperjob.store import StoreUnavailableError

from . import metrics

# How often the event stream looks for changes; it sends only when something changed.
_log = structlog.get_logger("dashboard")
POLL_SECONDS = 1.0
# A comment line keeps idle connections (and proxies) from timing out.
KEEPALIVE_SECONDS = 15.0
# A HyperJob's page shows the last LOG_LINES lines of the logs of its first LOG_PODS pods that have one.
LOG_LINES = 40
LOG_PODS = 64


async def snapshot(client: Client) -> dict[str, Any]:
    """Everything the list pages show, small enough to send whole on every change: the page
    searches, filters, sorts and pages the HyperJobs itself, so a filter costs no round trip."""
    hyperjobs = await views.hyperjobs(client, None)
    jobs = await views.jobs(client, None)
    return {
        "hyperjobs": [_listed(h) for h in hyperjobs],
        "jobs": [{k: v for k, v in j.items() if k not in ("manifest", "pods")} for j in jobs],
        "queues": [{k: v for k, v in q.items() if k != "manifest"} for q in await views.queues(client, None)],
        "clusters": await views.clusters(client, None),
        "nodes": await views.nodes(client, None),
    }


def _listed(hyperjob: View) -> View:
    """A HyperJob as the list shows and filters it: its queues (from the manifest, as ``get -o
    wide`` shows them) and clusters, without the manifest."""
    shown = {k: v for k, v in hyperjob.items() if k != "manifest"}
    shown["queues"] = hyperjob_queues(hyperjob["manifest"])
    placed = set(hyperjob["status"].get("placement") or {})
    shown["clusters"] = sorted(placed | {c["cluster"] for c in hyperjob["children"] if c.get("cluster")})
    return shown


async def hyperjob_detail(
    client: Client, namespace: str, name: str, pod_logs: Path | None = None
) -> dict[str, Any] | None:
    """One HyperJob: its child jobs (with their pods and the pods' times, for the timeline), its
    Events (those ``hyperjob describe`` shows), its manifest as YAML, its trace (the waterfall
    ``hyperjob trace`` draws) and the end of its pods' logs (those under ``pod_logs``)."""
    found = [h for h in await views.hyperjobs(client, name) if h["namespace"] == namespace]
    if not found:
        return None
    children = {child["name"] for child in found[0]["children"]}
    jobs = [j for j in await views.jobs(client, None) if j["name"] in children or j["hyperJob"] == name]
    return {
        "hyperjob": _listed(found[0]),
        "jobs": [{k: v for k, v in j.items() if k != "manifest"} for j in jobs],
        "events": await hyperjob_events(client, namespace, name),
        "yaml": yaml.safe_dump(hyperjob_manifest(found[0]), sort_keys=False, allow_unicode=True),
        "trace": await hyperjob_trace(client, namespace, name),
        "logs": hyperjob_logs(jobs, pod_logs),
    }


async def hyperjob_trace(client: Client, namespace: str, name: str) -> dict[str, Any]:
    """The latest life of the HyperJob as ``hyperjob trace`` draws it: its spans in tree order,
    each with its depth, its parent (an index into the list; the root's is None), and its start
    and duration in seconds after the life began."""
    key = api.object_key(namespace, name)
    every = spans.lives(await spans.load(client.bus, key), key)
    if not every:
        return {"lives": 0, "traceId": "", "duration": 0.0, "spans": []}
    root = spans.waterfall(every[-1], key)
    rows: list[dict[str, Any]] = []
    parents: list[int] = []  # the index of the span open at each depth
    for depth, span in root.walk():
        del parents[depth:]
        rows.append(
            {
                "name": span.name,
                "service": span.service,
                "depth": depth,
                "parent": parents[-1] if parents else None,
                "offset": span.start - root.start,
                "duration": span.duration,
                "warning": span.warning,
            }
        )
        parents.append(len(rows) - 1)
    return {"lives": len(every), "traceId": spans.main_trace(every[-1]), "duration": root.duration, "spans": rows}


def hyperjob_logs(jobs: list[View], pod_logs: Path | None) -> dict[str, Any]:
    """The last lines of each of the jobs' pods' logs that exist under ``pod_logs`` (the work
    directory of this machine's exec- and container-mode agents), and why the others have none."""
    pods = [(job["cluster"], pod["name"]) for job in jobs for pod in job["pods"]]
    found: list[dict[str, Any]] = []
    for cluster, pod in pods:
        paths = podlogs.log_paths(pod_logs, pod, cluster) if pod_logs is not None else []
        if paths and len(found) < LOG_PODS:
            found.append({"pod": pod, "cluster": cluster, "tail": podlogs.tail(paths[0], LOG_LINES)})
    return {"pods": found, "without": len(pods) - len(found), "note": _logs_note(len(pods), found, pod_logs)}


def _logs_note(pods: int, found: list[dict[str, Any]], pod_logs: Path | None) -> str:
    """What the page says where pods have no log to show."""
    if pods == 0:
        return "No pod has been created yet."
    if pod_logs is None:
        return (
            "Pod logs are not shown: the dashboard was not told where this machine's exec- and container-mode "
            "agents keep them (DASHBOARD_POD_LOGS). Simulated pods have none."
        )
    if not found:
        return (
            "No pod of this HyperJob has a log on the dashboard's machine: its pods are simulated (a "
            "simulated node-agent runs no process, so there is no output), or not started yet. Pods of "
            f"exec- and container-mode agents on this machine log under {pod_logs}."
        )
    if pods > len(found):
        shown = f"not started, simulated, or past the first {LOG_PODS}"
        return f"{pods - len(found)} of {pods} pods have no log shown here ({shown})."
    return ""


async def hyperjob_events(client: Client, namespace: str, name: str) -> list[dict[str, object]]:
    """The HyperJob's Events, its children's and podgroups' included, oldest first."""
    now = time.time()
    return [eventlog.item(e, now) for e in eventlog.about(await load_events(client), f"hyperjob/{name}", namespace)]


async def job_detail(client: Client, name: str) -> list[View]:
    """A Job (one per cluster it runs in) with its pods."""
    return [{k: v for k, v in j.items() if k != "manifest"} for j in await views.jobs(client, name)]


ClientSource = Callable[[], AbstractAsyncContextManager[Client]]


def create_app(nats_url: str, redis_url: str, pod_logs: Path | None = None) -> Starlette:
    """The dashboard over the system at these URLs (connected at startup, closed at shutdown);
    ``pod_logs``: where this machine's exec- and container-mode agents keep pod logs, if known."""

    @contextlib.asynccontextmanager
    async def connected() -> AsyncIterator[Client]:
        async with await Client.connect(nats_url, redis_url, producer="hyperjob-dashboard", timeout=10.0) as client:
            yield client

    return build_app(connected, pod_logs)


def build_app(source: ClientSource, pod_logs: Path | None = None) -> Starlette:
    """The dashboard over the client ``source`` yields for the app's life (a test passes its own),
    showing the pod logs under ``pod_logs``."""
    state: dict[str, Client] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with source() as client:
            state["client"] = client
            yield

    async def page(request: Request) -> Response:
        return HTMLResponse(resources.files(__package__).joinpath("static/index.html").read_text(encoding="utf-8"))

    async def api_snapshot(request: Request) -> Response:
        return JSONResponse(await snapshot(state["client"]))

    async def api_hyperjob(request: Request) -> Response:
        namespace = request.path_params.get("namespace", api.DEFAULT_NAMESPACE)
        name = request.path_params["name"]
        detail = await hyperjob_detail(state["client"], namespace, name, pod_logs)
        if detail is None:
            return JSONResponse({"error": f"hyperjob {namespace}/{name} not found"}, status_code=404)
        return JSONResponse(detail)

    async def api_job(request: Request) -> Response:
        found = await job_detail(state["client"], request.path_params["name"])
        if not found:
            return JSONResponse({"error": f"job {request.path_params['name']!r} not found"}, status_code=404)
        return JSONResponse({"jobs": found})

    async def api_events(request: Request) -> Response:
        return StreamingResponse(_changes(request, state["client"]), media_type="text/event-stream")

    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True})

    async def fleet_metrics(request: Request) -> Response:
        return Response(await metrics.exposition(state["client"]), media_type=CONTENT_TYPE_LATEST)

    routes = [
        Route("/", page),
        Route("/api/snapshot", api_snapshot),
        Route("/api/hyperjobs/{name}", api_hyperjob),
        Route("/api/hyperjobs/{namespace}/{name}", api_hyperjob),
        Route("/api/jobs/{name}", api_job),
        Route("/api/events", api_events),
        Route("/healthz", healthz),
        Route("/metrics", fleet_metrics),
        Mount("/static", StaticFiles(packages=[(__package__, "static")])),
    ]
    return Starlette(routes=routes, lifespan=lifespan)


async def _changes(request: Request, client: Client) -> AsyncIterator[str]:
    """The snapshot as an event each time it differs from the last one sent."""
    last, idle = "", 0.0
    while not await request.is_disconnected():
        try:
            data = json.dumps(await snapshot(client), default=str, sort_keys=True)
        except (StoreUnavailableError, BusError) as exc:
            # An outage (or a connection the server dropped: redis-server drops its clients when
            # a user is added) is not the stream's end: keep it open and read again next poll.
            _log.warning("snapshot_unavailable", error=str(exc))
            await asyncio.sleep(POLL_SECONDS)
            idle += POLL_SECONDS
            continue
        digest = hashlib.sha256(data.encode()).hexdigest()
        if digest != last:
            last, idle = digest, 0.0
            yield f"event: snapshot\ndata: {data}\n\n"
        elif idle >= KEEPALIVE_SECONDS:
            idle = 0.0
            yield ": keep-alive\n\n"
        await asyncio.sleep(POLL_SECONDS)
        idle += POLL_SECONDS
