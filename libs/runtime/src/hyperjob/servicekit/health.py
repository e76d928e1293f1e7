"""A service's HTTP endpoints for its supervisor and its scraper: ``/metrics`` (Prometheus' text
format, ``metrics.REGISTRY``), ``/healthz`` and ``/readyz``.

- ``/healthz``: 200 while the process's event loop turns and every consumer loop and watch runs
  (the same judgement as its liveness file, ``liveness.report``). It is answered on the service's
  own event loop, so a loop that hangs stops answering: the probe times out. Restart on failure.
- ``/readyz``: 200 when, besides, the bus is connected, Redis answers a PING within
  ``PING_TIMEOUT``, the instance has started consuming, and the server serves every consumer's
  pulls (one whose durable was deleted is refused until it is re-created). 503 with the reasons otherwise (a
  Redis outage, a reconnecting bus): do not restart, wait (the runtime holds its messages).

The server is a few lines on ``asyncio.start_server``: three GET routes need no framework, and a
framework's own signal handling (uvicorn's) would take the service's SIGTERM. It listens on
``METRICS_HOST:METRICS_PORT`` (``<SERVICE>_METRICS_HOST`` / ``_PORT`` override them): loopback
by default, port 0 for any free port; ``liveness`` records the URL it got, where ``hyperjob up``
and ``get services`` read it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import msgspec
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from . import liveness, metrics

if TYPE_CHECKING:
    from .runtime import Runtime

__all__ = ["PATHS", "HealthServer", "HealthSettings", "readiness"]

PATHS = ("/metrics", "/healthz", "/readyz")
PING_TIMEOUT = 1.0
READ_TIMEOUT = 5.0


class HealthSettings(msgspec.Struct, frozen=True, kw_only=True):
    """Where the endpoints listen (``load_settings(HealthSettings, "<SERVICE>")``)."""

    metrics_host: str = "127.0.0.1"
    metrics_port: int = 0


async def readiness(runtime: Runtime) -> list[str]:
    """Why ``runtime`` is not ready (empty: ready)."""
    problems = []
    if liveness.report(runtime) is None:
        problems.append("a consumer loop or watch has stopped")
    if not runtime.started:
        problems.append("not consuming yet (loading its state)")
    if not getattr(runtime.bus, "connected", True):
        problems.append("NATS: disconnected (reconnecting)")
    for member in runtime.members:
        refused = getattr(member, "refused", "")  # a consumer loop that runs but cannot pull
        if refused:
            problems.append(f"consumer {member.durable}: {refused} (re-created meanwhile)")
    try:
        await asyncio.wait_for(runtime.store.ping(), PING_TIMEOUT)
    except Exception as exc:  # noqa: BLE001 - whatever the client raises, Redis is not usable
        problems.append(f"Redis: {type(exc).__name__}: {exc}".rstrip(": "))
    return problems


Route = Callable[[], Awaitable[tuple[int, str, bytes]]]


class HealthServer:
    """The three endpoints of one service instance, on the instance's event loop."""

    def __init__(self, runtime: Runtime, settings: HealthSettings) -> None:
        self.runtime = runtime
        self.settings = settings
        self.url = ""
        self._server: asyncio.Server | None = None
        self._backlog: asyncio.Task[None] | None = None
        self.routes: dict[str, Route] = {"/metrics": self._metrics, "/healthz": self._healthz, "/readyz": self._readyz}

    async def start(self) -> str:
        """Listen; returns the base URL (``http://host:port``)."""
        self._server = await asyncio.start_server(self._serve, self.settings.metrics_host, self.settings.metrics_port)
        host, port = self._server.sockets[0].getsockname()[:2]
        shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
        self.url = f"http://{shown}:{port}"
        self._backlog = asyncio.create_task(self._watch_backlog(), name="bus-backlog-gauges")
        return self.url

    async def stop(self) -> None:
        if self._backlog is not None:
            self._backlog.cancel()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT)
            method, _, rest = request.decode("latin-1").partition(" ")
            path = rest.split(" ", 1)[0].split("?", 1)[0]
            route = self.routes.get(path)
            if method not in ("GET", "HEAD"):
                status, kind, body = 405, "text/plain", b"only GET\n"
            elif route is None:
                status, kind, body = 404, "text/plain", f"not found; try {', '.join(PATHS)}\n".encode()
            else:
                status, kind, body = await route()
            head = f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {kind}\r\n"
            head += f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            writer.write(head.encode() + (body if method == "GET" else b""))
            await writer.drain()
        except (TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass  # a probe that went away or sent no request: nothing to answer
        finally:
            writer.close()

    async def _metrics(self) -> tuple[int, str, bytes]:
        return 200, CONTENT_TYPE_LATEST, generate_latest(metrics.REGISTRY)

    async def _healthz(self) -> tuple[int, str, bytes]:
        record = liveness.report(self.runtime)
        if record is None:
            return 503, "application/json", b'{"ok": false, "why": "a consumer loop or watch has stopped"}\n'
        return 200, "application/json", json.dumps({"ok": True, **record}).encode() + b"\n"

    async def _readyz(self) -> tuple[int, str, bytes]:
        problems = await readiness(self.runtime)
        # A standby replica is ready (it takes over when needed); ``active`` says which one runs.
        body = json.dumps({"ready": not problems, "active": self.runtime.active, "problems": problems}).encode()
        body += b"\n"
        return (503 if problems else 200), "application/json", body

    async def _watch_backlog(self) -> None:
        """Keep ``hyperjob_bus_dead_letters`` and ``hyperjob_bus_consumer_pending`` per durable of
        this instance (read-only; what its user may not read stays out)."""
        consumers = {durable: filters for durable, filters, _ in self.runtime.inputs() if durable != "watch"}
        while not self.runtime.started:  # its consumers exist once it started
            await asyncio.sleep(0.2)
        while True:
            for durable, filters in sorted(consumers.items()):
                with contextlib.suppress(Exception):  # not permitted, or the bus is away: next time
                    lag = await self.runtime.bus.lag(durable, filters)
                    metrics.BUS.pending.labels(durable).set(lag.pending)
                with contextlib.suppress(Exception):
                    stored = await self.runtime.bus.stored(f"dlq.{durable}", stream="DLQ")
                    metrics.BUS.dead_letters.labels(durable).set(len(stored))
            await asyncio.sleep(metrics.DLQ_PERIOD)


_REASONS = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}
