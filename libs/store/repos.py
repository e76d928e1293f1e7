"""``Repository[T]``: a typed view of one document kind (queues, podgroups, jobs, hyperjobs, ...).

Reads decode strictly into ``T``; writes are returned as ``Write`` values so a handler collects
them and commits everything in one ``Store.apply``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Generic, TypeVar

import msgspec

from .model import Write
from .protocol import Store

__all__ = ["Repository", "Versioned"]

T = TypeVar("T")


class Versioned(msgspec.Struct, Generic[T], frozen=True):
    """A decoded document and the version it was read at (pass it back as ``expected_version``)."""

    value: T
    version: int


class Repository(Generic[T]):
    """``Repository(store, "job", JobRecord)``: get/list decode into ``JobRecord``; ``put``/``delete``
    build the ``Write`` for ``apply``; ``save`` writes one document directly with a version check."""

    def __init__(self, store: Store, kind: str, type_: type[T]) -> None:
        self.store = store
        self.kind = kind
        self._decoder: msgspec.json.Decoder[T] = msgspec.json.Decoder(type_)

    async def get(self, name: str) -> Versioned[T] | None:
        doc = await self.store.get(self.kind, name)
        return None if doc is None else Versioned(self._decoder.decode(doc.data), doc.version)

    async def get_many(self, names: Sequence[str]) -> dict[str, Versioned[T] | None]:
        docs = await self.store.get_many(self.kind, names)
        return {n: (None if d is None else Versioned(self._decoder.decode(d.data), d.version)) for n, d in docs.items()}

    def put(self, name: str, value: Any, expected_version: int | None = None) -> Write:
        return Write.put(self.kind, name, value, expected_version)

    def delete(self, name: str, expected_version: int | None = None) -> Write:
        return Write.delete(self.kind, name, expected_version)

    async def save(self, name: str, value: Any, expected_version: int | None) -> int:
        return await self.store.put_if_version(self.kind, name, msgspec.json.encode(value), expected_version)

    async def list(self) -> dict[str, Versioned[T]]:
        docs = await self.store.list(self.kind)
        return {n: Versioned(self._decoder.decode(d.data), d.version) for n, d in docs.items()}
