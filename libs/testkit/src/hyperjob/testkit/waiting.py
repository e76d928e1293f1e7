"""Polling helpers for asynchronous tests (no fixed sleeps)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["eventually", "until"]

T = TypeVar("T")


async def eventually(
    predicate: Callable[[], bool], timeout: float = 10.0, interval: float = 0.01, message: str = "condition"
) -> None:
    """Wait until ``predicate()`` is true; raise ``AssertionError`` naming ``message`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{message} not reached within {timeout}s")
        await asyncio.sleep(interval)


async def until(
    get: Callable[[], Awaitable[T]],
    ok: Callable[[T], bool],
    timeout: float = 10.0,
    interval: float = 0.02,
    message: str = "condition",
) -> T:
    """Await ``get()`` until ``ok(value)``; return that value, or raise ``AssertionError`` (with the
    last value) after ``timeout``. E.g. ``await until(lambda: bus.lag(d, s), lambda lag: lag.settled)``."""
    deadline = time.monotonic() + timeout
    while True:
        value = await get()
        if ok(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{message} not reached within {timeout}s (last: {value!r})")
        await asyncio.sleep(interval)
