"""Per-cycle data shared between plugins and actions (kube-scheduler's ``CycleState``).

A ``CycleState`` lives exactly as long as its session. Each piece of data has a typed
``StateKey`` owned by the module that writes it; nobody else writes under that key, and a
reader gets back the type the key names. It replaces attributes smuggled onto the session.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar, cast

T = TypeVar("T")


class StateKey(Generic[T]):
    """A key of the cycle state; equal only to itself. ``name`` is for people reading a dump."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"StateKey({self.name!r})"


class CycleState:
    """What this cycle has computed once and keeps for the rest of it, by ``StateKey``."""

    def __init__(self) -> None:
        self._data: dict[object, object] = {}  # StateKey[T] -> T, for each key's own T

    def get(self, key: StateKey[T], build: Callable[[], T]) -> T:
        """The value under ``key``, built by ``build()`` the first time it is asked for."""
        if key not in self._data:
            self._data[key] = build()
        # The key's owner is its only writer, so the value has the key's type.
        return cast(T, self._data[key])

    def __contains__(self, key: object) -> bool:
        return key in self._data
