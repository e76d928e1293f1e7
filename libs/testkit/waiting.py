"""Polling helpers for asynchronous tests (no fixed sleeps)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

__all__ = ["eventually"]


async def eventually(predicate: Callable[[], bool], timeout: float = 10.0, interval: float = 0.01,
                     message: str = "condition") -> None:
    """Wait until ``predicate()`` is true; raise ``AssertionError`` naming ``message`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"{message} not reached within {timeout}s")
        await asyncio.sleep(interval)
