"""The virtual clock's agenda: what happens next, in a deterministic order.

Entries are ordered by (time, rank, sequence): scenario events come before the driver's own
entries at the same instant (rank 0 < 1), scenario events keep file order, and everything else
keeps the order in which it was scheduled. Cancelled entries stay in the heap and are skipped, so
cancelling is O(1) and never reorders anything.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable
from typing import Any

SCENARIO = 0
INTERNAL = 1


class Agenda:
    """A min-heap of timed entries with keyed cancellation."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, int, Hashable | None, Any]] = []
        self._seq = 0
        self._live: dict[Hashable, int] = {}

    def push(self, at: float, item: Any, *, key: Hashable | None = None, rank: int = INTERNAL) -> None:
        """Schedule ``item`` at ``at``; a new entry with the same ``key`` replaces the old one."""
        self._seq += 1
        if key is not None:
            self._live[key] = self._seq
        heapq.heappush(self._heap, (at, rank, self._seq, key, item))

    def cancel(self, key: Hashable) -> None:
        self._live.pop(key, None)

    def next_time(self) -> float | None:
        self._drop_cancelled()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: float) -> list[Any]:
        """Every live entry due at or before ``now``, in order."""
        due: list[Any] = []
        while True:
            self._drop_cancelled()
            if not self._heap or self._heap[0][0] > now:
                return due
            _, _, seq, key, item = heapq.heappop(self._heap)
            if key is not None:
                del self._live[key]
            due.append(item)

    def pop_one(self, now: float) -> Any | None:
        """The first live entry due at or before ``now``, or None."""
        self._drop_cancelled()
        if not self._heap or self._heap[0][0] > now:
            return None
        _, _, _, key, item = heapq.heappop(self._heap)
        if key is not None:
            del self._live[key]
        return item

    def __bool__(self) -> bool:
        self._drop_cancelled()
        return bool(self._heap)

    def _drop_cancelled(self) -> None:
        while self._heap:
            _, _, seq, key, _ = self._heap[0]
            if key is None or self._live.get(key) == seq:
                return
            heapq.heappop(self._heap)
