"""Priority queues ordered by session comparators (Volcano's util.PriorityQueue)."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class _Item(Generic[T]):
    __slots__ = ("value", "less")

    def __init__(self, value: T, less: Callable[[T, T], bool]) -> None:
        self.value = value
        self.less = less

    def __lt__(self, other: _Item[T]) -> bool:
        return self.less(self.value, other.value)


class PriorityQueue(Generic[T]):
    """A heap whose order is a session comparator (``less(a, b)``: a goes first).

    With ``key`` (a sort key that orders exactly as ``less`` does, taken when an item is
    pushed), comparisons run on tuples in C instead of through the plugin chain.
    """

    def __init__(
        self, less: Callable[[T, T], bool], items: list[T] | None = None, key: Callable[[T], Any] | None = None
    ) -> None:
        self.less = less
        self.key = key
        self._seq = 0
        self._heap: list[Any] = []  # _Item(value) without a key, (key, seq, value) with one
        for v in items or []:
            self._heap.append(self._entry(v))
        heapq.heapify(self._heap)

    def _entry(self, value: T) -> Any:
        if self.key is None:
            return _Item(value, self.less)
        self._seq += 1
        return (self.key(value), self._seq, value)

    def push(self, value: T) -> None:
        heapq.heappush(self._heap, self._entry(value))

    def pop(self) -> T:
        entry = heapq.heappop(self._heap)
        value: T = entry.value if self.key is None else entry[2]
        return value

    def __len__(self) -> int:
        return len(self._heap)

    def empty(self) -> bool:
        return not self._heap
