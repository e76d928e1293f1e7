"""``InMemoryStore``: the ``Store`` protocol in process memory, for unit tests and the simulator.

Same results as ``RedisStore`` for the same calls (the contract tests run against both). Each
method runs without awaiting in between, so on one event loop it is as atomic as a Lua script.
Markers never expire. ``fail(op, times)`` injects ``StoreUnavailableError``s to exercise retries.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .errors import StoreUnavailableError, UnknownNodeError, VersionConflictError
from .model import (DEFAULT_PODS, ApplyItem, ApplyResult, Binding, BindResult, Conflict, Doc, NodeUsage, Output, Write,
                    check_gang)
from .redis_store import encode_outputs

__all__ = ["InMemoryStore"]


class InMemoryStore:
    """Dicts behind the ``Store`` protocol. ``close()`` is a no-op."""

    def __init__(self) -> None:
        self._faults: dict[str, int] = {}
        self._docs: dict[tuple[str, str], Doc] = {}
        self._markers: dict[tuple[str, str], list[Output | bytes]] = {}
        self._alloc: dict[tuple[str, str], dict[str, float]] = {}
        self._used: dict[tuple[str, str], dict[str, float]] = {}
        self._binds: dict[str, dict[str, Binding]] = {}

    def fail(self, op: str = "*", times: int = 1) -> None:
        """Fault injection for handler tests: the next ``times`` calls of ``op`` (a method name such
        as ``"apply"``, or ``"*"`` for any) raise ``StoreUnavailableError`` and change nothing."""
        self._faults[op] = self._faults.get(op, 0) + times

    def _fault(self, op: str) -> None:
        for key in (op, "*"):
            if self._faults.get(key, 0) > 0:
                self._faults[key] -= 1
                raise StoreUnavailableError(f"injected fault in {op}")

    async def close(self) -> None:
        return None

    async def clear(self) -> int:
        n = len(self._docs) + len(self._markers) + len(self._alloc) + len(self._binds)
        self.__init__()  # type: ignore[misc]
        return n

    async def ping(self) -> None:
        return None

    async def get(self, kind: str, name: str) -> Doc | None:
        self._fault("get")
        return self._docs.get((kind, name))

    async def get_many(self, kind: str, names: Sequence[str]) -> dict[str, Doc | None]:
        self._fault("get_many")
        return {n: self._docs.get((kind, n)) for n in names}

    async def put_if_version(self, kind: str, name: str, doc: Any, expected_version: int | None) -> int:
        self._fault("put_if_version")
        result = self._apply(None, [Write.put(kind, name, doc, expected_version)], [])
        if result.conflict is not None:
            c = result.conflict
            raise VersionConflictError(c.kind, c.name, c.expected, c.actual)
        return result.versions[0]

    async def delete(self, kind: str, name: str, expected_version: int | None = None) -> None:
        self._fault("delete")
        result = self._apply(None, [Write.delete(kind, name, expected_version)], [])
        if result.conflict is not None:
            c = result.conflict
            raise VersionConflictError(c.kind, c.name, c.expected, c.actual)

    async def apply(self, consumer: str, event_id: str, writes: Sequence[Write],
                    outputs: Iterable[Any] = ()) -> ApplyResult:
        self._fault("apply")
        return self._apply((consumer, event_id), writes, outputs)

    async def apply_many(self, consumer: str, items: Sequence[ApplyItem]) -> list[ApplyResult]:
        self._fault("apply_many")
        return [self._apply((consumer, it.event_id), it.writes, it.outputs) for it in items]

    def _apply(self, marker: tuple[str, str] | None, writes: Sequence[Write], outputs: Iterable[Any]) -> ApplyResult:
        items, _ = encode_outputs(outputs)
        if marker is not None and marker in self._markers:
            return ApplyResult(duplicate=True, outputs=list(self._markers[marker]))
        for w in writes:
            current = self._docs.get((w.kind, w.name))
            actual = current.version if current is not None else 0
            if w.expected_version is not None and actual != w.expected_version:
                return ApplyResult(conflict=Conflict(kind=w.kind, name=w.name, expected=w.expected_version,
                                                     actual=actual))
        versions = []
        for w in writes:
            key = (w.kind, w.name)
            if w.data is None:
                self._docs.pop(key, None)
                versions.append(0)
                continue
            current = self._docs.get(key)
            version = (current.version if current is not None else 0) + 1
            self._docs[key] = Doc(kind=w.kind, name=w.name, version=version, data=w.data)
            versions.append(version)
        if marker is not None:
            self._markers[marker] = items
        return ApplyResult(outputs=items, versions=versions)

    async def set_node_allocatable(self, cluster: str, node: str, allocatable: Mapping[str, float]) -> None:
        self._fault("set_node_allocatable")
        values = {r: float(a) for r, a in allocatable.items()}
        values.setdefault("pods", DEFAULT_PODS)
        self._alloc[(cluster, node)] = values

    async def remove_node(self, cluster: str, node: str) -> None:
        self._alloc.pop((cluster, node), None)

    async def bind_gang(self, cluster: str, bindings: Sequence[Binding | tuple[str, str, Mapping[str, float]]]
                        ) -> BindResult:
        self._fault("bind_gang")
        gang = [b if isinstance(b, Binding) else Binding(b[0], b[1], dict(b[2])) for b in bindings]
        bound = self._binds.setdefault(cluster, {})
        need: dict[str, dict[str, float]] = {}
        plan: list[Binding] = []
        check_gang(gang)
        for b in gang:
            prior = bound.get(b.pod)
            if prior is not None and prior.node != b.node:
                return BindResult(ok=False, failed_pod=b.pod, bound_node=prior.node)
            per_node = need.setdefault(b.node, {})
            if prior is None:
                plan.append(b)
                for r, a in b.request.items():
                    per_node[r] = per_node.get(r, 0.0) + a
        for node, wanted in need.items():
            short = self._shortfall(cluster, node, wanted)
            if short is not None:
                return BindResult(ok=False, failed_node=node, missing=short)
        for b in plan:
            bound[b.pod] = Binding(b.pod, b.node, dict(b.request))
            used = self._used.setdefault((cluster, b.node), {})
            for r, a in b.request.items():
                used[r] = used.get(r, 0.0) + a
        return BindResult(ok=True)

    def _shortfall(self, cluster: str, node: str, wanted: Mapping[str, float]) -> dict[str, float] | None:
        alloc = self._alloc.get((cluster, node))
        if alloc is None:
            return {}
        used = self._used.get((cluster, node), {})
        short = {}
        for r, a in wanted.items():
            cap = alloc.get(r, 0.0)
            if used.get(r, 0.0) + a > cap + 1e-9 * max(1.0, abs(cap)):
                short[r] = used.get(r, 0.0) + a - cap
        return short or None

    async def release(self, cluster: str, pod: str) -> bool:
        return await self.release_many(cluster, [pod]) == 1

    async def release_many(self, cluster: str, pods: Sequence[str]) -> int:
        self._fault("release_many")
        bound = self._binds.get(cluster, {})
        released = 0
        for pod in pods:
            b = bound.pop(pod, None)
            if b is None:
                continue
            used = self._used.setdefault((cluster, b.node), {})
            for r, a in b.request.items():
                used[r] = used.get(r, 0.0) - a
            released += 1
        return released

    async def node_usage(self, cluster: str, node: str) -> NodeUsage:
        self._fault("node_usage")
        alloc = self._alloc.get((cluster, node))
        if alloc is None:
            raise UnknownNodeError(cluster, node)
        return NodeUsage(allocatable=dict(alloc), used=dict(self._used.get((cluster, node), {})))

    async def nodes(self, cluster: str) -> dict[str, NodeUsage]:
        self._fault("nodes")
        names = sorted(n for (c, n) in self._alloc if c == cluster)
        return {n: await self.node_usage(cluster, n) for n in names}

    async def allocations(self, cluster: str) -> dict[str, Binding]:
        self._fault("allocations")
        return {p: copy.copy(b) for p, b in sorted(self._binds.get(cluster, {}).items())}

    async def list(self, kind: str) -> dict[str, Doc]:
        self._fault("list")
        return {name: doc for (k, name), doc in sorted(self._docs.items()) if k == kind}
