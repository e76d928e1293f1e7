"""Time for services: a clock, periodic rounds, and exact timers — live on asyncio.

A service never reads the wall clock or sleeps itself: it asks its runtime for ``now()``, for a
round every ``period`` (``every``; ``kick`` asks for it soon), and for work at an exact instant
(``at``; the same key replaces the earlier timer). The simulator gives the same calls a virtual
clock and runs them in a fixed order (``simulator.timing``); here they run on the event loop.

Work that fails (the store is down) is logged and tried again: a round at its next period, a
timer after a growing back-off. Timers must check the state they act on when they fire: they are
re-armed from the state after every load, so an extra or stale firing changes nothing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from enum import IntEnum
from typing import Protocol

import structlog

__all__ = ["AsyncioTimers", "Clock", "Rank", "Timers", "WallClock", "Work"]

Work = Callable[[], Awaitable[None]]
_log = structlog.get_logger("timers")
RETRY_DELAYS = (0.5, 1.0, 2.0, 5.0)


class Rank(IntEnum):
    """The order in which rounds due at the same instant run (the simulator runs them in this
    order; live, each runs when due): what nodes and clusters say of themselves first, then
    planning, admission and placement over the fleet, then each cluster's scheduling session —
    the order of one round in scenario-format.md."""

    REPORT = 0
    PLAN = 1
    ADMIT = 2
    SCHEDULE = 3
    HOUSEKEEPING = 9


class Clock(Protocol):
    def now(self) -> float: ...


class WallClock:
    """Seconds since the epoch, as every live service agrees on."""

    def now(self) -> float:
        return time.time()


class Timers(Protocol):
    """Rounds and exact timers. Registrations before ``start`` wait for it."""

    def every(self, period: float, work: Work, name: str, *, rank: int = 0) -> None: ...

    def kick(self, name: str) -> None: ...

    def at(self, when: float, key: str, work: Work) -> None: ...

    def cancel(self, key: str) -> None: ...

    def start(self) -> None: ...

    async def stop(self) -> None: ...


class AsyncioTimers:
    """``Timers`` on the running event loop, against ``clock``."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._rounds: dict[str, tuple[float, Work]] = {}
        self._kicks: dict[str, asyncio.Event] = {}
        self._timers: dict[str, tuple[float, Work]] = {}
        self._handles: dict[str, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._started = False

    def every(self, period: float, work: Work, name: str, *, rank: int = 0) -> None:
        self._rounds[name] = (period, work)
        self._kicks[name] = asyncio.Event()
        if self._started:
            self._spawn(self._round(name), name)

    def kick(self, name: str) -> None:
        event = self._kicks.get(name)
        if event is not None:
            event.set()

    def at(self, when: float, key: str, work: Work) -> None:
        self.cancel(key)
        self._timers[key] = (when, work)
        if self._started:
            self._arm(key)

    def cancel(self, key: str) -> None:
        self._timers.pop(key, None)
        handle = self._handles.pop(key, None)
        if handle is not None:
            handle.cancel()

    def start(self) -> None:
        self._started = True
        for name in self._rounds:
            self._spawn(self._round(name), name)
        for key in list(self._timers):
            self._arm(key)

    async def stop(self) -> None:
        self._started = False
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()
        pending = set(self._tasks)
        while pending:
            # Cancel again until every task has ended: a library call can swallow a cancellation
            # (Python 3.11's wait_for loses it when the awaited result lands at the same moment).
            for task in pending:
                task.cancel()
            _, pending = await asyncio.wait(pending, timeout=0.5)
        self._tasks.clear()

    # -- rounds ---------------------------------------------------------------------------------

    async def _round(self, name: str) -> None:
        period, work = self._rounds[name]
        kicked = self._kicks[name]
        while True:
            try:
                await asyncio.wait_for(kicked.wait(), timeout=period)
            except TimeoutError:
                pass
            kicked.clear()
            try:
                await work()
            except asyncio.CancelledError:
                raise
            except Exception:  # a round must survive one bad run; the next one tries again
                _log.exception("round_failed", round=name)
                await asyncio.sleep(min(period, 1.0))

    # -- exact timers ---------------------------------------------------------------------------

    def _arm(self, key: str, attempt: int = 0) -> None:
        when, _ = self._timers[key]
        delay = max(0.0, when - self.clock.now())
        loop = asyncio.get_running_loop()
        self._handles[key] = loop.call_later(delay, lambda: self._spawn(self._fire(key, when, attempt), key))

    async def _fire(self, key: str, when: float, attempt: int) -> None:
        entry = self._timers.get(key)
        if entry is None or entry[0] != when:
            return  # replaced or cancelled meanwhile
        self._handles.pop(key, None)
        try:
            await entry[1]()
        except asyncio.CancelledError:
            raise
        except Exception:
            _log.warning("timer_failed", timer=key, attempt=attempt, exc_info=True)
            if self._timers.get(key) is entry:
                delay = RETRY_DELAYS[min(attempt, len(RETRY_DELAYS) - 1)]
                self._handles[key] = asyncio.get_running_loop().call_later(
                    delay, lambda: self._spawn(self._fire(key, when, attempt + 1), key)
                )
            return
        if self._timers.get(key) is entry:
            del self._timers[key]

    def _spawn(self, coro: Awaitable[None], name: str) -> None:
        task = asyncio.ensure_future(coro)
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
