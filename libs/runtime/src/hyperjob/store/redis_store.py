"""``RedisStore``: versioned JSON documents, the atomic commit, and node resource accounting
(the key layout is ``keys.KeyLayout``'s).

Every read of several keys is one round trip (a pipeline); every check-then-write is the one
Lua script ``COMMIT``. redis-py's exceptions are translated here, once, into ``StoreError``s.

A primary with replicas under Sentinel: ``redis+sentinel://[user:password@]host:port,host:port/<master>``
(``sentinel_url``) makes the client ask the sentinels for the primary and ask again after a
failover; every commit then also waits (``WAIT``) until ``replicas`` replicas hold it, so an
acknowledged commit survives the primary's loss (one that is not confirmed raises
``StoreUnavailableError``: the caller retries it, and its dedup markers give it one effect).
"""

from __future__ import annotations

import builtins
import contextlib
from collections.abc import Iterator, Mapping, Sequence
from urllib.parse import parse_qs, unquote, urlsplit

import msgspec
import redis.asyncio as aioredis
import redis.exceptions
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import ExponentialBackoff
from redis.typing import EncodableT, FieldT

from .errors import StoreError, StoreUnavailableError, VersionConflictError
from .keys import KeyLayout, commit_script_args, restore_script_args
from .lua import COMMIT, RELEASE_LEASE, RESTORE_BINDINGS, TAKE_LEASE, CommitReply
from .model import (
    BINDING_KIND_PREFIX,
    DEFAULT_PODS,
    Binding,
    Commit,
    CommitResult,
    Doc,
    NodeUsage,
    Output,
    Write,
    binding_kind,
    fmt_amount,
    parse_entry,
)

__all__ = [
    "MARKER_TTL",
    "SENTINEL_SCHEME",
    "RedisStore",
    "SentinelTarget",
    "decode_outputs",
    "encode_outputs",
    "parse_sentinel_url",
    "sentinel_url",
]

# Long enough to outlive every redelivery of a message (max_deliver × backoff, ack waits); a
# marker only has to say "done" while the bus may still hand the message over again.
MARKER_TTL = 6 * 3600
_OUTPUTS = msgspec.msgpack.Decoder(list[Output])
_ENC = msgspec.msgpack.Encoder()
SENTINEL_SCHEME = "redis+sentinel"
# How long a commit waits for its replicas before it is reported unconfirmed (ms): longer than a
# healthy replica's lag, short enough that a handler retries soon after a failover.
_REPLICA_WAIT_MS = 2000


class SentinelTarget(msgspec.Struct, frozen=True, kw_only=True):
    """What a ``redis+sentinel://`` URL names: the sentinels, the primary's name, the credentials
    for the primary (not the sentinels) and how many replicas must hold each commit."""

    sentinels: tuple[tuple[str, int], ...]
    master: str
    username: str | None = None
    password: str | None = None
    replicas: int = 1


def sentinel_url(sentinels: Sequence[tuple[str, int]], master: str, *, replicas: int = 1) -> str:
    hosts = ",".join(f"{host}:{port}" for host, port in sentinels)
    return f"{SENTINEL_SCHEME}://{hosts}/{master}?replicas={replicas}"


def parse_sentinel_url(url: str) -> SentinelTarget:
    """``redis+sentinel://[user:password@]h1:p1,h2:p2/<master>[?replicas=N]`` (N: 1 unless given)."""
    parts = urlsplit(url)
    credentials, _, hosts = parts.netloc.rpartition("@")
    user, _, password = credentials.partition(":")
    sentinels = []
    for item in hosts.split(","):
        host, _, port = item.rpartition(":")
        sentinels.append((host, int(port)))
    master = parts.path.strip("/")
    if not sentinels or not master:
        raise ValueError(f"a sentinel URL names its sentinels and its primary: {url!r}")
    replicas = int(parse_qs(parts.query).get("replicas", ["1"])[0])
    return SentinelTarget(
        sentinels=tuple(sentinels),
        master=master,
        username=unquote(user) or None,
        password=unquote(password) or None,
        replicas=replicas,
    )


def _client(url: str) -> tuple[aioredis.Redis, int]:
    """The client for ``url`` and how many replicas each commit waits for (0 without Sentinel)."""
    if not url.startswith(f"{SENTINEL_SCHEME}://"):
        client = aioredis.Redis.from_url(
            url,
            socket_connect_timeout=5,
            socket_timeout=30,
            health_check_interval=30,
            # A connection the server closed (an ACL LOAD after `hyperjob user add` closes those of
            # users it redefines) is opened again and the command sent again, once or twice, instead
            # of failing the caller: a read is idempotent, and a commit refuses its own repeat
            # (its dedup markers), as it does a redelivered message's.
            retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 2),
            retry_on_error=[redis.exceptions.ConnectionError],
        )
        return client, 0
    target = parse_sentinel_url(url)
    sentinel = Sentinel(list(target.sentinels), socket_connect_timeout=2, socket_timeout=2)  # type: ignore[no-untyped-call]
    primary = sentinel.master_for(
        target.master,
        username=target.username,
        password=target.password,
        socket_connect_timeout=5,
        socket_timeout=30,
        health_check_interval=30,
    )
    return primary, target.replicas


def encode_outputs(outputs: Sequence[Output]) -> bytes:
    return _ENC.encode(list(outputs))


def decode_outputs(blob: bytes) -> list[Output]:
    return _OUTPUTS.decode(blob)


@contextlib.contextmanager
def _translate() -> Iterator[None]:
    try:
        yield
    except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError) as exc:
        raise StoreUnavailableError(str(exc) or type(exc).__name__) from exc
    except redis.exceptions.RedisError as exc:
        raise StoreError(str(exc) or type(exc).__name__) from exc


def _floats(raw: Mapping[bytes, bytes]) -> dict[str, float]:
    return {k.decode(): float(v) for k, v in raw.items()}


def commit_result(reply: Sequence[int | bytes], commit: Commit) -> CommitResult:
    """What ``COMMIT`` replied: a ``CommitReply`` code, then integers and strings by code."""
    try:
        code = CommitReply(int(reply[0]))
    except ValueError:
        raise StoreError(f"COMMIT replied {reply[0]!r}, not a CommitReply: the script and this client differ") from None
    match code:
        case CommitReply.COMMITTED:
            n = len(commit.writes)
            epoch = int(reply[n + 1]) if len(reply) > n + 1 else 0
            return CommitResult(versions=[int(v) for v in reply[1 : n + 1]], epoch=epoch)
        case CommitReply.DUPLICATE:
            return CommitResult(refusal="duplicate", event_id=commit.event_ids[int(reply[1]) - 1])
        case CommitReply.CONFLICT:
            w = commit.writes[int(reply[1]) - 1]
            return CommitResult(
                refusal="conflict", kind=w.kind, name=w.name, expected=w.expected_version or 0, actual=int(reply[2])
            )
        case CommitReply.WIPED:
            return CommitResult(refusal="wiped")
        case CommitReply.BOUND_ELSEWHERE:
            return CommitResult(refusal="bound-elsewhere", pod=_text(reply[1]), node=_text(reply[2]))
        case CommitReply.NO_ROOM:
            rest = reply[2:]
            missing = {_text(rest[i]): float(rest[i + 1]) for i in range(0, len(rest), 2)}
            return CommitResult(refusal="no-room", node=_text(reply[1]), missing=missing)
        case CommitReply.UNKNOWN_NODE:
            return CommitResult(refusal="unknown-node", node=_text(reply[1]))
        case CommitReply.STALE:
            return CommitResult(refusal="stale", epoch=int(reply[1]))


# The client never decodes replies (no ``decode_responses``): every string redis-py types as
# ``bytes | str`` arrives as bytes. ``_text`` decodes one, ``_bytes`` says so to the type checker.
def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _bytes(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


class RedisStore:
    """The Redis adapter (``redis.asyncio`` + hiredis). Cheap to build; connects lazily; ``close()``
    at exit. Everything lives under ``prefix``, so tests and deployments can share a server.
    (Signatures say ``builtins.list``: the ``list`` method shadows the built-in in the class's scope.)"""

    def __init__(self, url: str, prefix: str = "hj", *, marker_ttl: int = MARKER_TTL) -> None:
        self._r, self._replicas = _client(url)
        self._p = prefix
        self._k = KeyLayout(prefix)
        self._ttl = marker_ttl
        self._commit = self._r.register_script(COMMIT)
        self._restore_bindings = self._r.register_script(RESTORE_BINDINGS)
        self._take_lease = self._r.register_script(TAKE_LEASE)
        self._release_lease = self._r.register_script(RELEASE_LEASE)

    @classmethod
    async def connect(cls, url: str, prefix: str = "hj", *, marker_ttl: int = MARKER_TTL) -> RedisStore:
        """Build and ping; raises ``StoreUnavailableError`` when Redis does not answer."""
        store = cls(url, prefix, marker_ttl=marker_ttl)
        await store.ping()
        return store

    async def ping(self) -> None:
        with _translate():
            await self._r.ping()

    async def close(self) -> None:
        await self._r.aclose()

    async def clear(self) -> int:
        """Delete every key under the prefix; returns how many (tests, and a deliberate wipe)."""
        with _translate():
            keys = [k async for k in self._r.scan_iter(match=f"{self._p}:*", count=1000)]
            for i in range(0, len(keys), 1000):
                await self._r.delete(*keys[i : i + 1000])
        return len(keys)

    # -- keys -------------------------------------------------------------------------------

    def _dkey(self, kind: str) -> str:
        return self._k.doc(kind)

    def _vkey(self, kind: str) -> str:
        return self._k.version(kind)

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
        return {
            n: (Doc(kind=kind, name=n, version=int(v), data=d) if d is not None and v is not None else None)
            for n, d, v in zip(names, datas, versions, strict=True)
        }

    async def put_if_version(self, kind: str, name: str, doc: object, expected_version: int | None) -> int:
        """Write ``doc`` if the stored version is ``expected_version`` (0 = absent, None = any);
        returns the new version. Raises ``VersionConflictError``."""
        return (await self._plain(Write.put(kind, name, doc, expected_version))).versions[0]

    async def delete(self, kind: str, name: str, expected_version: int | None = None) -> None:
        """Delete ``kind/name`` (absent is fine unless a version is expected). Raises
        ``VersionConflictError``."""
        await self._plain(Write.delete(kind, name, expected_version))

    async def _plain(self, write: Write) -> CommitResult:
        result = await self.commit(Commit(writes=[write]))
        if result.refusal == "conflict":
            raise VersionConflictError(result.kind, result.name, result.expected, result.actual)
        return result

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

    # -- the commit ---------------------------------------------------------------------------

    async def commit(self, commit: Commit) -> CommitResult:
        """Apply a ``Commit`` atomically (one Lua script; see ``Commit`` for the rules), or
        nothing and say why. Raises ``StoreUnavailableError`` when Redis does not answer."""
        keys, request = commit_script_args(self._k, commit)
        args: list[EncodableT] = [self._ttl, request, encode_outputs(commit.outputs)]
        with _translate():
            if not self._replicas:
                return commit_result(await self._commit(keys=keys, args=args), commit)
            # WAIT counts the writes of its own connection: the script and WAIT go down one pipeline.
            async with self._r.pipeline(transaction=False) as pipe:
                await self._commit(keys=keys, args=args, client=pipe)  # queued, not sent
                pipe.execute_command("WAIT", self._replicas, _REPLICA_WAIT_MS)
                reply, held_by = await pipe.execute()
        if int(held_by) < self._replicas:
            raise StoreUnavailableError(f"commit held by {held_by} of {self._replicas} replicas")
        return commit_result(reply, commit)

    async def seen(
        self, consumer: str, event_ids: Sequence[str], instance: str = ""
    ) -> dict[str, builtins.list[Output]]:
        """The events of ``event_ids`` already committed under ``consumer``, with the outputs
        their commit recorded (to publish again), in two round trips. ``instance`` is the sentinel
        those commits named (the markers' hash tag; the consumer itself when they named none)."""
        if not event_ids:
            return {}
        unit = instance or consumer
        with _translate():
            pointers = await self._r.mget([self._k.marker(unit, consumer, e) for e in event_ids])
            found = {e: _text(p) for e, p in zip(event_ids, pointers, strict=True) if p is not None}
            keys = sorted({p for p in found.values() if p})
            blobs = dict(zip(keys, await self._r.mget(keys), strict=True)) if keys else {}  # full keys
        return {e: decode_outputs(_bytes(blob)) if (blob := blobs.get(p)) else [] for e, p in found.items()}

    async def outbox(self, instance: str) -> builtins.list[tuple[str, builtins.list[Output]]]:
        """Outputs ``instance`` committed that no later commit confirmed as published."""
        with _translate():
            keys = [_text(k) for k in await self._r.lrange(self._k.outbox(instance), 0, -1)]
            keys = list(dict.fromkeys(keys))
            blobs = await self._r.mget([self._k.outputs(instance, k) for k in keys]) if keys else []
        return [(k, decode_outputs(_bytes(b))) for k, b in zip(keys, blobs, strict=True) if b]

    # -- sentinels and restore ------------------------------------------------------------------

    async def alive(self, instance: str) -> bool:
        with _translate():
            return bool(await self._r.exists(self._k.alive(instance)))

    async def epoch(self, instance: str) -> int:
        """How many commits ``instance`` made (0 before its first, or without a sentinel)."""
        with _translate():
            value = await self._r.get(self._k.alive(instance))
        return int(value) if value is not None else 0

    async def mark_alive(self, instance: str) -> None:
        with _translate():
            await self._r.set(self._k.alive(instance), "1", nx=True)  # a live one keeps its epoch

    async def take_lease(self, instance: str, holder: str, ttl: float) -> bool:
        """Take ``instance``'s lease for ``ttl`` seconds, or renew it, unless another holder has it."""
        with _translate():
            taken = await self._take_lease(keys=[self._k.lease(instance)], args=[holder, max(1, int(ttl * 1000))])
        return bool(taken)

    async def release_lease(self, instance: str, holder: str) -> None:
        """Give the lease back (only its holder can): a standby replica takes it at once."""
        with _translate():
            await self._release_lease(keys=[self._k.lease(instance)], args=[holder])

    async def forget(self, instance: str, kinds: Sequence[str], binding_clusters: Sequence[str] = ()) -> None:
        """Drop an instance's state: its documents of ``kinds``, the bindings of
        ``binding_clusters`` (and what they used on each node), and its sentinel."""
        with _translate():
            async with self._r.pipeline(transaction=True) as pipe:
                for kind in kinds:
                    pipe.delete(self._dkey(kind), self._vkey(kind))
                for cluster in binding_clusters:
                    pipe.delete(self._k.bind(cluster), self._k.used(cluster))
                pipe.delete(self._k.alive(instance))
                await pipe.execute()

    async def restore(self, docs: Sequence[Doc]) -> None:
        """Put documents back as a changelog recorded them (versions included); binding
        documents (kind ``binding@<cluster>``) go back into the cluster's resource accounting,
        each pod once (a pod already bound keeps its binding: a repeated restore books nothing)."""
        bindings = []
        with _translate():
            async with self._r.pipeline(transaction=True) as pipe:
                for doc in docs:
                    if doc.kind.startswith(BINDING_KIND_PREFIX):
                        cluster = doc.kind[len(BINDING_KIND_PREFIX) :]
                        bindings.append(parse_entry(cluster, doc.name, doc.data.decode()))
                    else:
                        pipe.hset(self._dkey(doc.kind), doc.name, doc.data)
                        pipe.hset(self._vkey(doc.kind), doc.name, doc.version)
                await pipe.execute()
            if bindings:
                keys, rows = restore_script_args(self._k, bindings)
                await self._restore_bindings(keys=keys, args=[rows])

    # -- node resource accounting -----------------------------------------------------------

    async def set_node_allocatable(self, cluster: str, node: str, allocatable: Mapping[str, float]) -> None:
        """Register or update a node's allocatable (``pods`` defaults to 110). Bindings already on
        the node stay; if the node shrank below its usage, later binds simply fail on it."""
        await self.set_nodes_allocatable(cluster, {node: allocatable})

    async def set_nodes_allocatable(self, cluster: str, nodes: Mapping[str, Mapping[str, float]]) -> None:
        """``set_node_allocatable`` for many nodes in one round trip (a fleet of 10,000 registers
        in a fraction of a second, not one node at a time)."""
        if not nodes:
            return
        with _translate():
            async with self._r.pipeline(transaction=True) as pipe:
                for node, allocatable in nodes.items():
                    alloc_key = self._k.alloc(cluster, node)
                    values: dict[FieldT, EncodableT] = {r: fmt_amount(a) for r, a in allocatable.items()}
                    values.setdefault("pods", fmt_amount(DEFAULT_PODS))
                    pipe.delete(alloc_key)
                    pipe.hset(alloc_key, mapping=values)
                pipe.sadd(self._k.nodes(cluster), *nodes)
                await pipe.execute()

    async def remove_node(self, cluster: str, node: str) -> None:
        """Forget a node's allocatable; binds to it fail from now on (its bindings stay until released)."""
        alloc_key = self._k.alloc(cluster, node)
        with _translate():
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.delete(alloc_key)
                pipe.srem(self._k.nodes(cluster), node)
                await pipe.execute()

    async def nodes(self, cluster: str) -> dict[str, NodeUsage]:
        """Every registered node of ``cluster`` with its usage, sorted by name (two round trips)."""
        with _translate():
            names = sorted(_text(m) for m in await self._r.smembers(self._k.nodes(cluster)))
            if not names:
                return {}
            async with self._r.pipeline(transaction=True) as pipe:
                for n in names:
                    pipe.hgetall(self._k.alloc(cluster, n))
                pipe.hgetall(self._k.used(cluster))
                *allocs, used = await pipe.execute()
        by_node: dict[str, dict[str, float]] = {}
        for field, amount in used.items():
            node, _, res = _text(field).partition("\n")
            by_node.setdefault(node, {})[res] = float(amount)
        return {
            n: NodeUsage(allocatable=_floats(a), used=by_node.get(n, {}))
            for n, a in zip(names, allocs, strict=True)
            if a
        }

    async def allocations(self, cluster: str) -> dict[str, Binding]:
        """Every bound pod of ``cluster`` with its node and request."""
        with _translate():
            raw = await self._r.hgetall(self._k.bind(cluster))
        out = {}
        for pod, entry in sorted(raw.items()):
            out[_text(pod)] = parse_entry(cluster, _text(pod), _text(entry))
        return out

    async def binding_docs(self, cluster: str) -> builtins.list[Doc]:
        """The cluster's bindings as changelog documents (kind ``binding@<cluster>``)."""
        with _translate():
            raw = await self._r.hgetall(self._k.bind(cluster))
        return [
            Doc(kind=binding_kind(cluster), name=_text(p), version=1, data=_bytes(e)) for p, e in sorted(raw.items())
        ]
