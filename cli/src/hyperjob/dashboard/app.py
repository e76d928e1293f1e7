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
from hyperjob.client import Client, eventlog, views
from hyperjob.client.views import View, hyperjob_manifest, hyperjob_queues, load_events
from hyperjob.store import StoreUnavailableError

from . import metrics

# How often the event stream looks for changes; it sends only when something changed.
_log = structlog.get_logger("dashboard")
POLL_SECONDS = 1.0
# A comment line keeps idle connections (and proxies) from timing out.
KEEPALIVE_SECONDS = 15.0


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


async def hyperjob_detail(client: Client, namespace: str, name: str) -> dict[str, Any] | None:
    """One HyperJob: its child jobs (with their pods and the pods' times, for the timeline), its
    Events (those ``hyperjob describe`` shows) and its manifest as YAML."""
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
    }


async def hyperjob_events(client: Client, namespace: str, name: str) -> list[dict[str, object]]:
    """The HyperJob's Events, its children's and podgroups' included, oldest first."""
    now = time.time()
    return [eventlog.item(e, now) for e in eventlog.about(await load_events(client), f"hyperjob/{name}", namespace)]


async def job_detail(client: Client, name: str) -> list[View]:
    """A Job (one per cluster it runs in) with its pods."""
    return [{k: v for k, v in j.items() if k != "manifest"} for j in await views.jobs(client, name)]


ClientSource = Callable[[], AbstractAsyncContextManager[Client]]


def create_app(nats_url: str, redis_url: str) -> Starlette:
    """The dashboard over the system at these URLs (connected at startup, closed at shutdown)."""

    @contextlib.asynccontextmanager
    async def connected() -> AsyncIterator[Client]:
        async with await Client.connect(nats_url, redis_url, producer="hyperjob-dashboard", timeout=10.0) as client:
            yield client

    return build_app(connected)


def build_app(source: ClientSource) -> Starlette:
    """The dashboard over the client ``source`` yields for the app's life (a test passes its own)."""
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
        detail = await hyperjob_detail(state["client"], namespace, name)
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
