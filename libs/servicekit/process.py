"""A service process: settings → telemetry → connections → handlers → run until SIGTERM/SIGINT."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import msgspec
import structlog

import telemetry
from bus import NatsBus
from events.subjects import STREAMS
from store import RedisStore

from .config import SettingsError, load_settings
from .runtime import Runtime

S = TypeVar("S", bound=msgspec.Struct)


def run_service(name: str, settings_type: type[S], build: Callable[[S, Runtime], Awaitable[None]]) -> None:
    """The whole life of a service process. ``name`` is the deploy name (``global-scheduler``)."""
    prefix = name.upper().replace("-", "_")
    try:
        settings = load_settings(settings_type, prefix)
    except SettingsError as exc:
        print(f"{name}: invalid configuration: {exc}", file=sys.stderr)
        sys.exit(2)
    telemetry.setup(name, getattr(settings, "log_level", "INFO"))
    try:
        import uvloop

        uvloop.install()
    except ImportError:  # uvloop is an optimisation, not a requirement
        pass
    asyncio.run(_serve(name, settings, build))


async def _serve(name: str, settings: Any, build: Callable[[Any, Runtime], Awaitable[None]]) -> None:
    log = structlog.get_logger(name)
    bus = await NatsBus.connect(settings.nats_url, STREAMS, name=name)
    store = await RedisStore.connect(settings.redis_url)
    runtime = Runtime(name, bus, store)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    try:
        await build(settings, runtime)
        log.info("service_started")
        await stop.wait()
    finally:
        log.info("service_stopping")
        await runtime.stop()
        await bus.close()
        await store.close()
