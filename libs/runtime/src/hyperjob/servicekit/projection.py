"""A service's own state in memory: typed tables that record what a commit must write.

A ``Table`` is one document kind (``job@cluster-a`` → ``JobRecord``): reads come from memory, and
``put``/``delete`` change memory at once and queue the ``Write`` (with the version the value was
read at, so a stale replica's commit is refused). The runtime takes the queued writes after each
handler and commits them with the handler's outputs; when a commit fails, it reloads every table
from the store (``Projection.load``), so memory never drifts from what was committed for longer
than one batch.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Any, Generic, TypeVar

import msgspec

from hyperjob.store import Store, Write

from .invariants import present

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)

__all__ = ["Index", "Projection", "Table"]


class Index(Generic[T, K]):
    """The names of a table's rows grouped by ``key(row)``, kept up to date as rows change (a
    lookup by owner, say, without scanning every row). A row may stand under several keys
    (``Table.index_many``: a HyperJob under each of its children's names)."""

    def __init__(self, keys: Callable[[T], Iterable[K]]) -> None:
        self.keys = keys
        self._groups: dict[K, set[str]] = {}

    def names(self, key: K) -> list[str]:
        """The names of the rows whose key is ``key``, sorted."""
        return sorted(self._groups.get(key, ()))

    def _add(self, name: str, row: T) -> None:
        for key in self.keys(row):
            self._groups.setdefault(key, set()).add(name)

    def _remove(self, name: str, row: T) -> None:
        for key in self.keys(row):
            group = self._groups.get(key)
            if group is not None:
                group.discard(name)
                if not group:
                    del self._groups[key]

    def _rebuild(self, rows: dict[str, T]) -> None:
        self._groups = {}
        for name, row in rows.items():
            self._add(name, row)


class Table(Generic[T]):
    """Documents of one ``kind`` decoded as ``type_``, keyed by name, with their versions."""

    def __init__(self, projection: Projection, kind: str, type_: type[T]) -> None:
        self.kind = kind
        self.type = type_
        self._projection = projection
        self._decoder: msgspec.json.Decoder[T] = msgspec.json.Decoder(type_)
        self.rows: dict[str, T] = {}
        self.versions: dict[str, int] = {}
        self._order: list[str] | None = []  # the names sorted (None: to sort again)
        self._indexes: list[Index[T, Any]] = []  # each its own key type: ``Any`` for the list

    def index(self, key: Callable[[T], K]) -> Index[T, K]:
        """A lookup of row names by ``key(row)``, maintained with every change."""
        return self.index_many(lambda row: (key(row),))

    def index_many(self, keys: Callable[[T], Iterable[K]]) -> Index[T, K]:
        """A lookup of row names by each of ``keys(row)``, maintained with every change."""
        index: Index[T, K] = Index(keys)
        index._rebuild(self.rows)
        self._indexes.append(index)
        return index

    def __contains__(self, name: object) -> bool:
        return name in self.rows

    def __len__(self) -> int:
        return len(self.rows)

    def __iter__(self) -> Iterator[str]:
        return iter(self.rows)

    def get(self, name: str) -> T | None:
        return self.rows.get(name)

    def require(self, name: str) -> T:
        """The row ``name``, which the caller's own state guarantees exists (``InvariantError`` if not)."""
        return present(self.rows.get(name), f"{self.kind} {name!r}")

    def items(self) -> list[tuple[str, T]]:
        """Every row, sorted by name (decisions never depend on insertion or hash order)."""
        if self._order is None:
            self._order = sorted(self.rows)
        rows = self.rows
        return [(name, rows[name]) for name in self._order]

    def values(self) -> list[T]:
        return [v for _, v in self.items()]

    def put(self, name: str, value: T) -> None:
        """Change the row now; the commit writes it only if nobody else changed it meanwhile."""
        expected = self.versions.get(name, 0)
        old = self.rows.get(name)
        if old is None:
            self._order = None
        for index in self._indexes:
            if old is not None:
                index._remove(name, old)
            index._add(name, value)
        self.rows[name] = value
        self.versions[name] = expected + 1
        self._projection.queue(Write.put(self.kind, name, value, expected))

    def delete(self, name: str) -> None:
        if name not in self.rows:
            return
        expected = self.versions.pop(name, 0)
        for index in self._indexes:
            index._remove(name, self.rows[name])
        del self.rows[name]
        self._order = None
        self._projection.queue(Write.delete(self.kind, name, expected))

    async def load(self, store: Store) -> None:
        docs = await store.list(self.kind)
        self.rows = {name: self._decoder.decode(doc.data) for name, doc in docs.items()}
        self.versions = {name: doc.version for name, doc in docs.items()}
        self._order = None
        for index in self._indexes:
            index._rebuild(self.rows)


class Projection:
    """Every table of one service instance, and the writes queued since the last ``take``."""

    def __init__(self) -> None:
        self.tables: dict[str, Table[Any]] = {}  # each its own row type: ``Any`` for the mapping
        self._queued: list[Write] = []

    def table(self, kind: str, type_: type[T]) -> Table[T]:
        if kind in self.tables:
            raise ValueError(f"table {kind!r} declared twice")
        table: Table[T] = Table(self, kind, type_)
        self.tables[kind] = table
        return table

    def queue(self, write: Write) -> None:
        self._queued.append(write)

    @property
    def pending(self) -> bool:
        """Writes are queued for the next commit."""
        return bool(self._queued)

    def take(self) -> list[Write]:
        """The queued writes, coalesced: the last value of each document, checked against the
        version it had before the first change (what the store holds)."""
        queued, self._queued = self._queued, []
        first: dict[tuple[str, str], Write] = {}
        last: dict[tuple[str, str], Write] = {}
        for w in queued:
            key = (w.kind, w.name)
            first.setdefault(key, w)
            last[key] = w
        return [msgspec.structs.replace(last[key], expected_version=first[key].expected_version) for key in first]

    def confirm(self, writes: list[Write], versions: list[int]) -> None:
        """Record the versions the store gave the committed writes."""
        for write, version in zip(writes, versions, strict=True):
            table = self.tables.get(write.kind)
            if table is not None and write.data is not None and write.name in table.rows:
                table.versions[write.name] = version

    def discard(self) -> None:
        self._queued = []

    async def load(self, store: Store) -> None:
        self._queued = []
        for table in self.tables.values():
            await table.load(store)
