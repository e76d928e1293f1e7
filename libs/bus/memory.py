"""``InMemoryBus``: the ``Bus`` API over in-process streams, for unit tests and the simulator.

Same semantics as ``NatsBus`` where a handler can tell the difference: stream sequences, dedup by
``Nats-Msg-Id`` within the duplicate window, latest-value streams, durable consumers shared by
every ``consume`` call with the same name, the retry/dead-letter rules of ``dispatch`` (with real
``asyncio`` delays) and trace context in headers. Not modelled: ``max_age``, ``ack_wait`` timeouts
(a handler that never returns blocks its loop), persistence. ``fail("publish", n)`` injects
publish failures to exercise retry paths.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import heapq
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import structlog

from telemetry import inject

from .dispatch import Verdict, dead_letter, run_batch_handler, run_handler
from .errors import BusClosedError, ConsumerError, NoStreamError, PublishError
from .model import (DLQ_STREAM, MSG_ID, BatchHandler, ConsumerLag, ConsumerPolicy, Delivery, Handler, PublishAck,
                    StreamSpec, as_outgoing, as_stream_spec, encode_payload, find_stream, merged_headers,
                    subject_covers, valid_name)

__all__ = ["InMemoryBus"]

_log = structlog.get_logger("bus")


class _Stored:
    __slots__ = ("data", "headers", "seq", "subject")

    def __init__(self, seq: int, subject: str, data: bytes, headers: dict[str, str]) -> None:
        self.seq, self.subject, self.data, self.headers = seq, subject, data, headers


class _Stream:
    def __init__(self, spec: StreamSpec) -> None:
        self.spec = spec
        self.msgs: dict[int, _Stored] = {}
        self.by_subject: dict[str, collections.deque[int]] = {}
        self.last_seq = 0
        self.seen: dict[str, tuple[int, float]] = {}

    def append(self, subject: str, data: bytes, headers: dict[str, str]) -> PublishAck:
        now = time.monotonic()
        msg_id = headers.get(MSG_ID)
        if msg_id is not None:
            prior = self.seen.get(msg_id)
            if prior is not None and now - prior[1] < self.spec.duplicate_window:
                return PublishAck(stream=self.spec.name, seq=prior[0], duplicate=True)
        self.last_seq += 1
        self.msgs[self.last_seq] = _Stored(self.last_seq, subject, data, headers)
        seqs = self.by_subject.setdefault(subject, collections.deque())
        seqs.append(self.last_seq)
        if msg_id is not None:
            self.seen[msg_id] = (self.last_seq, now)
        while 0 < self.spec.max_msgs_per_subject < len(seqs):
            del self.msgs[seqs.popleft()]
        return PublishAck(stream=self.spec.name, seq=self.last_seq)


class _Consumer:
    """Durable state shared by every loop of one durable name: cursor, redelivery queue, counts."""

    def __init__(self, stream: _Stream, filters: list[str], policy: ConsumerPolicy) -> None:
        self.stream = stream
        self.filters = filters
        self.policy = policy
        self.cursor = 0
        self.due: list[tuple[float, int]] = []
        self.delivered: dict[int, int] = {}

    def take(self, limit: int) -> tuple[list[tuple[_Stored, int]], float | None]:
        """Up to ``limit`` messages ready now, and how long until the next redelivery is due."""
        out: list[tuple[_Stored, int]] = []
        now = time.monotonic()
        while self.due and self.due[0][0] <= now and len(out) < limit:
            _, seq = heapq.heappop(self.due)
            if seq in self.stream.msgs:
                out.append(self._deliver(seq))
        while len(out) < limit and self.cursor < self.stream.last_seq:
            self.cursor += 1
            msg = self.stream.msgs.get(self.cursor)
            if msg is not None and any(subject_covers(f, msg.subject) for f in self.filters):
                out.append(self._deliver(self.cursor))
        wait = max(0.0, self.due[0][0] - now) if self.due else None
        return out, wait

    def _deliver(self, seq: int) -> tuple[_Stored, int]:
        n = self.delivered.get(seq, 0) + 1
        self.delivered[seq] = n
        return self.stream.msgs[seq], n

    def settle(self, seq: int, verdict: Verdict) -> None:
        if verdict.action == "nak":
            heapq.heappush(self.due, (time.monotonic() + verdict.delay, seq))
        else:
            self.delivered.pop(seq, None)

    def requeue(self, seq: int) -> None:
        heapq.heappush(self.due, (time.monotonic(), seq))


class InMemoryBus:
    """In-process bus with ``NatsBus``'s API. ``await InMemoryBus.connect("memory://", streams)`` or
    ``InMemoryBus(streams)``."""

    def __init__(self, streams: Iterable[Any] = ()) -> None:
        self._streams: dict[str, _Stream] = {}
        self._consumers: dict[tuple[str, str], _Consumer] = {}
        self._loops: list[_MemLoop] = []
        self._changed = asyncio.Condition()
        self._closed = False
        self._faults: dict[str, int] = {}
        self.declare(streams)

    def fail(self, op: str = "publish", times: int = 1) -> None:
        """Fault injection for handler tests: the next ``times`` publishes (``op="publish"``, also
        each message of ``publish_many``) raise ``PublishError`` and store nothing."""
        self._faults[op] = self._faults.get(op, 0) + times

    def _take_fault(self, op: str) -> bool:
        if self._faults.get(op, 0) > 0:
            self._faults[op] -= 1
            return True
        return False

    @classmethod
    async def connect(cls, url: str = "memory://", streams: Iterable[Any] = (), **_: Any) -> InMemoryBus:
        return cls(streams)

    def declare(self, streams: Iterable[Any]) -> None:
        """Create or replace streams (a replaced spec keeps the stored messages)."""
        specs = [as_stream_spec(s) for s in streams]
        if find_stream([*(st.spec for st in self._streams.values()), *specs], ["dlq.x"]) is None:
            specs.append(DLQ_STREAM)
        for spec in specs:
            existing = self._streams.get(spec.name)
            if existing is None:
                self._streams[spec.name] = _Stream(spec)
            else:
                existing.spec = spec

    def _stream_for(self, subjects: Sequence[str], stream: str | None) -> _Stream:
        if stream is not None:
            return self._streams[stream]
        spec = find_stream((s.spec for s in self._streams.values()), subjects)
        if spec is None:
            raise NoStreamError(", ".join(subjects))
        return self._streams[spec.name]

    async def publish(self, subject: str, event: Any, *, msg_id: str,
                      headers: Mapping[str, str] | None = None) -> PublishAck:
        """As ``NatsBus.publish``."""
        if self._closed:
            raise BusClosedError("bus is closed")
        if self._take_fault("publish"):
            raise PublishError(subject, msg_id, "injected fault")
        hdrs = merged_headers(headers, msg_id)
        if "traceparent" not in hdrs:
            inject(hdrs)
        try:
            stream = self._stream_for([subject], None)
        except NoStreamError as exc:
            raise PublishError(subject, msg_id, str(exc)) from exc
        ack = stream.append(subject, encode_payload(event), hdrs)
        async with self._changed:
            self._changed.notify_all()
        return ack

    async def publish_many(self, messages: Iterable[Any], *, timeout: float = 10.0) -> list[PublishAck]:
        """As ``NatsBus.publish_many``."""
        acks: list[PublishAck] = []
        first: PublishError | None = None
        for m in messages:
            out = as_outgoing(m)
            try:
                acks.append(await self.publish(out.subject, out.payload, msg_id=out.msg_id, headers=out.headers))
            except PublishError as exc:
                first = first or exc
        if first is not None:
            raise first
        return acks

    async def consume(self, durable: str, subjects: str | Sequence[str], handler: Handler, *,
                      stream: str | None = None, batch: int = 100, max_deliver: int = 5,
                      backoff: Sequence[float] | None = None, max_ack_pending: int | None = None,
                      ack_wait: float = 30.0, concurrency: int = 1) -> _MemLoop:
        """As ``NatsBus.consume``; loops with the same ``durable`` share one cursor."""
        policy = ConsumerPolicy.build(batch=batch, max_deliver=max_deliver, backoff=backoff,
                                      max_ack_pending=max_ack_pending, ack_wait=ack_wait, concurrency=concurrency)
        return self._start(durable, subjects, handler, policy, stream, batched=False)

    async def consume_batch(self, durable: str, subjects: str | Sequence[str], handler: BatchHandler, *,
                            stream: str | None = None, batch: int = 100, max_deliver: int = 5,
                            backoff: Sequence[float] | None = None, max_ack_pending: int | None = None,
                            ack_wait: float = 30.0) -> _MemLoop:
        """As ``NatsBus.consume_batch``."""
        policy = ConsumerPolicy.build(batch=batch, max_deliver=max_deliver, backoff=backoff,
                                      max_ack_pending=max_ack_pending, ack_wait=ack_wait)
        return self._start(durable, subjects, handler, policy, stream, batched=True)

    def _start(self, durable: str, subjects: str | Sequence[str], handler: Handler | BatchHandler,
               policy: ConsumerPolicy, stream: str | None, *, batched: bool) -> _MemLoop:
        if not valid_name(durable):
            raise ConsumerError(durable, "a durable name is letters, digits, '-' and '_'")
        filters = [subjects] if isinstance(subjects, str) else list(subjects)
        target = self._stream_for(filters, stream)
        key = (target.spec.name, durable)
        consumer = self._consumers.get(key)
        if consumer is None:
            consumer = self._consumers[key] = _Consumer(target, filters, policy)
        else:
            consumer.filters, consumer.policy = filters, policy
        loop = _MemLoop(self, consumer, durable, handler, batched=batched)
        self._loops.append(loop)
        loop.start()
        return loop

    async def last(self, subject: str, *, stream: str | None = None) -> Delivery | None:
        """As ``NatsBus.last``."""
        target = self._stream_for([subject], stream)
        seqs = target.by_subject.get(subject)
        return self._delivery(target, target.msgs[seqs[-1]], 1) if seqs else None

    async def last_per_subject(self, subject_filter: str, *, stream: str | None = None) -> dict[str, Delivery]:
        """As ``NatsBus.last_per_subject``."""
        target = self._stream_for([subject_filter], stream)
        latest = sorted(seqs[-1] for subject, seqs in target.by_subject.items()
                        if seqs and subject_covers(subject_filter, subject))
        return {target.msgs[q].subject: self._delivery(target, target.msgs[q], 1) for q in latest}

    def _delivery(self, stream: _Stream, msg: _Stored, n: int) -> Delivery:
        return Delivery(subject=msg.subject, data=msg.data, headers=dict(msg.headers), num_delivered=n,
                        msg_id=msg.headers.get(MSG_ID), stream=stream.spec.name, seq=msg.seq)

    async def lag(self, durable: str, subjects: str | Sequence[str], *, stream: str | None = None) -> ConsumerLag:
        """As ``NatsBus.lag``."""
        target = self._stream_for([subjects] if isinstance(subjects, str) else subjects, stream)
        consumer = self._consumers.get((target.spec.name, durable))
        if consumer is None:
            raise ConsumerError(durable, "consumer not found")
        pending = sum(1 for q, m in target.msgs.items()
                      if q > consumer.cursor and any(subject_covers(f, m.subject) for f in consumer.filters))
        return ConsumerLag(pending=pending, unacked=len(consumer.delivered))

    async def reset_consumer(self, durable: str, subjects: str | Sequence[str], *,
                             stream: str | None = None) -> bool:
        """As ``NatsBus.reset_consumer``."""
        target = self._stream_for([subjects] if isinstance(subjects, str) else subjects, stream)
        return self._consumers.pop((target.spec.name, durable), None) is not None

    async def close(self) -> None:
        """Stop every loop; further publishes raise ``BusClosedError``."""
        loops, self._loops = self._loops, []
        for loop in loops:
            await loop.stop()
        self._closed = True

    async def _wait_for_change(self, timeout: float | None) -> None:
        async with self._changed:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout)

    async def _dead_letter(self, durable: str, delivery: Delivery, verdict: Verdict) -> None:
        out = dead_letter(durable, delivery, verdict)
        _log.warning("message_dead_lettered", durable=durable, subject=delivery.subject, msg_id=delivery.msg_id,
                     reason=verdict.reason, error_type=verdict.error_type, num_delivered=delivery.num_delivered)
        await self.publish(out.subject, out.payload, msg_id=out.msg_id, headers=out.headers)


class _MemLoop:
    def __init__(self, bus: InMemoryBus, consumer: _Consumer, durable: str, handler: Handler | BatchHandler, *,
                 batched: bool) -> None:
        self.durable = durable
        self._bus = bus
        self._consumer = consumer
        self._handler = handler
        self._batched = batched
        self._stopping = False
        self._idle = False
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"consume-{self.durable}")

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def stop(self, grace: float = 10.0) -> None:
        self._stopping = True
        task, self._task = self._task, None
        if task is None:
            return
        if self._idle:
            task.cancel()
        else:
            done, _ = await asyncio.wait({task}, timeout=grace)
            if not done:
                task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    async def _run(self) -> None:
        while not self._stopping:
            batch, wait = self._consumer.take(self._consumer.policy.batch)
            if not batch:
                self._idle = True
                try:
                    await self._bus._wait_for_change(1.0 if wait is None else min(wait, 1.0))  # noqa: SLF001
                finally:
                    self._idle = False
                continue
            try:
                await self._process(batch)
            except Exception:  # noqa: BLE001 - a bug here must not silently end the consumer
                _log.exception("consume_loop_error", durable=self.durable)
                await asyncio.sleep(0.5)

    async def _process(self, batch: list[tuple[_Stored, int]]) -> None:
        pending = [msg.seq for msg, _ in batch]
        if self._batched:
            try:
                deliveries = [self._bus._delivery(self._consumer.stream, m, n) for m, n in batch]  # noqa: SLF001
                verdicts = await run_batch_handler(self._handler, deliveries, self.durable,  # type: ignore[arg-type]
                                                   self._consumer.policy)
                pending.clear()
            finally:
                for seq in pending:
                    self._consumer.requeue(seq)
            for (msg, _), delivery, verdict in zip(batch, deliveries, verdicts, strict=True):
                await self._settle(msg, delivery, verdict)
            return
        try:
            sem = asyncio.Semaphore(self._consumer.policy.concurrency)

            async def one(msg: _Stored, n: int) -> None:
                async with sem:
                    if self._stopping:
                        return  # not started: requeued below, like NatsBus gives it back
                    await self._one(msg, n)
                pending.remove(msg.seq)
            await asyncio.gather(*(one(m, n) for m, n in batch))
        finally:
            for seq in pending:  # cancelled mid-batch: as if ack_wait expired
                self._consumer.requeue(seq)

    async def _one(self, msg: _Stored, n: int) -> None:
        delivery = self._bus._delivery(self._consumer.stream, msg, n)  # noqa: SLF001
        verdict = await run_handler(self._handler, delivery, self.durable,  # type: ignore[arg-type]
                                    self._consumer.policy)
        await self._settle(msg, delivery, verdict)

    async def _settle(self, msg: _Stored, delivery: Delivery, verdict: Verdict) -> None:
        if verdict.action == "dlq":
            await self._bus._dead_letter(self.durable, delivery, verdict)  # noqa: SLF001
        self._consumer.settle(msg.seq, verdict)
        if verdict.action == "nak":
            async with self._bus._changed:  # noqa: SLF001 - wake idle loops to schedule the redelivery
                self._bus._changed.notify_all()  # noqa: SLF001
