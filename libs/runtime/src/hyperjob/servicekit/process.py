"""A service process: settings → telemetry → connections → build → start → run until SIGTERM/SIGINT.

Its supervisor learns that it is well from its liveness file (``liveness``); a bus connection
lost for good ends it with ``liveness.EXIT_BUS_LOST``, to be restarted."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import msgspec
import structlog

from hyperjob import telemetry
from hyperjob.events.subjects import STREAMS

from . import liveness, metrics
from .config import SettingsError, instance_name, load_settings
from .health import HealthServer, HealthSettings
from .runtime import Runtime
from .timers import AsyncioTimers, WallClock

S = TypeVar("S", bound=msgspec.Struct)
LEASE_TTL = 5.0
# A service's ``build(settings, runtime)``: declares its tables, inputs and rounds on ``runtime``.
Build = Callable[[S, Runtime], Awaitable[object]]


def run_service(name: str, settings_type: type[S], build: Build[S], instance: Callable[[S], str] | None = None) -> None:
    """The whole life of a service process. ``name`` is the deploy name (``global-scheduler``);
    ``instance`` names the instance from its settings when the default (``instance_name``) does not."""
    prefix = name.upper().replace("-", "_")
    try:
        settings = load_settings(settings_type, prefix)
        endpoints = load_settings(HealthSettings, prefix)
        urls = _Urls(nats=_url(settings, "nats_url"), redis=_url(settings, "redis_url"))
    except SettingsError as exc:
        print(f"{name}: invalid configuration: {exc}", file=sys.stderr)
        sys.exit(2)
    telemetry.setup(name, getattr(settings, "log_level", "INFO"))
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # uvloop is an optimisation, not a requirement
        pass
    serve = _serve(name, settings, build, (instance or (lambda s: instance_name(name, s)))(settings), endpoints, urls)
    profile_dir = os.environ.get("HYPERJOB_PROFILE_DIR")
    if not profile_dir:
        asyncio.run(serve)
        return
    # Benchmarks: the process's own profile (py-spy cannot follow uvloop's callbacks), written at exit.
    import cProfile

    profiler = cProfile.Profile(time.process_time)  # CPU time: wall time would count the waits for a core
    try:
        profiler.runcall(asyncio.run, serve)
    finally:
        cluster = getattr(settings, "cluster", "")
        profiler.dump_stats(os.path.join(profile_dir, f"{name}{'-' + cluster if cluster else ''}.prof"))


def _url(settings: msgspec.Struct, field: str) -> str:
    """``nats_url`` or ``redis_url``: every service's Settings declares both (as ``str``)."""
    value = getattr(settings, field, None)
    if not isinstance(value, str):
        raise SettingsError(f"{type(settings).__name__} has no {field} (a str)")
    return value


class _Urls(msgspec.Struct, frozen=True, kw_only=True):
    nats: str
    redis: str


async def _serve(
    name: str, settings: S, build: Build[S], instance: str, endpoints: HealthSettings, urls: _Urls
) -> None:
    from hyperjob.bus.natsbus import NatsBus
    from hyperjob.store.redis_store import RedisStore

    log = structlog.get_logger(name)
    # A NATS cluster: NATS_URL names its servers (comma-separated), NATS_STREAM_REPLICAS the copies.
    replicas = int(os.environ.get("NATS_STREAM_REPLICAS", "0")) or None
    bus = await NatsBus.connect(urls.nats, STREAMS, name=name, replicas=replicas)
    store = await RedisStore.connect(urls.redis)
    clock = WallClock()
    # Replicas of one instance take turns (``Runtime``'s lease): a crashed holder's standby takes
    # over within HYPERJOB_LEASE_TTL seconds (one that stops cleanly hands over at once).
    lease_ttl = float(os.environ.get("HYPERJOB_LEASE_TTL", str(LEASE_TTL)))
    runtime = Runtime(name, instance, bus, store, clock=clock, timers=AsyncioTimers(clock), lease_ttl=lease_ttl)
    runtime.offload = True
    stop = asyncio.Event()
    lost: list[bool] = []

    def bus_lost() -> None:
        lost.append(True)
        stop.set()

    bus.on_lost(bus_lost)
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    reporter: asyncio.Task[None] | None = None
    health = HealthServer(runtime, endpoints)  # /metrics, /healthz, /readyz (servicekit.health)
    metrics.label_every_series(settings)  # a per-cluster service's series carry its cluster
    try:
        await build(settings, runtime)
        runtime.metrics_url = await health.start()
        await runtime.start()
        log.info("service_started", instance=runtime.instance, metrics=runtime.metrics_url + "/metrics")
        if path := os.environ.get(liveness.ENV):
            reporter = asyncio.create_task(liveness.run(runtime, Path(path)), name="liveness")
        await stop.wait()
    finally:
        log.info("service_stopping", bus_lost=bool(lost))
        if reporter is not None:
            reporter.cancel()
        await health.stop()
        await runtime.stop()
        await bus.close()
        await store.close()
    if lost:
        sys.exit(liveness.EXIT_BUS_LOST)
