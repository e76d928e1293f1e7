"""The dashboard's Starlette application: JSON reads and one server-sent event stream."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import AsyncIterator
from importlib import resources
from typing import Any

import structlog
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from hyperjob.bus import BusError
from hyperjob.cli import views
from hyperjob.client import Client
from hyperjob.store import StoreUnavailableError

from . import metrics

# How often the event stream looks for changes; it sends only when something changed.
_log = structlog.get_logger("dashboard")
POLL_SECONDS = 1.0
# A comment line keeps idle connections (and proxies) from timing out.
KEEPALIVE_SECONDS = 15.0


async def snapshot(client: Client) -> dict[str, Any]:
    """Everything the list pages show, small enough to send whole on every change."""
    hyperjobs = await views.hyperjobs(client, None)
    jobs = await views.jobs(client, None)
    return {
        "hyperjobs": [{k: v for k, v in h.items() if k != "manifest"} for h in hyperjobs],
        "jobs": [{k: v for k, v in j.items() if k not in ("manifest", "pods")} for j in jobs],
        "queues": [{k: v for k, v in q.items() if k != "manifest"} for q in await views.queues(client, None)],
        "clusters": await views.clusters(client, None),
        "nodes": await views.nodes(client, None),
    }


async def hyperjob_detail(client: Client, name: str) -> dict[str, Any] | None:
    """One HyperJob, its child jobs (with their pods and the pods' times, for the timeline)."""
    found = await views.hyperjobs(client, name)
    if not found:
        return None
    children = {child["name"] for child in found[0]["children"]}
    jobs = [j for j in await views.jobs(client, None) if j["name"] in children or j["hyperJob"] == name]
    return {
        "hyperjob": found[0],
        "jobs": [{k: v for k, v in j.items() if k != "manifest"} for j in jobs],
    }


def create_app(nats_url: str, redis_url: str) -> Starlette:
    state: dict[str, Client] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        state["client"] = await Client.connect(nats_url, redis_url, producer="hyperjob-dashboard", timeout=10.0)
        try:
            yield
        finally:
            await state["client"].close()

    async def page(request: Request) -> Response:
        return HTMLResponse(resources.files(__package__).joinpath("static/index.html").read_text(encoding="utf-8"))

    async def api_snapshot(request: Request) -> Response:
        return JSONResponse(await snapshot(state["client"]))

    async def api_hyperjob(request: Request) -> Response:
        detail = await hyperjob_detail(state["client"], request.path_params["name"])
        if detail is None:
            return JSONResponse({"error": f"hyperjob {request.path_params['name']!r} not found"}, status_code=404)
        return JSONResponse(detail)

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
        Route("/api/events", api_events),
        Route("/healthz", healthz),
        Route("/metrics", fleet_metrics),
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
