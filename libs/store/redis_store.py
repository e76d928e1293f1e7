"""``RedisStore``: versioned JSON documents, the handler's atomic ``apply``, and node accounting.

Key layout under ``prefix`` (``P``)::

    P:d:<kind>                   hash  name -> JSON document
    P:v:<kind>                   hash  name -> version (int)
    P:processed:<consumer>:<id>  str   msgpack of the outputs recorded by apply (TTL marker_ttl)
    P:node:<cluster>:<node>:alloc  hash resource -> allocatable amount
    P:node:<cluster>:<node>:used   hash resource -> amount bound pods use
    P:nodes:<cluster>            set   node names with allocatable registered
    P:bind:<cluster>             hash  pod -> "node\\nres=amount\\n..." (the binding and its request)

Every read of several keys is one round trip (a MULTI pipeline); every check-then-write is one
Lua script. redis-py's exceptions are translated here, once, into ``StoreError``s.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import msgspec
import redis.asyncio as aioredis
import redis.exceptions

from .errors import StoreError, StoreUnavailableError, UnknownNodeError, VersionConflictError
from .lua import APPLY, BIND_GANG, RELEASE
from .model import (DEFAULT_PODS, ApplyItem, ApplyResult, Binding, BindResult, Conflict, Doc, NodeUsage, Output,
                    Write, check_gang, encode_doc, fmt_amount)

__all__ = ["MARKER_TTL", "RedisStore", "as_output", "decode_outputs", "encode_outputs"]

MARKER_TTL = 7 * 24 * 3600
_OUTPUTS = msgspec.msgpack.Decoder(list[Output | bytes])
_ENC = msgspec.msgpack.Encoder()


def as_output(item: Any) -> Output | bytes:
    """``Output`` or bytes as they are; ``(subject, msg_id, payload)`` tuples become ``Output``."""
    if isinstance(item, Output | bytes):
        return item
    if isinstance(item, tuple):
        subject, msg_id, payload = item
        return Output(subject=subject, msg_id=msg_id, payload=encode_doc(payload))
    return Output(subject=item.subject, msg_id=item.msg_id, payload=encode_doc(item.payload),
                  headers=getattr(item, "headers", None))


def encode_outputs(outputs: Iterable[Any]) -> tuple[list[Output | bytes], bytes]:
    items = [as_output(o) for o in outputs]
    return items, _ENC.encode(items)


def decode_outputs(blob: bytes) -> list[Output | bytes]:
    return _OUTPUTS.decode(blob)


@contextlib.contextmanager
def _translate() -> Iterator[None]:
    try:
        yield
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
        raise StoreUnavailableError(str(exc) or type(exc).__name__) from exc
    except redis.exceptions.RedisError as exc:
        raise StoreError(str(exc) or type(exc).__name__) from exc


def _entry(binding: Binding) -> str:
    return "\n".join([binding.node, *(f"{r}={fmt_amount(a)}" for r, a in sorted(binding.request.items()))])


def _floats(raw: Mapping[bytes, bytes]) -> dict[str, float]:
    return {k.decode(): float(v) for k, v in raw.items()}


class RedisStore:
    """The Redis adapter (``redis.asyncio`` + hiredis). Cheap to build; connects lazily; ``close()``
    at exit. Everything lives under ``prefix``, so tests and deployments can share a server."""

    def __init__(self, url: str, prefix: str = "hj", *, marker_ttl: int = MARKER_TTL) -> None:
        self._r = aioredis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=30,
                                          health_check_interval=30)
        self._p = prefix
        self._ttl = marker_ttl
        self._apply = self._r.register_script(APPLY)
        self._bind = self._r.register_script(BIND_GANG)
        self._release = self._r.register_script(RELEASE)

    @classmethod
    async def connect(cls, url: str, prefix: str = "hj", **kw: Any) -> RedisStore:
        """Build and ping; raises ``StoreUnavailableError`` when Redis does not answer."""
        store = cls(url, prefix, **kw)
        await store.ping()
        return store

    async def ping(self) -> None:
        with _translate():
            await self._r.ping()

    async def close(self) -> None:
        await self._r.aclose()

    async def clear(self) -> int:
        """Delete every key under the prefix (documents, markers, node accounting); returns how
        many. For rebuilding state by replaying the log (with ``bus.reset_consumer``) and tests."""
        with _translate():
            keys = [k async for k in self._r.scan_iter(match=f"{self._p}:*", count=1000)]
            for i in range(0, len(keys), 1000):
                await self._r.delete(*keys[i:i + 1000])
        return len(keys)

    # -- keys -------------------------------------------------------------------------------

    def _dkey(self, kind: str) -> str:
        return f"{self._p}:d:{kind}"

    def _vkey(self, kind: str) -> str:
        return f"{self._p}:v:{kind}"

    def _node_keys(self, cluster: str, node: str) -> tuple[str, str]:
        base = f"{self._p}:node:{cluster}:{node}"
        return f"{base}:alloc", f"{base}:used"

    def _bind_key(self, cluster: str) -> str:
        return f"{self._p}:bind:{cluster}"

    # -- documents --------------------------------------------------------------------------

    async def get(self, kind: str, name: str) -> Doc | None:
        """The document ``kind/name`` or ``None``."""
        return (await self.get_many(kind, [name]))[name]

    async def get_many(self, kind: str, names: Sequence[str]) -> dict[str, Doc | None]:
        """Several documents of one kind in one round trip (consistent snapshot)."""
        if not names:
            return {}
        with _translate():
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.hmget(self._dkey(kind), list(names))
                pipe.hmget(self._vkey(kind), list(names))
                datas, versions = await pipe.execute()
        return {n: (Doc(kind=kind, name=n, version=int(v), data=d) if d is not None and v is not None else None)
                for n, d, v in zip(names, datas, versions, strict=True)}

    async def put_if_version(self, kind: str, name: str, doc: Any, expected_version: int | None) -> int:
        """Write ``doc`` if the stored version is ``expected_version`` (0 = absent, None = any);
        returns the new version. Raises ``VersionConflictError``."""
        result = await self._run_apply(None, [Write.put(kind, name, doc, expected_version)], [])
        return result.versions[0]

    async def delete(self, kind: str, name: str, expected_version: int | None = None) -> None:
        """Delete ``kind/name`` (absent is fine unless a version is expected). Raises
        ``VersionConflictError``."""
        await self._run_apply(None, [Write.delete(kind, name, expected_version)], [])

    async def apply(self, consumer: str, event_id: str, writes: Sequence[Write],
                    outputs: Iterable[Any] = ()) -> ApplyResult:
        """The handler primitive, one Lua script: if ``processed:<consumer>:<event_id>`` exists,
        write nothing and return ``duplicate`` with the outputs recorded then; else check every
        write's expected version (any mismatch: write nothing, return ``conflict``); else write
        the documents and set the marker (TTL ``marker_ttl``) holding ``outputs``. The caller
        publishes ``result.outputs`` (same ``msg_id``s on a duplicate) and then acks."""
        return await self._run_apply((consumer, event_id), writes, outputs, raise_conflict=False)

    async def apply_many(self, consumer: str, items: Sequence[ApplyItem]) -> list[ApplyResult]:
        """``apply`` for many events in ONE round trip (a pipeline of scripts): each item is atomic
        on its own and gets its own result, exactly as if applied one after the other in order.
        For batch handlers (``bus.consume_batch``)."""
        if not items:
            return []
        calls = [self._apply_call((consumer, it.event_id), it.writes, it.outputs) for it in items]
        with _translate():
            async with self._r.pipeline(transaction=False) as pipe:
                for _, keys, args in calls:
                    await self._apply(keys=keys, args=args, client=pipe)
                replies = await pipe.execute()
        return [self._apply_result(reply, it.writes, outs, raise_conflict=False)
                for reply, it, (outs, _, _) in zip(replies, items, calls, strict=True)]

    def _apply_call(self, marker: tuple[str, str] | None, writes: Sequence[Write], outputs: Iterable[Any]
                    ) -> tuple[list[Output | bytes], list[str], list[Any]]:
        items, blob = encode_outputs(outputs)
        marker_key = f"{self._p}:processed:{marker[0]}:{marker[1]}" if marker else f"{self._p}:processed:-"
        keys: list[str] = [marker_key]
        args: list[Any] = [self._ttl if marker else 0, blob]
        for w in writes:
            keys += [self._dkey(w.kind), self._vkey(w.kind)]
            args += [w.name, "" if w.expected_version is None else w.expected_version,
                     "d" if w.data is None else "p", w.data or b""]
        return items, keys, args

    async def _run_apply(self, marker: tuple[str, str] | None, writes: Sequence[Write], outputs: Iterable[Any],
                         *, raise_conflict: bool = True) -> ApplyResult:
        items, keys, args = self._apply_call(marker, writes, outputs)
        with _translate():
            reply = await self._apply(keys=keys, args=args)
        return self._apply_result(reply, writes, items, raise_conflict=raise_conflict)

    @staticmethod
    def _apply_result(reply: Any, writes: Sequence[Write], items: list[Output | bytes], *,
                      raise_conflict: bool) -> ApplyResult:
        code = int(reply[0])
        if code == 1:
            return ApplyResult(duplicate=True, outputs=decode_outputs(reply[1]))
        if code == 2:
            w = writes[int(reply[1]) - 1]
            conflict = Conflict(kind=w.kind, name=w.name, expected=w.expected_version or 0, actual=int(reply[2]))
            if raise_conflict:
                raise VersionConflictError(conflict.kind, conflict.name, conflict.expected, conflict.actual)
            return ApplyResult(conflict=conflict)
        return ApplyResult(outputs=items, versions=[int(v) for v in reply[1:]])

    # -- node resource accounting -----------------------------------------------------------

    async def set_node_allocatable(self, cluster: str, node: str, allocatable: Mapping[str, float]) -> None:
        """Register or update a node's allocatable (``pods`` defaults to 110). Bindings already on
        the node stay; if the node shrank below its usage, later binds simply fail on it."""
        alloc_key, _ = self._node_keys(cluster, node)
        values = {r: fmt_amount(a) for r, a in allocatable.items()}
        values.setdefault("pods", fmt_amount(DEFAULT_PODS))
        with _translate():
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.delete(alloc_key)
                pipe.hset(alloc_key, mapping=values)
                pipe.sadd(f"{self._p}:nodes:{cluster}", node)
                await pipe.execute()

    async def remove_node(self, cluster: str, node: str) -> None:
        """Forget a node's allocatable; binds to it fail from now on (its bindings stay until released)."""
        alloc_key, _ = self._node_keys(cluster, node)
        with _translate():
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.delete(alloc_key)
                pipe.srem(f"{self._p}:nodes:{cluster}", node)
                await pipe.execute()

    async def bind_gang(self, cluster: str, bindings: Sequence[Binding | tuple[str, str, Mapping[str, float]]]
                        ) -> BindResult:
        """Bind every pod of a gang or none, in one Lua compare-and-set over every node it touches:
        for each node, used + the gang's requests must fit in allocatable for every requested
        resource. Never oversubscribes, whatever runs concurrently. A pod already bound to the
        same node is a no-op (a retried bind succeeds); bound to another node fails the gang."""
        gang = [b if isinstance(b, Binding) else Binding(b[0], b[1], dict(b[2])) for b in bindings]
        check_gang(gang)
        if not gang:
            return BindResult(ok=True)
        nodes = list(dict.fromkeys(b.node for b in gang))
        index = {n: i + 1 for i, n in enumerate(nodes)}
        keys = [self._bind_key(cluster)]
        for n in nodes:
            keys += list(self._node_keys(cluster, n))
        args: list[Any] = [len(nodes), *nodes]
        for b in gang:
            args += [b.pod, index[b.node], _entry(b), len(b.request)]
            for r, a in sorted(b.request.items()):
                args += [r, fmt_amount(a)]
        with _translate():
            reply = await self._bind(keys=keys, args=args)
        code = int(reply[0])
        if code == 0:
            return BindResult(ok=True)
        if code == 2:
            return BindResult(ok=False, failed_pod=reply[1].decode(), bound_node=reply[2].decode())
        rest = reply[2:]
        missing = {rest[i].decode(): float(rest[i + 1]) for i in range(0, len(rest), 2)}
        return BindResult(ok=False, failed_node=reply[1].decode(), missing=missing)

    async def release(self, cluster: str, pod: str) -> bool:
        """Return a pod's request to its node. Idempotent: ``False`` if it was not bound."""
        return await self.release_many(cluster, [pod]) == 1

    async def release_many(self, cluster: str, pods: Sequence[str]) -> int:
        """Release several pods in two round trips; returns how many were bound and are now released."""
        if not pods:
            return 0
        with _translate():
            entries = await self._r.hmget(self._bind_key(cluster), list(pods))
            keys, args = [self._bind_key(cluster)], []
            for pod, entry in zip(pods, entries, strict=True):
                if entry is None:
                    continue
                node = entry.split(b"\n", 1)[0].decode()
                keys.append(self._node_keys(cluster, node)[1])
                args += [pod, entry]
            if not args:
                return 0
            return int(await self._release(keys=keys, args=args))

    async def node_usage(self, cluster: str, node: str) -> NodeUsage:
        """Allocatable and used of one node; raises ``UnknownNodeError``."""
        usage = (await self._usages(cluster, [node]))[node]
        if usage is None:
            raise UnknownNodeError(cluster, node)
        return usage

    async def nodes(self, cluster: str) -> dict[str, NodeUsage]:
        """Every registered node of ``cluster`` with its usage, sorted by name (two round trips)."""
        with _translate():
            names = sorted(m.decode() for m in await self._r.smembers(f"{self._p}:nodes:{cluster}"))
        usages = await self._usages(cluster, names)
        return {n: u for n, u in usages.items() if u is not None}

    async def _usages(self, cluster: str, names: Sequence[str]) -> dict[str, NodeUsage | None]:
        if not names:
            return {}
        with _translate():
            async with self._r.pipeline(transaction=True) as pipe:
                for n in names:
                    alloc_key, used_key = self._node_keys(cluster, n)
                    pipe.hgetall(alloc_key)
                    pipe.hgetall(used_key)
                raw = await pipe.execute()
        return {n: (NodeUsage(allocatable=_floats(raw[2 * i]), used=_floats(raw[2 * i + 1])) if raw[2 * i] else None)
                for i, n in enumerate(names)}

    async def allocations(self, cluster: str) -> dict[str, Binding]:
        """Every bound pod of ``cluster`` with its node and request."""
        with _translate():
            raw = await self._r.hgetall(self._bind_key(cluster))
        return {pod.decode(): _parse_entry(pod.decode(), entry.decode()) for pod, entry in sorted(raw.items())}

    # ``list`` comes last so that the builtin ``list`` in the annotations above is not this method.
    async def list(self, kind: str) -> dict[str, Doc]:
        """Every document of ``kind`` by name (one round trip; sorted by name)."""
        with _translate():
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.hgetall(self._dkey(kind))
                pipe.hgetall(self._vkey(kind))
                datas, versions = await pipe.execute()
        out: dict[str, Doc] = {}
        for raw_name in sorted(datas):
            name = raw_name.decode()
            out[name] = Doc(kind=kind, name=name, version=int(versions.get(raw_name, 0)), data=datas[raw_name])
        return out


def _parse_entry(pod: str, entry: str) -> Binding:
    node, *lines = entry.split("\n")
    request = {}
    for line in lines:
        res, _, amount = line.rpartition("=")
        request[res] = float(amount)
    return Binding(pod, node, request)
