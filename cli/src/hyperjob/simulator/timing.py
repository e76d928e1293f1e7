"""Virtual time for the services: one clock, and the rounds and timers of every instance.

The services ask their runtime for rounds (``every``/``kick``) and exact timers (``at``); here
those land on one ``Agenda`` the engine drives. Rounds run on the schedule grid (multiples of
``schedulePeriod``), at most once per instant, in the order of their rank (the fleet before the
clusters, as scenario-format.md orders a round); a kick asks for the next grid instant at which
the round has not run yet. Timers run at their exact instant, in the order they were set. An
instance that is paused (its cluster is down) keeps its rounds and timers until it resumes; one
that stops (crashed) loses them, and its successor sets its own.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Awaitable, Callable

import msgspec

Work = Callable[[], Awaitable[None]]


class SimClock:
    def __init__(self) -> None:
        self.time = 0.0

    def now(self) -> float:
        return self.time


def grid(t: float, period: float) -> float:
    """The first schedule instant at or after ``t``."""
    return round_time(math.ceil(t / period - 1e-9) * period)


def round_time(t: float) -> float:
    # Keep grid instants exact (0.1 * 3 is not 0.3) so event times print the same on every run.
    return round(t, 9)


class Round(msgspec.Struct, kw_only=True):
    name: str
    instance: str
    period: float
    work: Work
    rank: int
    seq: int
    due: float
    ran_at: float = float("-inf")


class Agenda:
    """Every round and timer of every instance, against one clock."""

    def __init__(self, clock: SimClock, period: float) -> None:
        self.clock = clock
        self.period = period
        self.rounds: dict[str, Round] = {}
        self._timers: list[tuple[float, int, str]] = []
        self._live: dict[str, tuple[float, int, str, Work]] = {}  # key -> (when, seq, instance, work)
        self._seq = 0
        self.paused: set[str] = set()
        self.started: set[str] = set()
        self._stopped: dict[str, Round] = {}  # rounds of stopped instances, by name: a successor keeps their pace
        self._grid_asked: tuple[float, bool] = (math.nan, False)  # (instant, on the grid): see _on_grid

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    # -- what instances ask for ---------------------------------------------------------------

    def every(self, instance: str, name: str, period: float, work: Work, rank: int) -> None:
        r = Round(
            name=name,
            instance=instance,
            period=max(period, self.period),
            work=work,
            rank=rank,
            seq=self._next_seq(),
            due=grid(self.clock.now(), self.period),
        )
        previous = self._stopped.pop(name, None)
        if previous is not None:  # a restarted instance: its round keeps its pace, it does not run twice
            r.due, r.ran_at = previous.due, previous.ran_at
        self.rounds[name] = r

    def kick(self, name: str) -> None:
        r = self.rounds.get(name)
        if r is None:
            return
        now = self.clock.now()
        at = grid(now, self.period)
        if r.ran_at == at:
            at = grid(at + self.period / 2, self.period)
        r.due = min(r.due, at)

    def at(self, instance: str, key: str, when: float, work: Work) -> None:
        seq = self._next_seq()
        self._live[key] = (round_time(when), seq, instance, work)
        heapq.heappush(self._timers, (round_time(when), seq, key))

    def cancel(self, key: str) -> None:
        self._live.pop(key, None)

    def forget(self, instance: str) -> None:
        """A stopped instance's rounds and timers go with it (its successor sets its own)."""
        self._stopped.update((n, r) for n, r in self.rounds.items() if r.instance == instance)
        self.rounds = {n: r for n, r in self.rounds.items() if r.instance != instance}
        self._live = {k: v for k, v in self._live.items() if v[2] != instance}
        self.started.discard(instance)

    def _active(self, instance: str) -> bool:
        return instance in self.started and instance not in self.paused

    # -- what the engine asks ---------------------------------------------------------------

    def due_timer(self, now: float) -> tuple[str, Work] | None:
        """The first live timer due at or before ``now`` of an active instance (taken off)."""
        skipped = []
        found = None
        while self._timers and self._timers[0][0] <= now + 1e-9:
            entry = heapq.heappop(self._timers)
            when, seq, key = entry
            live = self._live.get(key)
            if live is None or live[1] != seq:
                continue  # cancelled or replaced
            if not self._active(live[2]):
                skipped.append(entry)
                continue
            del self._live[key]
            found = (key, live[3])
            break
        for entry in skipped:
            heapq.heappush(self._timers, entry)
        return found

    def due_round(self, now: float) -> Round | None:
        """The round of lowest rank due at ``now`` that has not run at ``now`` (only on the grid)."""
        if not self._on_grid(now):
            return None
        # One pass, no list: the engine asks after every round it runs (tens of times an instant).
        # The first of the lowest (rank, seq), as ``min`` would pick; seq is unique anyway.
        best: Round | None = None
        limit, started, paused = now + 1e-9, self.started, self.paused
        for r in self.rounds.values():
            if r.due <= limit and r.ran_at != now and r.instance in started and r.instance not in paused:
                if best is None or (r.rank, r.seq) < (best.rank, best.seq):
                    best = r
        return best

    def _on_grid(self, now: float) -> bool:
        """Whether ``now`` is a schedule instant (the last answer kept: asked again and again at one instant)."""
        if self._grid_asked[0] != now:
            self._grid_asked = (now, abs(grid(now, self.period) - now) <= 1e-9)
        return self._grid_asked[1]

    def ran(self, r: Round, now: float) -> None:
        r.ran_at = now
        r.due = grid(now + r.period, self.period)

    def next_time(self, after: float) -> float | None:
        """The next instant after ``after`` at which something of an active instance is due
        (timers exactly; rounds on the grid, an overdue one at the next grid instant)."""
        times = [
            when
            for when, seq, key in self._timers
            if (live := self._live.get(key)) is not None and live[1] == seq and self._active(live[2])
        ]
        times += [
            r.due if r.due > after + 1e-9 else grid(after + 1e-6, self.period)
            for r in self.rounds.values()
            if self._active(r.instance)
        ]
        later = [t for t in times if t > after + 1e-9]
        return min(later) if later else None

    def pending_timers(self) -> bool:
        """Any timer still set (of any instance, paused ones included)."""
        return bool(self._live)


class SimTimers:
    """One instance's ``servicekit.Timers``, on the shared agenda."""

    def __init__(self, agenda: Agenda, instance: str) -> None:
        self.agenda = agenda
        self.instance = instance

    def every(self, period: float, work: Work, name: str, *, rank: int = 0) -> None:
        self.agenda.every(self.instance, name, period, work, rank)

    def kick(self, name: str) -> None:
        self.agenda.kick(name)

    def at(self, when: float, key: str, work: Work) -> None:
        self.agenda.at(self.instance, key, when, work)

    def cancel(self, key: str) -> None:
        self.agenda.cancel(key)

    def start(self) -> None:
        self.agenda.started.add(self.instance)

    async def stop(self) -> None:
        self.agenda.forget(self.instance)
