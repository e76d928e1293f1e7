"""The handler pipeline every consumer runs, and periodic work.

A handler is ``async (message) -> Reaction``: it loads what it needs, decides in pure code, and
returns the writes and the messages to publish. The runtime then makes one atomic ``store.apply``
(writes + dedup marker + the outputs), publishes the outputs, and returns so the bus acks. On a
redelivery the marker exists: nothing is written and the outputs recorded the first time are
published again under the same ``Nats-Msg-Id`` (JetStream drops the copies), then acked.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

import msgspec
import structlog

import events
from bus import Bus, Delivery, RetryableError, Subscription, TerminalError
from events import Message, derive_id
from store import Output, Write

M = TypeVar("M", bound=Message)
Handler = Callable[[Any], Awaitable["Reaction"]]


class Reaction(msgspec.Struct, kw_only=True):
    """What handling one message decided: document writes and messages to publish, in order, and
    in-process work to do once both are done (``then``, e.g. waking a loop that reads the writes)."""

    writes: list[Write] = []
    outputs: list[tuple[str, Message]] = []
    after: list[Callable[[], None]] = []

    def publish(self, subject: str, message: Message) -> Reaction:
        self.outputs.append((subject, message))
        return self

    def then(self, work: Callable[[], None]) -> Reaction:
        self.after.append(work)
        return self


class Cause(msgspec.Struct, frozen=True, kw_only=True):
    """What caused a handler's work when it is not a message: a timer, a scheduling cycle.
    Its ``event_id`` must be deterministic for the work (the dedup marker is keyed by it)."""

    event_id: str
    correlation_id: str = ""


def emit(message_type: type[M], cause: Message | Cause, step: str, producer: str, **fields: Any) -> M:
    """A message caused by ``cause``: its id is derived (same on every retry), its correlation id
    is inherited, so one user request's whole chain shares one correlation id."""
    return message_type(
        event_id=derive_id(cause.event_id, step),
        occurred_at=time.time(),
        producer=producer,
        correlation_id=cause.correlation_id or cause.event_id,
        causation_id=cause.event_id,
        **fields,
    )


class Runtime:
    """One service's connections and loops. Built by ``process.run_service``; tests build it directly."""

    def __init__(self, name: str, bus: Bus, store: Any) -> None:
        self.name = name
        self.bus = bus
        self.store = store
        self.log = structlog.get_logger(name)
        self._subscriptions: list[Subscription] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._unpublished: list[Any] = []
        self._publisher: asyncio.Task[None] | None = None

    async def subscribe(self, durable: str, subjects: str | Sequence[str], handlers: Mapping[type[Message], Handler],
                        **policy: Any) -> None:
        """Consume ``subjects`` with a durable consumer shared by every replica of this service."""
        decoder = events.decoder(*handlers)
        tags = {msgspec.inspect.type_info(t).tag for t in handlers}  # type: ignore[attr-defined]

        async def on_delivery(delivery: Delivery) -> None:
            message = self._decode(decoder, tags, delivery)
            if message is None:
                return
            reaction = await handlers[type(message)](message)
            await self.commit(durable, message.event_id, reaction)

        self._subscriptions.append(await self.bus.consume(durable, subjects, on_delivery, **policy))

    def _decode(self, decoder: msgspec.json.Decoder[Any], tags: set[str], delivery: Delivery) -> Message | None:
        try:
            return decoder.decode(delivery.data)  # type: ignore[no-any-return]
        except msgspec.ValidationError as exc:
            tag = _tag_of(delivery.data)
            if tag not in tags:
                # Another consumer's message on a shared subject, or a newer version: not ours.
                self.log.warning("message_type_not_handled", subject=delivery.subject, type=tag)
                return None
            raise TerminalError(f"malformed {tag}: {exc}") from None
        except msgspec.DecodeError as exc:
            raise TerminalError(f"not JSON: {exc}") from None

    async def commit(self, consumer: str, event_id: str, reaction: Reaction) -> None:
        """One atomic write with the dedup marker, then publish what it recorded."""
        outputs = [Output(subject=subject, msg_id=message.event_id, payload=events.encode(message))
                   for subject, message in reaction.outputs]
        result = await self.store.apply(consumer, event_id, reaction.writes, outputs)
        if result.conflict is not None:
            # Someone else changed the state we decided on: decide again on the new state.
            raise RetryableError(f"version conflict on {result.conflict.kind}/{result.conflict.name}")
        if result.duplicate:
            self.log.debug("duplicate_delivery", consumer=consumer, event_id=event_id)
        if result.outputs:
            try:
                await self.bus.publish_many(result.outputs)
            except Exception:
                # The write is committed, so its outputs must go out. A message is redelivered and
                # republishes them from the marker, but periodic work (a Cause) never comes back
                # with the same id: keep publishing them in the background until it works (their
                # ids are deterministic, so JetStream drops any copy).
                self._publish_later(result.outputs)
                raise
        for work in reaction.after:
            work()

    def _publish_later(self, outputs: Sequence[Any]) -> None:
        self._unpublished.extend(outputs)
        if self._publisher is None or self._publisher.done():
            self._publisher = asyncio.get_running_loop().create_task(self._republish(), name="republish")
            self._tasks.append(self._publisher)

    async def _republish(self) -> None:
        delay = 0.1
        while self._unpublished:
            await asyncio.sleep(delay)
            batch = list(self._unpublished)
            try:
                await self.bus.publish_many(batch)
            except Exception as exc:  # still unreachable: try again later
                self.log.warning("republish_failed", outputs=len(batch), error=str(exc))
                delay = min(delay * 2, 5.0)
                continue
            del self._unpublished[:len(batch)]

    def every(self, period: float, work: Callable[[], Awaitable[None]], name: str) -> None:
        """Run ``work`` every ``period`` seconds; a failure is logged and the next round still runs."""

        async def loop() -> None:
            while True:
                started = time.monotonic()
                try:
                    await work()
                except asyncio.CancelledError:
                    raise
                except Exception:  # a periodic job must survive one bad round
                    self.log.exception("periodic_work_failed", work=name)
                await asyncio.sleep(max(0.0, period - (time.monotonic() - started)))

        self._tasks.append(asyncio.get_running_loop().create_task(loop(), name=name))

    def spawn(self, loop: Callable[[], Awaitable[None]], name: str) -> None:
        """Run a long-lived loop of the service's own (cancelled on stop)."""
        self._tasks.append(asyncio.get_running_loop().create_task(loop(), name=name))

    async def stop(self) -> None:
        for subscription in self._subscriptions:
            await subscription.stop()
        pending = set(self._tasks)
        while pending:
            # Cancel again until every loop has ended: a library call can swallow one cancellation
            # (Python 3.11's asyncio.wait_for loses it when the awaited result lands at the same
            # moment), and a loop that lost it would run on and hang stop() forever.
            for task in pending:
                task.cancel()
            _, pending = await asyncio.wait(pending, timeout=0.5)
        for task in self._tasks:
            if not task.cancelled():
                task.exception()  # retrieved: a loop that died of an error was logged already
        self._subscriptions.clear()
        self._tasks.clear()


def _tag_of(data: bytes) -> str:
    try:
        return str(msgspec.json.decode(data, type=dict[str, Any]).get("type", "?"))
    except msgspec.DecodeError:
        return "?"
