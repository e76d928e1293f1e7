"""Values shared by both buses: stream specs, deliveries, outgoing messages, consumer policy."""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol

import msgspec

from hyperjob.events.subjects import StreamDecl

__all__ = [
    "DEFAULT_BACKOFF",
    "DLQ_STREAM",
    "MSG_ID",
    "Message",
    "OutputLike",
    "Payload",
    "BatchHandler",
    "ConsumerLag",
    "ConsumerPolicy",
    "Delivery",
    "Handler",
    "Outgoing",
    "PublishAck",
    "StreamSpec",
    "Subscription",
    "as_outgoing",
    "as_stream_spec",
    "encode_payload",
    "subject_covers",
    "valid_name",
]

MSG_ID = "Nats-Msg-Id"
DEFAULT_BACKOFF: tuple[float, ...] = (1.0, 5.0, 30.0)
_DAY = 24 * 3600.0


class StreamSpec(msgspec.Struct, frozen=True, kw_only=True):
    """A stream as the bus declares it (idempotently, at connect).

    ``storage="file"`` keeps the log across restarts (flushed periodically, not fsynced per
    message unless the server runs with ``sync_interval: always``). ``duplicate_window`` is how
    long a ``Nats-Msg-Id`` is remembered to drop republished copies. ``max_msgs_per_subject=1``
    makes a latest-value stream (heartbeats, capacity summaries). ``replicas`` > 1 keeps that many
    copies on a NATS cluster (RAFT): the stream survives losing a minority of its servers.
    """

    name: str
    subjects: list[str]
    storage: Literal["file", "memory"] = "file"
    max_age: float = 7 * _DAY
    duplicate_window: float = 120.0
    max_msgs_per_subject: int = -1
    max_msgs: int = -1
    max_bytes: int = -1
    replicas: int = 1


# A day of duplicate window: a poisoned latest value is dead-lettered at every start of its
# reader, under the same id, so a day of restarts leaves one letter.
DLQ_STREAM = StreamSpec(name="DLQ", subjects=["dlq.>"], max_age=30 * _DAY, duplicate_window=_DAY)


def as_stream_spec(decl: StreamSpec | StreamDecl) -> StreamSpec:
    """A ``StreamSpec`` from itself or from the contract's ``events.subjects.StreamDecl``
    (``latest_only`` becomes one message per subject)."""
    if isinstance(decl, StreamSpec):
        return decl
    return StreamSpec(
        name=decl.name,
        subjects=list(decl.subjects),
        max_age=decl.max_age_seconds,
        max_msgs_per_subject=1 if decl.latest_only else -1,
    )


class Delivery(msgspec.Struct, frozen=True, kw_only=True):
    """One delivery of one message to a handler. ``subject`` is the logical subject (without a test
    namespace); ``num_delivered`` starts at 1; ``msg_id`` is the publisher's ``Nats-Msg-Id``."""

    subject: str
    data: bytes
    headers: dict[str, str]
    num_delivered: int = 1
    msg_id: str | None = None
    stream: str = ""
    seq: int = 0


class PublishAck(msgspec.Struct, frozen=True, kw_only=True):
    """The stream's answer: where the message landed, and whether it was a dropped duplicate."""

    stream: str
    seq: int
    duplicate: bool = False


class ConsumerLag(msgspec.Struct, frozen=True, kw_only=True):
    """How far a durable consumer is behind: stored messages it has not been given yet
    (``pending``) and messages given but not acked yet (``unacked``, including those waiting for a
    redelivery). ``settled`` means everything stored so far is acked or dead-lettered."""

    pending: int
    unacked: int

    @property
    def settled(self) -> bool:
        return self.pending == 0 and self.unacked == 0


class Outgoing(msgspec.Struct, frozen=True, kw_only=True):
    """A message to publish; ``store.Output`` has the same fields and is accepted as is."""

    subject: str
    msg_id: str
    payload: bytes
    headers: dict[str, str] | None = None


class OutputLike(Protocol):
    """Anything with ``Outgoing``'s fields, such as ``store.Output`` (the bus does not import store)."""

    @property
    def subject(self) -> str: ...

    @property
    def msg_id(self) -> str: ...

    @property
    def payload(self) -> bytes: ...

    @property
    def headers(self) -> Mapping[str, str] | None: ...


# What ``publish`` sends: bytes as they are, anything else as msgspec JSON (a Struct, or a dict
# whose values are whatever JSON holds: hence ``Any``).
Payload = bytes | bytearray | memoryview | msgspec.Struct | Mapping[str, Any]
# What ``publish_many`` accepts for one message.
Message = Outgoing | OutputLike | tuple[str, str, Payload]

Handler = Callable[[Delivery], Awaitable[None]]
# A batch handler gets up to ``batch`` deliveries and returns None (ack all) or the exceptions of
# the deliveries that failed, by their index in the list (the rest are acked).
BatchHandler = Callable[[Sequence[Delivery]], Awaitable[Mapping[int, BaseException] | None]]


class ConsumerPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """How a durable consumer delivers. ``max_ack_pending`` defaults to a multiple of ``batch``
    (the server default is too low for batch consumption); ``ack_wait`` bounds one handler call
    before the server redelivers to another member of the group."""

    batch: int = 100
    max_deliver: int = 5
    backoff: tuple[float, ...] = DEFAULT_BACKOFF
    max_ack_pending: int | None = None
    ack_wait: float = 30.0
    concurrency: int = 1

    def __post_init__(self) -> None:
        if self.batch < 1 or self.max_deliver < 1 or self.concurrency < 1 or self.ack_wait <= 0:
            raise ValueError("batch, max_deliver, concurrency and ack_wait must be positive")
        if any(b < 0 for b in self.backoff):
            raise ValueError("backoff delays must be >= 0")

    @classmethod
    def build(
        cls,
        *,
        batch: int = 100,
        max_deliver: int = 5,
        backoff: Sequence[float] | None = None,
        max_ack_pending: int | None = None,
        ack_wait: float = 30.0,
        concurrency: int = 1,
    ) -> ConsumerPolicy:
        """The policy from ``consume``'s keyword arguments (``backoff=None`` = the default)."""
        return cls(
            batch=batch,
            max_deliver=max_deliver,
            max_ack_pending=max_ack_pending,
            ack_wait=ack_wait,
            concurrency=concurrency,
            backoff=DEFAULT_BACKOFF if backoff is None else tuple(backoff),
        )

    @property
    def ack_pending(self) -> int:
        return self.max_ack_pending if self.max_ack_pending is not None else max(1000, 4 * self.batch)

    def delay(self, num_delivered: int) -> float:
        """Seconds before redelivering a message that failed on delivery ``num_delivered``."""
        if not self.backoff:
            return 0.0
        return self.backoff[min(num_delivered, len(self.backoff)) - 1]


class Subscription(Protocol):
    """A running consumer loop. ``stop()`` finishes the handler calls in progress (cancelling them
    after ``grace`` seconds), gives back what was pulled but not started, and returns; unsettled
    messages are redelivered. Idempotent."""

    durable: str

    async def stop(self, grace: float = 10.0) -> None: ...

    @property
    def running(self) -> bool: ...


def encode_payload(event: Payload) -> bytes:
    """Bytes as they are; anything else (a msgspec Struct, a dict) as msgspec JSON."""
    if isinstance(event, bytes):
        return event
    if isinstance(event, bytearray | memoryview):
        return bytes(event)
    return msgspec.json.encode(event)


def as_outgoing(item: Message) -> Outgoing:
    """Accept ``Outgoing``, anything with ``subject``/``msg_id``/``payload`` (``store.Output``), or a
    ``(subject, msg_id, payload)`` tuple."""
    if isinstance(item, Outgoing):
        return item
    if isinstance(item, tuple):
        subject, msg_id, payload = item
        return Outgoing(subject=subject, msg_id=msg_id, payload=encode_payload(payload))
    return Outgoing(
        subject=item.subject,
        msg_id=item.msg_id,
        payload=encode_payload(item.payload),
        headers=dict(item.headers) if item.headers is not None else None,
    )


_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


def valid_name(name: str) -> bool:
    """Durable, stream and namespace names: one subject token of letters, digits, ``-`` and ``_``
    (``dlq.<durable>`` must be a valid subject)."""
    return bool(_NAME.match(name))


# Memoized: a pure function of two strings, asked about the same few hundred pairs hundreds of
# thousands of times in one simulated run (every consumer's filter against every subject).
@functools.lru_cache(maxsize=1 << 16)
def subject_covers(pattern: str, subject: str) -> bool:
    """True when every subject matched by ``subject`` (itself possibly with wildcards) is matched by
    ``pattern`` — e.g. ``sched.>`` covers ``sched.child.*``."""
    p, s = pattern.split("."), subject.split(".")
    for i, tok in enumerate(p):
        if tok == ">":
            return len(s) > i
        if i >= len(s) or s[i] == ">":
            return False
        if tok != "*" and tok != s[i]:
            return False
    return len(p) == len(s)


def find_stream(streams: Iterable[StreamSpec], subjects: Sequence[str]) -> StreamSpec | None:
    """The declared stream whose subjects cover all of ``subjects``, if any."""
    for spec in streams:
        if all(any(subject_covers(p, s) for p in spec.subjects) for s in subjects):
            return spec
    return None


def merged_headers(headers: Mapping[str, str] | None, msg_id: str) -> dict[str, str]:
    out = dict(headers) if headers else {}
    out[MSG_ID] = msg_id
    return out
