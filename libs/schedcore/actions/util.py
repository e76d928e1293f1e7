"""Priority queues ordered by session comparators (Volcano's util.PriorityQueue)."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class _Item(Generic[T]):
    __slots__ = ("value", "less")

    def __init__(self, value: T, less: Callable[[T, T], bool]) -> None:
        self.value = value
        self.less = less

    def __lt__(self, other: _Item[T]) -> bool:
        return self.less(self.value, other.value)


class PriorityQueue(Generic[T]):
    """A heap whose order is a session comparator (``less(a, b)``: a goes first)."""

    def __init__(self, less: Callable[[T, T], bool], items: list[T] | None = None) -> None:
        self.less = less
        self._heap = [_Item(v, less) for v in (items or [])]
        heapq.heapify(self._heap)

    def push(self, value: T) -> None:
        heapq.heappush(self._heap, _Item(value, self.less))

    def pop(self) -> T:
        return heapq.heappop(self._heap).value

    def __len__(self) -> int:
        return len(self._heap)

    def empty(self) -> bool:
        return not self._heap
