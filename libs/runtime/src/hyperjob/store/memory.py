"""``InMemoryStore``: the ``Store`` protocol in process memory, for unit tests and the simulator.

Same results as ``RedisStore`` for the same calls (the contract tests run against both). Each
method runs without awaiting in between, so on one event loop it is as atomic as a Lua script.
Markers never expire. ``fail(op, times)`` injects ``StoreUnavailableError``s to exercise retries;
``wipe()`` loses everything at once, as a flushed or replaced Redis does.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Mapping, Sequence
from typing import TypedDict

from .errors import StoreUnavailableError, VersionConflictError
from .model import (
    DEFAULT_PODS,
    Binding,
    Commit,
    CommitResult,
    Doc,
    NodeUsage,
    Output,
    Write,
    binding_kind,
    entry_of,
    parse_entry,
)

__all__ = ["InMemoryStore"]

_TOLERANCE = 1e-9


class Snapshot(TypedDict):
    """``InMemoryStore.snapshot()``: documents as kind -> name -> (version, data); bound pods per cluster."""

    docs: dict[str, dict[str, tuple[int, bytes]]]
    bindings: dict[str, builtins.list[str]]


class InMemoryStore:
    """Dicts behind the ``Store`` protocol. ``close()`` is a no-op. (Signatures say ``builtins.list``:
    the ``list`` method shadows the built-in in the class's scope.)"""

    def __init__(self) -> None:
        self._faults: dict[str, int] = {}
        self.wipe()

    def wipe(self) -> None:
        self._docs: dict[str, dict[str, Doc]] = {}
        self._markers: dict[tuple[str, str], str] = {}
        self._recorded: dict[str, list[Output]] = {}
        self._outboxes: dict[str, list[str]] = {}
        self._alive: dict[str, int] = {}  # instance -> its commit count (its epoch)
        self._leases: dict[str, tuple[str, float]] = {}  # instance -> (holder, monotonic expiry)
        self._alloc: dict[tuple[str, str], dict[str, float]] = {}
        self._used: dict[tuple[str, str], dict[str, float]] = {}
        self._binds: dict[str, dict[str, Binding]] = {}

    def fail(self, op: str = "*", times: int = 1) -> None:
        """The next ``times`` calls of ``op`` (a method name such as ``"commit"``, or ``"*"`` for
        any) raise ``StoreUnavailableError`` and change nothing."""
        self._faults[op] = self._faults.get(op, 0) + times

    def _fault(self, op: str) -> None:
        for key in (op, "*"):
            if self._faults.get(key, 0) > 0:
                self._faults[key] -= 1
                raise StoreUnavailableError(f"injected fault in {op}")

    async def close(self) -> None:
        return None

    async def clear(self) -> int:
        n = sum(len(d) for d in self._docs.values()) + len(self._markers) + len(self._alloc) + len(self._binds)
        self.wipe()
        return n

    def snapshot(self) -> Snapshot:
        """Every document (kind -> name -> (version, data)) and binding, as plain values: a test
        compares two snapshots to see that something changed nothing."""
        return {
            "docs": {k: {n: (d.version, d.data) for n, d in docs.items()} for k, docs in self._docs.items() if docs},
            "bindings": {c: sorted(b) for c, b in self._binds.items() if b},
        }

    async def ping(self) -> None:
        self._fault("ping")

    # -- documents --------------------------------------------------------------------------

    async def get(self, kind: str, name: str) -> Doc | None:
        self._fault("get")
        return self._docs.get(kind, {}).get(name)

    async def get_many(self, kind: str, names: Sequence[str]) -> dict[str, Doc | None]:
        self._fault("get_many")
        docs = self._docs.get(kind, {})
        return {n: docs.get(n) for n in names}

    async def list(self, kind: str) -> dict[str, Doc]:
        self._fault("list")
        return dict(sorted(self._docs.get(kind, {}).items()))

    async def put_if_version(self, kind: str, name: str, doc: object, expected_version: int | None) -> int:
        return (await self._plain(Write.put(kind, name, doc, expected_version))).versions[0]

    async def delete(self, kind: str, name: str, expected_version: int | None = None) -> None:
        await self._plain(Write.delete(kind, name, expected_version))

    async def _plain(self, write: Write) -> CommitResult:
        result = await self.commit(Commit(writes=[write]))
        if result.refusal == "conflict":
            raise VersionConflictError(result.kind, result.name, result.expected, result.actual)
        return result

    # -- the commit ---------------------------------------------------------------------------

    async def commit(self, commit: Commit) -> CommitResult:
        self._fault("commit")
        refusal = self._check(commit)
        if refusal is not None:
            return refusal
        for unbind in commit.unbinds:
            self._release(unbind.cluster, unbind.pod)
        for bind in commit.binds:
            self._bind(bind)
        versions = [self._write(w) for w in commit.writes]
        if commit.outbox_key:
            self._recorded[commit.outbox_key] = list(commit.outputs)
            if commit.outbox:
                self._outboxes.setdefault(commit.outbox, []).append(commit.outbox_key)
        for event_id in commit.event_ids:
            self._markers[(commit.consumer, event_id)] = commit.outbox_key
        if commit.outbox and commit.published:
            done = set(commit.published)
            self._outboxes[commit.outbox] = [k for k in self._outboxes.get(commit.outbox, []) if k not in done]
            for key in done:  # published: a redelivery long after must not send them again
                self._recorded.pop(key, None)
        epoch = 0
        if commit.sentinel:
            epoch = self._alive[commit.sentinel] = self._alive[commit.sentinel] + 1
        return CommitResult(versions=versions, epoch=epoch)

    def _check(self, commit: Commit) -> CommitResult | None:
        if commit.sentinel and commit.sentinel not in self._alive:
            return CommitResult(refusal="wiped")
        for event_id in commit.event_ids:
            if (commit.consumer, event_id) in self._markers:
                return CommitResult(refusal="duplicate", event_id=event_id)
        if commit.sentinel and commit.epoch >= 0 and self._alive[commit.sentinel] != commit.epoch:
            return CommitResult(refusal="stale", epoch=self._alive[commit.sentinel])
        for w in commit.writes:
            current = self._docs.get(w.kind, {}).get(w.name)
            actual = current.version if current is not None else 0
            if w.expected_version is not None and actual != w.expected_version:
                return CommitResult(
                    refusal="conflict", kind=w.kind, name=w.name, expected=w.expected_version, actual=actual
                )
        return self._check_binds(commit)

    def _check_binds(self, commit: Commit) -> CommitResult | None:
        released = {(u.cluster, u.pod) for u in commit.unbinds if u.pod in self._binds.get(u.cluster, {})}
        delta: dict[tuple[str, str], dict[str, float]] = {}
        for cluster, pod in released:
            old = self._binds[cluster][pod]
            slot = delta.setdefault((cluster, old.node), {})
            for r, a in old.request.items():
                slot[r] = slot.get(r, 0.0) - a
        touched = []
        for b in commit.binds:
            prior = self._binds.get(b.cluster, {}).get(b.pod)
            if prior is not None and (b.cluster, b.pod) not in released:
                if prior.node != b.node:
                    return CommitResult(refusal="bound-elsewhere", pod=b.pod, node=prior.node)
                continue
            if (b.cluster, b.node) not in self._alloc:
                return CommitResult(refusal="unknown-node", node=b.node)
            slot = delta.setdefault((b.cluster, b.node), {})
            for r, a in b.request.items():
                slot[r] = slot.get(r, 0.0) + a
            touched.append((b.cluster, b.node))
        for key in dict.fromkeys(touched):
            alloc, used = self._alloc[key], self._used.get(key, {})
            short = {
                r: used.get(r, 0.0) + a - alloc[r]
                for r, a in delta[key].items()
                if a > 0 and r in alloc and used.get(r, 0.0) + a > alloc[r] + _TOLERANCE * max(1.0, abs(alloc[r]))
            }
            if short:
                return CommitResult(refusal="no-room", node=key[1], missing=short)
        return None

    def _release(self, cluster: str, pod: str) -> None:
        old = self._binds.get(cluster, {}).pop(pod, None)
        if old is not None:
            used = self._used.setdefault((cluster, old.node), {})
            for r, a in old.request.items():
                used[r] = used.get(r, 0.0) - a

    def _bind(self, bind: Binding) -> None:
        bound = self._binds.setdefault(bind.cluster, {})
        if bind.pod in bound:
            return
        bound[bind.pod] = bind
        used = self._used.setdefault((bind.cluster, bind.node), {})
        for r, a in bind.request.items():
            used[r] = used.get(r, 0.0) + a

    def _write(self, w: Write) -> int:
        docs = self._docs.setdefault(w.kind, {})
        if w.data is None:
            docs.pop(w.name, None)
            return 0
        current = docs.get(w.name)
        version = (current.version if current is not None else 0) + 1
        docs[w.name] = Doc(kind=w.kind, name=w.name, version=version, data=w.data)
        return version

    async def seen(
        self, consumer: str, event_ids: Sequence[str], instance: str = ""
    ) -> dict[str, builtins.list[Output]]:
        # ``instance`` names the Redis key's hash tag; one process's memory has no slots
        self._fault("seen")
        return {
            e: list(self._recorded.get(self._markers[(consumer, e)], []))
            for e in event_ids
            if (consumer, e) in self._markers
        }

    async def outbox(self, instance: str) -> builtins.list[tuple[str, builtins.list[Output]]]:
        self._fault("outbox")
        keys = list(dict.fromkeys(self._outboxes.get(instance, [])))
        return [(k, list(self._recorded[k])) for k in keys if k in self._recorded]

    # -- sentinels and restore ------------------------------------------------------------------

    async def alive(self, instance: str) -> bool:
        self._fault("alive")
        return instance in self._alive

    async def epoch(self, instance: str) -> int:
        self._fault("epoch")
        return self._alive.get(instance, 0)

    async def mark_alive(self, instance: str) -> None:
        self._fault("mark_alive")
        self._alive.setdefault(instance, 1)

    async def take_lease(self, instance: str, holder: str, ttl: float) -> bool:
        self._fault("take_lease")
        now = time.monotonic()
        current = self._leases.get(instance)
        if current is not None and current[0] != holder and current[1] > now:
            return False
        self._leases[instance] = (holder, now + ttl)
        return True

    async def release_lease(self, instance: str, holder: str) -> None:
        self._fault("release_lease")
        if self._leases.get(instance, ("", 0.0))[0] == holder:
            del self._leases[instance]

    async def forget(self, instance: str, kinds: Sequence[str], binding_clusters: Sequence[str] = ()) -> None:
        self._fault("forget")
        for kind in kinds:
            self._docs.pop(kind, None)
        for cluster in binding_clusters:
            self._binds.pop(cluster, None)
            for key in [k for k in self._used if k[0] == cluster]:
                del self._used[key]
        self._alive.pop(instance, None)

    async def restore(self, docs: Sequence[Doc]) -> None:
        self._fault("restore")
        for doc in docs:
            if doc.kind.startswith("binding@"):
                cluster = doc.kind.split("@", 1)[1]
                self._bind(parse_entry(cluster, doc.name, doc.data.decode()))
            else:
                self._docs.setdefault(doc.kind, {})[doc.name] = doc

    # -- node resource accounting -----------------------------------------------------------

    async def set_node_allocatable(self, cluster: str, node: str, allocatable: Mapping[str, float]) -> None:
        self._fault("set_node_allocatable")
        values = {r: float(a) for r, a in allocatable.items()}
        values.setdefault("pods", DEFAULT_PODS)
        self._alloc[(cluster, node)] = values

    async def set_nodes_allocatable(self, cluster: str, nodes: Mapping[str, Mapping[str, float]]) -> None:
        for node, allocatable in nodes.items():
            await self.set_node_allocatable(cluster, node, allocatable)

    async def remove_node(self, cluster: str, node: str) -> None:
        self._alloc.pop((cluster, node), None)

    async def nodes(self, cluster: str) -> dict[str, NodeUsage]:
        self._fault("nodes")
        names = sorted(n for (c, n) in self._alloc if c == cluster)
        return {
            n: NodeUsage(allocatable=dict(self._alloc[(cluster, n)]), used=dict(self._used.get((cluster, n), {})))
            for n in names
        }

    async def allocations(self, cluster: str) -> dict[str, Binding]:
        self._fault("allocations")
        return dict(sorted(self._binds.get(cluster, {}).items()))

    async def binding_docs(self, cluster: str) -> builtins.list[Doc]:
        return [
            Doc(kind=binding_kind(cluster), name=p, version=1, data=entry_of(b).encode())
            for p, b in sorted(self._binds.get(cluster, {}).items())
        ]
