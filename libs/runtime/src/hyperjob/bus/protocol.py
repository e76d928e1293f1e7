"""The ``Bus`` protocol both ``NatsBus`` and ``InMemoryBus`` implement; services depend on this."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

from .dispatch import Verdict
from .model import BatchHandler, ConsumerLag, Delivery, Handler, Message, Payload, PublishAck, Subscription


class Bus(Protocol):
    """Publish/consume over durable streams, watch latest values. See ``NatsBus`` for each
    method's contract."""

    async def publish(
        self, subject: str, event: Payload, *, msg_id: str, headers: Mapping[str, str] | None = None
    ) -> PublishAck: ...

    async def publish_many(self, messages: Iterable[Message], *, timeout: float = 10.0) -> list[PublishAck]: ...

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
    ) -> Subscription: ...

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
    ) -> Subscription: ...

    async def watch(self, subject_filter: str, handler: Handler, *, stream: str | None = None) -> Subscription: ...

    async def last(self, subject: str, *, stream: str | None = None) -> Delivery | None: ...

    async def last_per_subject(self, subject_filter: str, *, stream: str | None = None) -> dict[str, Delivery]: ...

    async def stored(self, subject_filter: str, *, stream: str | None = None) -> list[tuple[Delivery, float]]: ...

    async def purge(self, subject: str, *, stream: str | None = None) -> int: ...

    async def lag(self, durable: str, subjects: str | Sequence[str], *, stream: str | None = None) -> ConsumerLag: ...

    async def reset_consumer(
        self, durable: str, subjects: str | Sequence[str], *, stream: str | None = None
    ) -> bool: ...

    async def dead_letter(self, durable: str, delivery: Delivery, verdict: Verdict, *, watch: str = "") -> None: ...

    async def close(self) -> None: ...
