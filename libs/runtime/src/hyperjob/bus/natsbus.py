"""``NatsBus``: JetStream streams, publish with ``Nats-Msg-Id``, durable pull consumers, DLQ.

Streams are declared once, at ``connect``, from the caller's list (plus ``DLQ`` for ``dlq.>``).
A consumer is a durable PULL consumer: every process that calls ``consume`` with the same durable
name shares its messages (scale-out). The bus acks after the handler returns; see ``dispatch`` for
the retry and dead-letter rules. ``namespace`` prefixes every subject (``<ns>.``) and stream name
(``<ns>_``) on the wire and strips them again on delivery, so tests share one server in isolation.

JetStream drops a message whose ``Nats-Msg-Id`` the stream saw within its duplicate window, on any
subject of the stream. A service's message ids are derived (``events.derive_id``: the same on every
retry), so anyone who may publish on the stream (a person, on her request subjects of ``HYPERJOB``)
could compute the id of an answer and publish it first: the answer would be dropped. A connection
with a password therefore puts on the wire an HMAC of the id keyed by that password
(``wire_msg_id``): the same for every retry and replica of the instance (one identity, one
password), out of reach of whoever does not hold it. Without credentials (tests, an open server)
the id goes as it is.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import hmac
import re
import urllib.parse
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import msgspec
import nats.errors
import nats.js.errors
import structlog
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.js import JetStreamContext, api
from nats.protocol.parser import AUTHORIZATION_VIOLATION, PERMISSIONS_ERR, STALE_CONNECTION

from hyperjob.events.access import without_credentials
from hyperjob.events.subjects import StreamDecl
from hyperjob.telemetry import inject

from .dispatch import Run, Verdict, dead_letter, runs_batches, runs_each, wire_size
from .errors import (
    BusClosedError,
    ConsumerError,
    CredentialsRefusedError,
    MessageTooLargeError,
    NoStreamError,
    PermissionDeniedError,
    PublishError,
    StreamConfigError,
)
from .model import (
    DLQ_STREAM,
    MSG_ID,
    BatchHandler,
    ConsumerLag,
    ConsumerPolicy,
    Delivery,
    Handler,
    Message,
    Outgoing,
    Payload,
    PublishAck,
    StreamSpec,
    as_outgoing,
    as_stream_spec,
    encode_payload,
    find_stream,
    merged_headers,
    valid_name,
)
from .pull import PullLoop

__all__ = ["NatsBus"]

_log = structlog.get_logger("bus")
T = TypeVar("T")
_STREAM_IN_USE = 10058  # "stream name already in use with a different configuration"
_NATS_ERRORS = (nats.errors.Error, asyncio.TimeoutError)
# The server's words for a refused publish: ``Permissions Violation for Publish to "<subject>"``.
_PUBLISH_DENIED = re.compile(PERMISSIONS_ERR + r' for publish to "([^"]+)"', re.IGNORECASE)
# A watch's ordered consumer is recreated by nats-py after two missed idle heartbeats: with 1 s,
# a watch follows again within seconds of a server restart (5 s left it blind for ~20 s).
WATCH_HEARTBEAT = 1.0
# A connection the server dropped across a partition (its write deadline) can look open for
# minutes to the client: nothing of the drop reaches it, and TCP retries ever more rarely. A ping
# every 5 s (nats-py: every 120 s) finds it dead once two go unanswered (10-15 s), so the client
# connects anew and is back within seconds of the network (issue 16, fault (a)).
PING_INTERVAL = 5
MAX_OUTSTANDING_PINGS = 2


def _close(a: float | None, b: float | None) -> bool:
    """Durations as the server returns them (nanoseconds, back to seconds) equal ours."""
    return abs((a or 0.0) - (b or 0.0)) < 1e-3


def id_key_of(url: str) -> bytes:
    """The key of a connection's message ids: from its password (``b""`` without one)."""
    password = urllib.parse.urlsplit(url).password or ""
    return hashlib.sha256(b"hyperjob Nats-Msg-Id\0" + password.encode()).digest() if password else b""


def wire_msg_id(key: bytes, msg_id: str) -> str:
    """The ``Nats-Msg-Id`` a message goes out with: ``msg_id`` keyed by ``key`` (module doc)."""
    if not key:
        return msg_id
    return hmac.new(key, msg_id.encode(), hashlib.sha256).hexdigest()[:32]


class _Client(NatsClient):
    """nats-py's client, except that a protocol error from the server (``-ERR``: a payload over
    ``max_payload``, a slow consumer, a parser error) leads to a reconnect, as a lost connection
    does, instead of closing the client for good: one bad message must not leave a service
    without a bus. Authorization and permission errors keep nats-py's handling."""

    async def _process_err(self, err_msg: str) -> None:
        if AUTHORIZATION_VIOLATION in err_msg or PERMISSIONS_ERR in err_msg or STALE_CONNECTION in err_msg:
            await super()._process_err(err_msg)
            return
        error = nats.errors.Error("nats: " + err_msg.strip("'"))
        await self._error_cb(error)
        await self._process_op_err(error)


class _ConnectionEvents:
    """nats-py callbacks, logged through structlog; quiet while the bus closes on purpose. They
    also say what the server refused: the credentials (``credentials_refused``), or a publish on a
    subject this user may not publish on (``denied``: the waiting publish fails at once)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.closing = False
        self.credentials_refused = False
        self.on_reconnect: list[Callable[[], None]] = []
        self.on_lost: list[Callable[[], None]] = []
        self._denials: dict[str, set[asyncio.Future[None]]] = {}

    async def error(self, exc: Exception) -> None:
        text = str(exc)
        if isinstance(exc, nats.errors.AuthorizationError) or AUTHORIZATION_VIOLATION in text.lower():
            self.credentials_refused = True
        denied = _PUBLISH_DENIED.search(text)
        for waiter in self._denials.get(denied.group(1), ()) if denied else ():
            if not waiter.done():
                waiter.set_result(None)
        if not self.closing:
            _log.warning("nats_error", url=self.url, error=text or type(exc).__name__)

    @contextlib.contextmanager
    def denial(self, wire_subject: str) -> Iterator[asyncio.Future[None]]:
        """A future done if the server refuses a publish on ``wire_subject`` meanwhile."""
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiters = self._denials.setdefault(wire_subject, set())
        waiters.add(waiter)
        try:
            yield waiter
        finally:
            waiters.discard(waiter)
            if not waiters:
                self._denials.pop(wire_subject, None)

    async def disconnected(self) -> None:
        if not self.closing:
            _log.warning("nats_disconnected", url=self.url)

    async def reconnected(self) -> None:
        _log.info("nats_reconnected", url=self.url)
        for callback in self.on_reconnect:
            callback()

    async def closed(self) -> None:
        if self.closing:
            return
        # Only reachable when nats-py gives up (an authorization error): the owner must act
        # (``NatsBus.on_lost``; a service process exits so that its supervisor restarts it).
        _log.error("nats_connection_lost", url=self.url)
        for callback in self.on_lost:
            callback()


class NatsBus:
    """The JetStream adapter. Build with ``await NatsBus.connect(url, streams)``; ``close()`` at exit."""

    def __init__(
        self, nc: NatsClient, js: JetStreamContext, namespace: str = "", timeout: float = 5.0, *, id_key: bytes = b""
    ) -> None:
        if namespace and not valid_name(namespace):
            raise ValueError(f"namespace {namespace!r}: letters, digits, '-' and '_' only")
        self._nc = nc
        self._js = js
        self._ns = namespace
        self._timeout = timeout
        self._streams: list[StreamSpec] = []
        self._subs: list[PullLoop] = []
        self._watches: list[_Watch] = []
        self._events: _ConnectionEvents | None = None
        self._replicas: int | None = None
        self._id_key = id_key  # keys the Nats-Msg-Id on the wire (module doc); b"": ids as they are

    @classmethod
    async def connect(
        cls,
        url: str,
        streams: Iterable[StreamSpec | StreamDecl] = (),
        *,
        namespace: str = "",
        name: str | None = None,
        max_pending_publishes: int = 4000,
        timeout: float = 5.0,
        connect_timeout: float = 10.0,
        replicas: int | None = None,
    ) -> NatsBus:
        """Connect and declare ``streams`` (``StreamSpec`` or ``events.subjects.StreamDecl``). A stream
        for ``dlq.>`` is added unless one is given. Raises ``BusError`` if the server cannot be reached
        or a stream conflicts. ``timeout`` bounds each JetStream request (publish ack, API call);
        ``connect_timeout`` the first connection (later disconnects reconnect forever).

        ``url`` may name several servers of one NATS cluster, comma-separated: the client connects
        to one and moves to another when it goes away. ``replicas`` declares every stream with that
        many copies (a 3-node cluster: 3), whatever the specs say."""
        events = _ConnectionEvents(without_credentials(url))
        servers = [u.strip() for u in url.split(",") if u.strip()]
        nc = _Client()
        try:
            # nats-py retries a first connect forever when reconnects are unlimited: bound it here.
            await asyncio.wait_for(
                nc.connect(
                    servers,
                    name=name,
                    connect_timeout=2,
                    max_reconnect_attempts=-1,
                    # nats-py annotates this int, but sleeps on it (a float works): its stub is wrong.
                    reconnect_time_wait=0.5,  # type: ignore[arg-type]
                    allow_reconnect=True,
                    ping_interval=PING_INTERVAL,
                    max_outstanding_pings=MAX_OUTSTANDING_PINGS,
                    error_cb=events.error,
                    disconnected_cb=events.disconnected,
                    reconnected_cb=events.reconnected,
                    closed_cb=events.closed,
                ),
                connect_timeout,
            )
        except (*_NATS_ERRORS, OSError) as exc:
            if events.credentials_refused:
                await nc.close()
                raise CredentialsRefusedError(f"{events.url} refused the credentials (user or password)") from exc
            raise BusClosedError(f"cannot connect to {events.url}: {exc}") from exc
        bus = cls(
            nc,
            nc.jetstream(publish_async_max_pending=max_pending_publishes, timeout=timeout),
            namespace,
            timeout,
            id_key=id_key_of(servers[0]) if servers else b"",
        )
        bus._events = events
        bus._replicas = replicas
        try:
            await bus.declare(streams)
        except BaseException:
            await nc.close()
            raise
        return bus

    @property
    def connected(self) -> bool:
        """Whether the connection is up now (false while reconnecting or after it was lost)."""
        return bool(self._nc.is_connected)

    def on_lost(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` if the connection is closed for good (not by ``close``)."""
        if self._events is not None:
            self._events.on_lost.append(callback)

    @property
    def max_payload(self) -> int:
        """The server's ``max_payload``: payload and headers of one message together."""
        return int(self._nc.max_payload)

    def _check_size(self, subject: str, msg_id: str, payload: bytes, headers: dict[str, str]) -> None:
        size = wire_size(subject, payload, headers)
        if size > self.max_payload:
            raise MessageTooLargeError(
                subject, msg_id, f"{size} bytes with headers, over the server's max_payload {self.max_payload}"
            )

    # -- naming -----------------------------------------------------------------------------

    def _wire(self, subject: str) -> str:
        return f"{self._ns}.{subject}" if self._ns else subject

    def _logical(self, subject: str) -> str:
        return subject[len(self._ns) + 1 :] if self._ns else subject

    def _stream_name(self, name: str) -> str:
        return f"{self._ns}_{name}" if self._ns else name

    # -- streams ----------------------------------------------------------------------------

    async def declare(self, streams: Iterable[StreamSpec | StreamDecl]) -> None:
        """Create or update each stream so its config matches the spec. Idempotent."""
        specs = [as_stream_spec(s) for s in streams]
        if find_stream([*self._streams, *specs], ["dlq.x"]) is None:
            specs.append(DLQ_STREAM)
        for spec in specs:
            await self._declare_one(spec)
            self._streams = [s for s in self._streams if s.name != spec.name] + [spec]

    async def _declare_one(self, spec: StreamSpec) -> None:
        name = self._stream_name(spec.name)
        config = api.StreamConfig(
            name=name,
            subjects=[self._wire(s) for s in spec.subjects],
            storage=api.StorageType.FILE if spec.storage == "file" else api.StorageType.MEMORY,
            max_age=spec.max_age,
            duplicate_window=spec.duplicate_window,
            max_msgs_per_subject=spec.max_msgs_per_subject,
            max_msgs=spec.max_msgs,
            max_bytes=spec.max_bytes,
            num_replicas=self._replicas or spec.replicas,
            allow_direct=True,
        )
        try:
            if await self._declared_already(name, config):
                return
            try:
                await self._js.add_stream(config)
            except nats.js.errors.BadRequestError as exc:
                if exc.err_code != _STREAM_IN_USE:
                    raise
                await self._js.update_stream(config)
        except _NATS_ERRORS as exc:
            raise StreamConfigError(spec.name, str(exc)) from exc

    async def _declared_already(self, name: str, config: api.StreamConfig) -> bool:
        """Whether the stream exists as ``config`` says (its replicas as they are, unless this bus
        was given ``replicas``). Then nothing is sent that only the operator may send: under least
        privilege (ADR 0006) a service reads the streams the operator declared."""
        try:
            info = await self._js.stream_info(name)
        except nats.js.errors.NotFoundError:
            return False
        have = info.config
        return (
            sorted(have.subjects or []) == sorted(config.subjects or [])
            and have.storage == config.storage
            and _close(have.max_age, config.max_age)
            and _close(have.duplicate_window, config.duplicate_window)
            and (have.max_msgs_per_subject, have.max_msgs, have.max_bytes)
            == (config.max_msgs_per_subject, config.max_msgs, config.max_bytes)
            and (self._replicas is None or have.num_replicas == config.num_replicas)
            and bool(have.allow_direct) == bool(config.allow_direct)
        )

    def _stream_for(self, subjects: Sequence[str], stream: str | None) -> str:
        if stream is not None:
            return stream
        spec = find_stream(self._streams, subjects)
        if spec is None:
            raise NoStreamError(", ".join(subjects))
        return spec.name

    # -- publish ----------------------------------------------------------------------------

    def _headers(self, headers: Mapping[str, str] | None, msg_id: str) -> dict[str, str]:
        out = merged_headers(headers, wire_msg_id(self._id_key, msg_id))
        if "traceparent" not in out:
            inject(out)
        return out

    async def publish(
        self, subject: str, event: Payload, *, msg_id: str, headers: Mapping[str, str] | None = None
    ) -> PublishAck:
        """Publish one message and wait for the stream's ack. ``event`` is bytes or a msgspec Struct
        (JSON). ``msg_id`` becomes ``Nats-Msg-Id``: a republish within the stream's duplicate
        window is acked with ``duplicate=True`` and not stored again. The current trace context is
        added as ``traceparent`` unless ``headers`` carry one. Raises ``PublishError``."""
        payload, wire_headers = encode_payload(event), self._headers(headers, msg_id)
        self._check_size(subject, msg_id, payload, wire_headers)
        try:
            ack = await self._unless_denied(
                self._js.publish(self._wire(subject), payload, headers=wire_headers), subject, msg_id
            )
        except _NATS_ERRORS as exc:
            raise PublishError(subject, msg_id, str(exc) or type(exc).__name__) from exc
        return PublishAck(stream=self._logical_stream(ack.stream), seq=ack.seq, duplicate=bool(ack.duplicate))

    async def _unless_denied(self, publish: Awaitable[T], subject: str, msg_id: str) -> T:
        """``publish``'s result, or ``PermissionDeniedError`` as soon as the server refuses the
        subject (it never acks a refused publish: the caller would wait for the whole timeout)."""
        if self._events is None:
            return await publish
        with self._events.denial(self._wire(subject)) as denied:
            task = asyncio.ensure_future(publish)
            either: set[asyncio.Future[Any]] = {task, denied}
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            if task.done():
                return task.result()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, *_NATS_ERRORS):
                await task
            raise PermissionDeniedError(subject, msg_id)

    def _logical_stream(self, name: str) -> str:
        return name[len(self._ns) + 1 :] if self._ns and name.startswith(f"{self._ns}_") else name

    async def publish_many(self, messages: Iterable[Message], *, timeout: float = 10.0) -> list[PublishAck]:
        """Publish many messages with up to ``max_pending_publishes`` acks in flight; returns the acks
        in order. Items are ``Outgoing``, ``store.Output`` or ``(subject, msg_id, payload)``. If any
        publish fails, the others still complete and one ``PublishError`` (the first) is raised;
        retrying the whole batch is safe (duplicates are dropped by ``Nats-Msg-Id``)."""
        items = [as_outgoing(m) for m in messages]
        prepared = [(item, self._headers(item.headers, item.msg_id)) for item in items]
        for item, headers in prepared:
            self._check_size(item.subject, item.msg_id, item.payload, headers)
        futures: list[asyncio.Future[api.PubAck]] = []
        try:
            for item, headers in prepared:
                futures.append(
                    await self._js.publish_async(
                        self._wire(item.subject), item.payload, headers=headers, wait_stall=None
                    )
                )
            results = await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), timeout)
        except _NATS_ERRORS as exc:
            for fut in futures:
                fut.cancel()
            first = items[len(futures)] if len(futures) < len(items) else items[-1]
            raise PublishError(first.subject, first.msg_id, str(exc) or type(exc).__name__) from exc
        acks: list[PublishAck] = []
        for item, res in zip(items, results, strict=True):
            if isinstance(res, BaseException):
                raise PublishError(item.subject, item.msg_id, str(res) or type(res).__name__) from res
            acks.append(PublishAck(stream=self._logical_stream(res.stream), seq=res.seq, duplicate=bool(res.duplicate)))
        return acks

    # -- consume ----------------------------------------------------------------------------

    async def consume(
        self,
        durable: str,
        subjects: str | Sequence[str],
        handler: Handler,
        *,
        stream: str | None = None,
        batch: int = 100,
        max_deliver: int = 5,
        backoff: Sequence[float] | None = None,
        max_ack_pending: int | None = None,
        ack_wait: float = 30.0,
        concurrency: int = 1,
    ) -> PullLoop:
        """Create (or update) the durable pull consumer ``durable`` on the stream capturing
        ``subjects`` and start a loop feeding ``handler`` one ``Delivery`` at a time (``concurrency``
        at once; 1 keeps stream order). Every process consuming the same ``durable`` shares the
        messages. ``batch`` is how many are pulled at once (about two batches are requested ahead);
        ``ack_wait`` must exceed one handler call. Returns the running subscription; ``stop()`` it
        or ``close()`` the bus. Raises ``NoStreamError``/``ConsumerError``."""
        policy = ConsumerPolicy.build(
            batch=batch,
            max_deliver=max_deliver,
            backoff=backoff,
            max_ack_pending=max_ack_pending,
            ack_wait=ack_wait,
            concurrency=concurrency,
        )
        return await self._start(durable, subjects, runs_each(handler), policy, stream, batched=False)

    async def consume_batch(
        self,
        durable: str,
        subjects: str | Sequence[str],
        handler: BatchHandler,
        *,
        stream: str | None = None,
        batch: int = 100,
        max_deliver: int = 5,
        backoff: Sequence[float] | None = None,
        max_ack_pending: int | None = None,
        ack_wait: float = 30.0,
    ) -> PullLoop:
        """As ``consume``, but ``handler`` gets up to ``batch`` deliveries at once (in stream order)
        so it can load and write state for all of them in one Redis round trip
        (one ``store.commit``) and publish all outputs with one ``publish_many``. It returns
        ``None`` to ack all, or ``{index: exception}`` for the ones that failed; raising settles
        the whole batch by that exception. One span per batch (see ``dispatch``)."""
        policy = ConsumerPolicy.build(
            batch=batch, max_deliver=max_deliver, backoff=backoff, max_ack_pending=max_ack_pending, ack_wait=ack_wait
        )
        return await self._start(durable, subjects, runs_batches(handler), policy, stream, batched=True)

    async def _start(
        self,
        durable: str,
        subjects: str | Sequence[str],
        run: Run,
        policy: ConsumerPolicy,
        stream: str | None,
        *,
        batched: bool,
    ) -> PullLoop:
        if not valid_name(durable):
            raise ConsumerError(durable, "a durable name is letters, digits, '-' and '_'")
        filters = [subjects] if isinstance(subjects, str) else list(subjects)
        wire_stream = self._stream_name(self._stream_for(filters, stream))
        wire_filters = [self._wire(f) for f in filters]
        config = api.ConsumerConfig(
            name=durable,
            durable_name=durable,
            ack_policy=api.AckPolicy.EXPLICIT,
            deliver_policy=api.DeliverPolicy.ALL,
            ack_wait=policy.ack_wait,
            max_deliver=policy.max_deliver + 1,  # the extra delivery dead-letters a message that timed out
            max_ack_pending=policy.ack_pending,
            max_waiting=512,
            filter_subject=wire_filters[0] if len(wire_filters) == 1 else None,
            filter_subjects=wire_filters if len(wire_filters) > 1 else None,
        )

        async def recreate(start_seq: int | None) -> bool:
            """The durable again if it is gone (a refusal may have another cause: then nothing)."""
            try:
                await self._js.consumer_info(wire_stream, durable)
                return False
            except nats.js.errors.NotFoundError:
                pass
            again = config
            if start_seq is not None:
                again = dataclasses.replace(
                    config, deliver_policy=api.DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=start_seq
                )
            await self._js.add_consumer(wire_stream, again)
            return True

        loop = PullLoop(self, self._nc, wire_stream, durable, run, policy, batched=batched, recreate=recreate)
        try:
            await self._js.add_consumer(wire_stream, config)
            await loop.start()
        except _NATS_ERRORS as exc:
            raise ConsumerError(durable, str(exc)) from exc
        self._subs.append(loop)
        if self._events is not None:
            self._events.on_reconnect.append(loop.reconnected)
        return loop

    def delivery(self, msg: Msg) -> Delivery:
        """The ``Delivery`` of a JetStream message (namespace stripped)."""
        meta = msg.metadata
        headers = dict(msg.headers) if msg.headers else {}
        return Delivery(
            subject=self._logical(msg.subject),
            data=msg.data,
            headers=headers,
            num_delivered=meta.num_delivered,
            msg_id=headers.get(MSG_ID),
            stream=self._logical_stream(meta.stream),
            seq=meta.sequence.stream,
        )

    # -- latest values ----------------------------------------------------------------------

    async def last(self, subject: str, *, stream: str | None = None) -> Delivery | None:
        """The last message stored on exactly ``subject`` (a latest-value read), or ``None``."""
        name = self._stream_name(self._stream_for([subject], stream))
        try:
            raw = await self._js.get_last_msg(name, self._wire(subject))
        except nats.js.errors.NotFoundError:
            return None
        except _NATS_ERRORS as exc:
            raise BusClosedError(f"last({subject}): {exc}") from exc
        headers = dict(raw.headers) if raw.headers else {}
        return Delivery(
            subject=self._logical(raw.subject or self._wire(subject)),
            data=raw.data or b"",
            headers=headers,
            msg_id=headers.get(MSG_ID),
            stream=self._logical_stream(name),
            seq=raw.seq or 0,
        )

    async def last_per_subject(self, subject_filter: str, *, stream: str | None = None) -> dict[str, Delivery]:
        """The last message of every subject matching ``subject_filter`` (e.g. all node heartbeats
        of a cluster: ``heartbeat.node.c1.*``), keyed by logical subject. One ephemeral consumer."""
        out: dict[str, Delivery] = {}
        for d, _at in await self._read(subject_filter, stream, api.DeliverPolicy.LAST_PER_SUBJECT):
            out[d.subject] = d
        return out

    async def stored(self, subject_filter: str, *, stream: str | None = None) -> list[tuple[Delivery, float]]:
        """Every message stored on subjects matching ``subject_filter``, in stream order, with the
        time (epoch seconds) it was stored: the dead letters, for ``hyperjob get dlq``."""
        return await self._read(subject_filter, stream, api.DeliverPolicy.ALL)

    async def message(self, stream: str, seq: int) -> Delivery | None:
        """The message at ``seq`` of ``stream`` (a dead letter's original), or ``None`` if gone."""
        name = self._stream_name(stream)
        try:
            raw = await self._js.get_msg(name, seq)
        except nats.js.errors.NotFoundError:
            return None
        except _NATS_ERRORS as exc:
            raise BusClosedError(f"message({stream} #{seq}): {exc}") from exc
        headers = dict(raw.headers) if raw.headers else {}
        return Delivery(
            subject=self._logical(raw.subject or ""),
            data=raw.data or b"",
            headers=headers,
            msg_id=headers.get(MSG_ID),
            stream=stream,
            seq=seq,
        )

    async def delete_message(self, stream: str, seq: int) -> bool:
        """Remove the message at ``seq`` of ``stream`` (a replayed or purged dead letter)."""
        try:
            return bool(await self._js.delete_msg(self._stream_name(stream), seq))
        except nats.js.errors.NotFoundError:
            return False
        except _NATS_ERRORS as exc:
            raise BusClosedError(f"delete_message({stream} #{seq}): {exc}") from exc

    async def _read(
        self, subject_filter: str, stream: str | None, policy: api.DeliverPolicy
    ) -> list[tuple[Delivery, float]]:
        name = self._stream_name(self._stream_for([subject_filter], stream))
        config = api.ConsumerConfig(
            ack_policy=api.AckPolicy.NONE,
            deliver_policy=policy,
            filter_subject=self._wire(subject_filter),
            inactive_threshold=30.0,
            mem_storage=True,
        )
        out: list[tuple[Delivery, float]] = []
        try:
            info = await self._js.add_consumer(name, config)
            psub = await self._js.pull_subscribe_bind(durable=None, stream=name, name=info.name)
            try:
                remaining = info.num_pending or 0
                while remaining > 0:
                    msgs = await psub.fetch(min(remaining, 1000), timeout=5)
                    remaining -= len(msgs)
                    for msg in msgs:
                        out.append((self.delivery(msg), msg.metadata.timestamp.timestamp()))
            finally:
                await psub.unsubscribe()
                with contextlib.suppress(*_NATS_ERRORS):
                    await self._js.delete_consumer(name, info.name)
        except _NATS_ERRORS as exc:
            raise BusClosedError(f"read({subject_filter}): {exc}") from exc
        return out

    async def watch(
        self, subject_filter: str, handler: Handler, *, stream: str | None = None, catch_up_timeout: float = 60.0
    ) -> _Watch:
        """Hand ``handler`` the last message of every subject matching ``subject_filter``, then
        every new one, through an ordered ephemeral consumer (no acks; nats-py recreates it
        after a gap). Returns once the values that existed at the start have been handled (or
        after ``catch_up_timeout``, with a warning), so a projection built from them is complete
        before its owner decides anything. A handler that raises is logged; the watch goes on."""
        name = self._stream_name(self._stream_for([subject_filter], stream))
        watch = _Watch(self, subject_filter, handler)
        try:
            watch.sub = await self._js.subscribe(
                self._wire(subject_filter),
                cb=watch.on_msg,
                stream=name,
                ordered_consumer=True,
                deliver_policy=api.DeliverPolicy.LAST_PER_SUBJECT,
                idle_heartbeat=WATCH_HEARTBEAT,
            )
            info = await watch.sub.consumer_info()
        except _NATS_ERRORS as exc:
            raise ConsumerError(f"watch-{subject_filter}", str(exc) or type(exc).__name__) from exc
        # Nothing pending and nothing handed out yet: no value matched. (The consumer's own sequence:
        # its delivered *stream* sequence starts at the stream's last one when no subject matches,
        # which made a watch of an empty filter in a busy stream wait its whole catch-up timeout.)
        delivered = info.delivered.consumer_seq if info.delivered is not None else 0
        if not info.num_pending and not delivered:
            watch.caught_up.set()
        try:
            await asyncio.wait_for(watch.caught_up.wait(), catch_up_timeout)
        except TimeoutError:
            _log.warning("watch_catch_up_slow", subject=subject_filter, seconds=catch_up_timeout)
        self._watches.append(watch)
        return watch

    async def purge(self, subject: str, *, stream: str | None = None) -> int:
        """Remove every message stored on exactly ``subject`` (a tombstone no longer needed);
        returns how many were removed."""
        name = self._stream_name(self._stream_for([subject], stream))
        request = msgspec.json.encode({"filter": self._wire(subject)})
        try:
            # The JetStream API itself: nats-py's purge_stream drops the count the server returns.
            reply = await self._nc.request(f"$JS.API.STREAM.PURGE.{name}", request, timeout=self._timeout)
        except _NATS_ERRORS as exc:
            raise BusClosedError(f"purge({subject}): {exc}") from exc
        answer = msgspec.json.decode(reply.data)
        if "error" in answer:
            raise BusClosedError(f"purge({subject}): {answer['error'].get('description', answer['error'])}")
        return int(answer.get("purged", 0))

    # -- operations -------------------------------------------------------------------------

    async def lag(self, durable: str, subjects: str | Sequence[str], *, stream: str | None = None) -> ConsumerLag:
        """How far ``durable`` (on the stream capturing ``subjects``) is behind; for probes, the
        CLI and tests ("settled"). Raises ``ConsumerError`` if the consumer does not exist."""
        name = self._stream_name(self._stream_for([subjects] if isinstance(subjects, str) else subjects, stream))
        try:
            info = await self._js.consumer_info(name, durable)
        except _NATS_ERRORS as exc:
            raise ConsumerError(durable, str(exc) or type(exc).__name__) from exc
        return ConsumerLag(pending=info.num_pending or 0, unacked=info.num_ack_pending or 0)

    async def reset_consumer(self, durable: str, subjects: str | Sequence[str], *, stream: str | None = None) -> bool:
        """Forget ``durable`` so the next ``consume`` starts again from the stream's first message:
        the way to rebuild lost state by replaying the log (clear the store's keys too, or the dedup
        markers make the replay a no-op). Stop its loops first. ``False`` if it did not exist."""
        name = self._stream_name(self._stream_for([subjects] if isinstance(subjects, str) else subjects, stream))
        try:
            return bool(await self._js.delete_consumer(name, durable))
        except nats.js.errors.NotFoundError:
            return False
        except _NATS_ERRORS as exc:
            raise ConsumerError(durable, str(exc) or type(exc).__name__) from exc

    # -- lifecycle --------------------------------------------------------------------------

    async def close(self) -> None:
        """Stop every consumer loop (finishing the batch in hand), flush, and disconnect. Idempotent."""
        subs, self._subs = self._subs, []
        for sub in subs:
            await sub.stop()
        watches, self._watches = self._watches, []
        for watch in watches:
            await watch.stop()
        if self._events is not None:
            self._events.closing = True
        if not self._nc.is_closed:
            with contextlib.suppress(*_NATS_ERRORS):
                await self._nc.drain()
            with contextlib.suppress(*_NATS_ERRORS):
                await self._nc.close()

    async def settle(self, msg: Msg, delivery: Delivery, durable: str, verdict: Verdict) -> None:
        """Ack, nak with delay, or dead-letter then term, as ``verdict`` says."""
        if verdict.action == "ack":
            await msg.ack()
        elif verdict.action in ("nak", "hold"):
            await msg.nak(delay=verdict.delay)
        else:
            await self.dead_letter(durable, delivery, verdict)
            await msg.term()

    async def dead_letter(self, durable: str, delivery: Delivery, verdict: Verdict, *, watch: str = "") -> None:
        """Publish ``delivery`` (or, too large to copy, a reference to it) on ``dlq.<durable>``
        with the verdict's reason; ``watch`` names the watch a poisoned latest value came from."""
        out: Outgoing = dead_letter(durable, delivery, verdict, max_payload=self.max_payload, watch=watch)
        _log.warning(
            "message_dead_lettered",
            durable=durable,
            subject=delivery.subject,
            msg_id=delivery.msg_id,
            reason=verdict.reason,
            error_type=verdict.error_type,
            error=verdict.error,
            num_delivered=delivery.num_delivered,
            by_reference=not out.payload and bool(delivery.data),
        )
        await self.publish(out.subject, out.payload, msg_id=out.msg_id, headers=out.headers)


class _Watch:
    """One ``NatsBus.watch``: an ordered push subscription feeding a handler, in order."""

    def __init__(self, bus: NatsBus, subject_filter: str, handler: Handler) -> None:
        self.durable = f"watch-{subject_filter}"
        self._bus = bus
        self._handler = handler
        self.caught_up = asyncio.Event()
        self.sub: JetStreamContext.PushSubscription | None = None

    @property
    def running(self) -> bool:
        return self.sub is not None

    async def on_msg(self, msg: Msg) -> None:
        try:
            await self._handler(self._bus.delivery(msg))
        except Exception:  # noqa: BLE001 - one bad value must not end the watch
            _log.exception("watch_handler_failed", subject=msg.subject)
        if not self.caught_up.is_set() and msg.metadata.num_pending == 0:
            self.caught_up.set()

    async def stop(self, grace: float = 10.0) -> None:
        sub, self.sub = self.sub, None
        if sub is not None:
            with contextlib.suppress(*_NATS_ERRORS):
                await sub.unsubscribe()
