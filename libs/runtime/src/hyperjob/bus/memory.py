"""``InMemoryBus``: the ``Bus`` API over in-process streams, for tests and the simulator.

Same semantics as ``NatsBus`` where a handler can tell the difference: stream sequences, dedup
by ``Nats-Msg-Id`` within the duplicate window, latest-value streams, durable consumers shared by
every ``consume`` call with the same name, in-order delivery per consumer, redelivery after a
nak's delay or after ``ack_wait`` when a delivery was never settled, the retry/dead-letter rules
of ``dispatch``, watches (last value per subject, then every new message) and trace context in
headers. Not modelled: ``max_age`` and persistence.

Two ways to run:

- **on its own** (default): every consumer and watch is an asyncio task, like ``NatsBus``;
  time is ``time.monotonic`` unless a ``clock`` is given.
- **driven** (``driven=True``, the simulator): nothing runs by itself. The driver asks which
  ``members`` have a message ready (``ready()``), delivers one batch at a time (``step``) in the
  order it chooses, and reads ``next_due()`` to know when a redelivery falls due on its clock.
  A handler that raises ``InstanceCrash`` leaves its batch unsettled, exactly as a process that
  died mid-batch: the messages come back after ``ack_wait``.

``fail("publish", n)`` injects publish failures to exercise retry paths.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import heapq
import time
from collections.abc import Callable, Iterable, Mapping, Sequence

import structlog

from hyperjob.events.subjects import StreamDecl
from hyperjob.telemetry import inject

from .dispatch import MAX_PAYLOAD, Run, Verdict, dead_letter, hold_delay, runs_batches, runs_each, wire_size
from .errors import BusClosedError, ConsumerError, InstanceCrash, MessageTooLargeError, NoStreamError, PublishError
from .model import (
    DLQ_STREAM,
    MSG_ID,
    BatchHandler,
    ConsumerLag,
    ConsumerPolicy,
    Delivery,
    Handler,
    Message,
    Payload,
    PublishAck,
    StreamSpec,
    as_outgoing,
    as_stream_spec,
    encode_payload,
    find_stream,
    merged_headers,
    subject_covers,
    valid_name,
)

__all__ = ["InMemoryBus", "Member"]

_log = structlog.get_logger("bus")
Clock = Callable[[], float]


class _Stored:
    __slots__ = ("data", "gseq", "headers", "seq", "subject")

    def __init__(self, seq: int, subject: str, data: bytes, headers: dict[str, str], gseq: int = 0) -> None:
        self.seq, self.subject, self.data, self.headers, self.gseq = seq, subject, data, headers, gseq


class _Stream:
    def __init__(self, spec: StreamSpec, clock: Clock) -> None:
        self.spec = spec
        self.clock = clock
        self.msgs: dict[int, _Stored] = {}
        self.by_subject: dict[str, collections.deque[int]] = {}
        self.last_seq = 0
        self.seen: dict[str, tuple[int, float]] = {}
        self.times: dict[int, float] = {}

    def append(self, subject: str, data: bytes, headers: dict[str, str], gseq: int = 0) -> PublishAck:
        now = self.clock()
        msg_id = headers.get(MSG_ID)
        if msg_id is not None:
            prior = self.seen.get(msg_id)
            if prior is not None and now - prior[1] < self.spec.duplicate_window:
                return PublishAck(stream=self.spec.name, seq=prior[0], duplicate=True)
        self.last_seq += 1
        self.msgs[self.last_seq] = _Stored(self.last_seq, subject, data, headers, gseq)
        self.times[self.last_seq] = now
        seqs = self.by_subject.setdefault(subject, collections.deque())
        seqs.append(self.last_seq)
        if msg_id is not None:
            self.seen[msg_id] = (self.last_seq, now)
        while 0 < self.spec.max_msgs_per_subject < len(seqs):
            gone = seqs.popleft()
            del self.msgs[gone]
            self.times.pop(gone, None)
        return PublishAck(stream=self.spec.name, seq=self.last_seq)

    def purge(self, subject: str) -> int:
        seqs = self.by_subject.pop(subject, collections.deque())
        for seq in seqs:
            self.msgs.pop(seq, None)
            self.times.pop(seq, None)
        return len(seqs)

    def latest(self, subject_filter: str) -> list[_Stored]:
        """The last message of every subject matching the filter, in stream order."""
        seqs = sorted(q[-1] for s, q in self.by_subject.items() if q and subject_covers(subject_filter, s))
        return [self.msgs[q] for q in seqs]


class _Consumer:
    """Durable state shared by every member of one durable name: cursor, redeliveries, counts."""

    def __init__(self, stream: _Stream, filters: list[str], policy: ConsumerPolicy) -> None:
        self.stream = stream
        self.filters = filters
        self.policy = policy
        self.cursor = 0
        self.due: list[tuple[float, int]] = []
        self.delivered: dict[int, int] = {}
        self.holds: dict[int, int] = {}  # seq -> times held while a dependency was down

    def _matches(self, msg: _Stored) -> bool:
        return any(subject_covers(f, msg.subject) for f in self.filters)

    def take(self, limit: int, now: float) -> list[tuple[_Stored, int]]:
        """Up to ``limit`` messages ready at ``now``: due redeliveries first, then new ones."""
        out: list[tuple[_Stored, int]] = []
        while self.due and self.due[0][0] <= now and len(out) < limit:
            _, seq = heapq.heappop(self.due)
            if seq in self.stream.msgs:
                out.append(self._deliver(seq))
            else:
                self.delivered.pop(seq, None)
        while len(out) < limit and self.cursor < self.stream.last_seq:
            self.cursor += 1
            msg = self.stream.msgs.get(self.cursor)
            if msg is not None and self._matches(msg):
                out.append(self._deliver(self.cursor))
        return out

    def has_ready(self, now: float) -> bool:
        if self.due and self.due[0][0] <= now:
            return True
        self._skip()
        return self.cursor < self.stream.last_seq

    def _skip(self) -> None:
        """Move the cursor past messages this consumer will never get (other subjects, replaced
        latest values), so the next message after it is one to deliver."""
        msgs, last = self.stream.msgs, self.stream.last_seq
        while self.cursor < last:
            msg = msgs.get(self.cursor + 1)
            if msg is not None and self._matches(msg):
                return
            self.cursor += 1

    def next_due(self) -> float | None:
        return self.due[0][0] if self.due else None

    def next_ready(self, now: float) -> int | None:
        """The global sequence of the message ``take`` would hand over first (redeliveries first)."""
        if self.due and self.due[0][0] <= now and self.due[0][1] in self.stream.msgs:
            return self.stream.msgs[self.due[0][1]].gseq
        self._skip()
        return self.stream.msgs[self.cursor + 1].gseq if self.cursor < self.stream.last_seq else None

    def _deliver(self, seq: int) -> tuple[_Stored, int]:
        n = self.delivered.get(seq, 0) + 1
        self.delivered[seq] = n
        return self.stream.msgs[seq], n

    def settle(self, seq: int, verdict: Verdict, now: float) -> None:
        if verdict.action == "nak":
            heapq.heappush(self.due, (now + verdict.delay, seq))
        elif verdict.action == "hold":
            # A dependency is down: try again later as the same delivery (NatsBus keeps the
            # message in progress; here the count simply goes back).
            held = self.holds.get(seq, 0)
            self.holds[seq] = held + 1
            self.delivered[seq] = self.delivered.get(seq, 1) - 1
            heapq.heappush(self.due, (now + hold_delay(held), seq))
        else:
            self.delivered.pop(seq, None)
            self.holds.pop(seq, None)

    def requeue(self, seq: int, at: float) -> None:
        """Unsettled (the member stopped or crashed): redeliver at ``at`` (the ack wait)."""
        heapq.heappush(self.due, (at, seq))

    def redeliver_acked(self, seq: int, now: float) -> bool:
        """Deliver an already acked message again (an ack lost on the way): the simulator's duplicate."""
        if seq not in self.stream.msgs or seq > self.cursor:
            return False
        heapq.heappush(self.due, (now, seq))
        return True


class Member:
    """One consumer of a durable (or one watch): its handler, and how it is run.

    In driven mode the simulator calls ``step``; otherwise a task does. ``kind`` is
    ``"consume"``, ``"batch"`` or ``"watch"``."""

    def __init__(
        self,
        bus: InMemoryBus,
        durable: str,
        kind: str,
        *,
        consumer: _Consumer | None = None,
        run: Run | None = None,
        watch: tuple[_Stream, str] | None = None,
        on_value: Handler | None = None,
    ) -> None:
        self.durable = durable
        self.kind = kind
        self._bus = bus
        self._consumer = consumer
        self._handle = run  # a consumer's
        self._watch = watch
        self._on_value = on_value  # a watch's
        self._watch_cursor = watch[0].last_seq if watch else 0
        self._stopping = False
        self._idle = False
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event() if not bus.driven else None
        self.paused = False  # driven mode: a paused member (its instance is cut off) gets nothing

    # -- what the driver asks --------------------------------------------------------------

    @property
    def running(self) -> bool:
        if self._bus.driven:
            return not self._stopping
        return self._task is not None and not self._task.done()

    def ready(self) -> bool:
        if self._stopping or self.paused:
            return False
        if self._watch is not None:
            self._skip_watch()
            return self._watch_cursor < self._watch[0].last_seq
        assert self._consumer is not None
        return self._consumer.has_ready(self._bus.clock())

    def _skip_watch(self) -> None:
        assert self._watch is not None
        stream, flt = self._watch
        while self._watch_cursor < stream.last_seq:
            msg = stream.msgs.get(self._watch_cursor + 1)
            if msg is not None and subject_covers(flt, msg.subject):
                return
            self._watch_cursor += 1

    def next_due(self) -> float | None:
        return None if self._consumer is None or self._stopping else self._consumer.next_due()

    def next_ready(self) -> int | None:
        """The global publish sequence of the next message this member would get (None: none)."""
        if self._stopping or self.paused:
            return None
        if self._watch is not None:
            self._skip_watch()
            stream = self._watch[0]
            return stream.msgs[self._watch_cursor + 1].gseq if self._watch_cursor < stream.last_seq else None
        assert self._consumer is not None
        return self._consumer.next_ready(self._bus.clock())

    async def step(self) -> int:
        """Deliver one batch (a watch: every new message); returns how many were delivered."""
        if self._watch is not None:
            return await self._step_watch()
        assert self._consumer is not None
        batch = self._consumer.take(self._consumer.policy.batch if self.kind != "consume" else 1, self._bus.clock())
        if batch:
            await self._process(batch)
        return len(batch)

    @property
    def stream(self) -> str:
        """The stream this member reads."""
        if self._watch is not None:
            return self._watch[0].spec.name
        assert self._consumer is not None
        return self._consumer.stream.spec.name

    def duplicate(self, seq: int) -> bool:
        """Deliver an acked message again (the simulator's duplicate)."""
        return self._consumer is not None and self._consumer.redeliver_acked(seq, self._bus.clock())

    def recent(self, limit: int) -> list[int]:
        """The stream sequences of up to ``limit`` of the latest messages this consumer has been
        handed (the candidates for ``duplicate``); none for a watch."""
        consumer = self._consumer
        if consumer is None:
            return []
        out: list[int] = []
        seq = consumer.cursor
        while seq > 0 and len(out) < limit:
            msg = consumer.stream.msgs.get(seq)
            if msg is not None and consumer._matches(msg):  # noqa: SLF001 - its own consumer
                out.append(seq)
            seq -= 1
        return out

    # -- running on its own ------------------------------------------------------------------

    def start(self) -> None:
        if not self._bus.driven:
            self._task = asyncio.create_task(self._run(), name=f"consume-{self.durable}")

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
            if not self.ready():
                self._idle = True
                try:
                    wait = self.next_due()
                    timeout = 1.0 if wait is None else max(0.0, min(wait - self._bus.clock(), 1.0))
                    await self._wait(timeout)
                finally:
                    self._idle = False
                continue
            try:
                await self.step()
            except Exception:  # noqa: BLE001 - a bug here must not silently end the consumer
                _log.exception("consume_loop_error", durable=self.durable)
                await asyncio.sleep(0.5)

    def wake(self) -> None:
        if self._wake is not None:
            self._wake.set()

    async def _wait(self, timeout: float) -> None:
        assert self._wake is not None
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout)
        self._wake.clear()

    # -- delivering ----------------------------------------------------------------------------

    async def _step_watch(self) -> int:
        """Hand over the next new value (one at a time, so deliveries interleave in publish order)."""
        assert self._watch is not None and self._on_value is not None
        self._skip_watch()
        stream = self._watch[0]
        if self._watch_cursor >= stream.last_seq:
            return 0
        self._watch_cursor += 1
        await self._on_value(self._bus.delivery(stream, stream.msgs[self._watch_cursor], 1))
        return 1

    async def _process(self, batch: list[tuple[_Stored, int]]) -> None:
        consumer = self._consumer
        assert consumer is not None and self._handle is not None
        stream, policy = consumer.stream, consumer.policy
        deliveries = [self._bus.delivery(stream, m, n) for m, n in batch]
        unsettled = [m.seq for m, _ in batch]
        try:
            verdicts = await self._handle(deliveries, self.durable, policy)
        except (InstanceCrash, asyncio.CancelledError):
            # Died mid-batch: nothing was settled, the server redelivers after ack_wait.
            for seq in unsettled:
                consumer.requeue(seq, self._bus.clock() + self._bus.redelivery_after(policy))
            raise
        for (msg, _), delivery, verdict in zip(batch, deliveries, verdicts, strict=True):
            if verdict.action == "dlq":
                await self._bus.dead_letter_now(self.durable, delivery, verdict)
            consumer.settle(msg.seq, verdict, self._bus.clock())
        if any(v.action in ("nak", "hold") for v in verdicts):
            self._bus.notify()


class InMemoryBus:
    """In-process bus with ``NatsBus``'s API. ``InMemoryBus(streams)``; see the module docstring
    for ``clock`` and ``driven``."""

    def __init__(
        self,
        streams: Iterable[StreamSpec | StreamDecl] = (),
        *,
        clock: Clock | None = None,
        driven: bool = False,
        ack_wait: float | None = None,
    ) -> None:
        self.clock: Clock = clock or time.monotonic
        self.driven = driven
        self._ack_wait = ack_wait
        self._streams: dict[str, _Stream] = {}
        self._consumers: dict[tuple[str, str], _Consumer] = {}
        self._stream_of: dict[str, _Stream] = {}  # subject -> its stream, until streams are declared again
        self.members: list[Member] = []
        self._closed = False
        self._faults: dict[str, int] = {}
        self.published = 0  # every message stored, in order (the simulator's global sequence)
        self.observers: list[Callable[[str, str, bytes, dict[str, str]], None]] = []
        self.max_payload = MAX_PAYLOAD  # as a NATS server's default: payload and headers together
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
    async def connect(
        cls, url: str = "memory://", streams: Iterable[StreamSpec | StreamDecl] = (), **_: object
    ) -> InMemoryBus:
        return cls(streams)

    def declare(self, streams: Iterable[StreamSpec | StreamDecl]) -> None:
        """Create or replace streams (a replaced spec keeps the stored messages)."""
        specs = [as_stream_spec(s) for s in streams]
        self._stream_of = {}
        if find_stream([*(st.spec for st in self._streams.values()), *specs], ["dlq.x"]) is None:
            specs.append(DLQ_STREAM)
        for spec in specs:
            existing = self._streams.get(spec.name)
            if existing is None:
                self._streams[spec.name] = _Stream(spec, self.clock)
            else:
                existing.spec = spec

    def redelivery_after(self, policy: ConsumerPolicy) -> float:
        return policy.ack_wait if self._ack_wait is None else self._ack_wait

    def _stream_for(self, subjects: Sequence[str], stream: str | None) -> _Stream:
        if stream is not None:
            return self._streams[stream]
        if len(subjects) == 1 and (known := self._stream_of.get(subjects[0])) is not None:
            return known  # the same few subjects are published over and over
        spec = find_stream((s.spec for s in self._streams.values()), subjects)
        if spec is None:
            raise NoStreamError(", ".join(subjects))
        found = self._streams[spec.name]
        if len(subjects) == 1:
            self._stream_of[subjects[0]] = found
        return found

    # -- publish ----------------------------------------------------------------------------

    async def publish(
        self, subject: str, event: Payload, *, msg_id: str, headers: Mapping[str, str] | None = None
    ) -> PublishAck:
        """As ``NatsBus.publish``."""
        return self.publish_now(subject, event, msg_id=msg_id, headers=headers)

    def publish_now(
        self, subject: str, event: Payload, *, msg_id: str, headers: Mapping[str, str] | None = None
    ) -> PublishAck:
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
        data = encode_payload(event)
        if wire_size(subject, data, hdrs) > self.max_payload:
            raise MessageTooLargeError(subject, msg_id, f"over max_payload {self.max_payload}")
        ack = stream.append(subject, data, hdrs, self.published + 1)
        if not ack.duplicate:
            self.published += 1
            for observe in self.observers:
                observe(stream.spec.name, subject, data, hdrs)
        self.notify()
        return ack

    async def publish_many(self, messages: Iterable[Message], *, timeout: float = 10.0) -> list[PublishAck]:
        """As ``NatsBus.publish_many``, stopping at the first failure: what follows it is not
        stored, so a retry of the whole list keeps the order (the copies are dropped by id)."""
        acks: list[PublishAck] = []
        for m in messages:
            out = as_outgoing(m)
            acks.append(self.publish_now(out.subject, out.payload, msg_id=out.msg_id, headers=out.headers))
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
    ) -> Member:
        """As ``NatsBus.consume``; members with the same ``durable`` share one cursor."""
        policy = ConsumerPolicy.build(
            batch=batch,
            max_deliver=max_deliver,
            backoff=backoff,
            max_ack_pending=max_ack_pending,
            ack_wait=ack_wait,
            concurrency=concurrency,
        )
        return self._start(durable, subjects, runs_each(handler), policy, stream, kind="consume")

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
    ) -> Member:
        """As ``NatsBus.consume_batch``."""
        policy = ConsumerPolicy.build(
            batch=batch, max_deliver=max_deliver, backoff=backoff, max_ack_pending=max_ack_pending, ack_wait=ack_wait
        )
        return self._start(durable, subjects, runs_batches(handler), policy, stream, kind="batch")

    def _start(
        self,
        durable: str,
        subjects: str | Sequence[str],
        run: Run,
        policy: ConsumerPolicy,
        stream: str | None,
        *,
        kind: str,
    ) -> Member:
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
        member = Member(self, durable, kind, consumer=consumer, run=run)
        self.members.append(member)
        member.start()
        return member

    async def watch(self, subject_filter: str, handler: Handler, *, stream: str | None = None) -> Member:
        """As ``NatsBus.watch``: the last message of every matching subject is handed to
        ``handler`` before this returns, then every new one (no acks, nothing redelivered)."""
        target = self._stream_for([subject_filter], stream)
        for msg in target.latest(subject_filter):
            try:
                await handler(self.delivery(target, msg, 1))
            except Exception:  # noqa: BLE001 - as NatsBus: one bad value must not end the watch
                _log.exception("watch_handler_failed", subject=msg.subject)
        member = Member(self, f"watch-{subject_filter}", "watch", watch=(target, subject_filter), on_value=handler)
        self.members.append(member)
        member.start()
        return member

    def delivery(self, stream: _Stream, msg: _Stored, n: int) -> Delivery:
        return Delivery(
            subject=msg.subject,
            data=msg.data,
            headers=dict(msg.headers),
            num_delivered=n,
            msg_id=msg.headers.get(MSG_ID),
            stream=stream.spec.name,
            seq=msg.seq,
        )

    # -- latest values, operations ------------------------------------------------------------

    async def last(self, subject: str, *, stream: str | None = None) -> Delivery | None:
        """As ``NatsBus.last``."""
        target = self._stream_for([subject], stream)
        seqs = target.by_subject.get(subject)
        return self.delivery(target, target.msgs[seqs[-1]], 1) if seqs else None

    async def last_per_subject(self, subject_filter: str, *, stream: str | None = None) -> dict[str, Delivery]:
        """As ``NatsBus.last_per_subject``."""
        target = self._stream_for([subject_filter], stream)
        return {m.subject: self.delivery(target, m, 1) for m in target.latest(subject_filter)}

    async def stored(self, subject_filter: str, *, stream: str | None = None) -> list[tuple[Delivery, float]]:
        """As ``NatsBus.stored`` (the time is when the message was appended, on the bus's clock)."""
        target = self._stream_for([subject_filter], stream)
        return [
            (self.delivery(target, m, 1), target.times.get(q, 0.0))
            for q, m in sorted(target.msgs.items())
            if subject_covers(subject_filter, m.subject)
        ]

    async def message(self, stream: str, seq: int) -> Delivery | None:
        """As ``NatsBus.message``."""
        target = self._streams[stream]
        msg = target.msgs.get(seq)
        return None if msg is None else self.delivery(target, msg, 1)

    async def delete_message(self, stream: str, seq: int) -> bool:
        """As ``NatsBus.delete_message``."""
        target = self._streams[stream]
        msg = target.msgs.pop(seq, None)
        if msg is None:
            return False
        target.by_subject[msg.subject].remove(seq)
        return True

    async def purge(self, subject: str, *, stream: str | None = None) -> int:
        """As ``NatsBus.purge``."""
        return self._stream_for([subject], stream).purge(subject)

    async def lag(self, durable: str, subjects: str | Sequence[str], *, stream: str | None = None) -> ConsumerLag:
        """As ``NatsBus.lag``."""
        target = self._stream_for([subjects] if isinstance(subjects, str) else subjects, stream)
        consumer = self._consumers.get((target.spec.name, durable))
        if consumer is None:
            raise ConsumerError(durable, "consumer not found")
        pending = sum(1 for q, m in target.msgs.items() if q > consumer.cursor and consumer._matches(m))  # noqa: SLF001
        return ConsumerLag(pending=pending, unacked=len(consumer.delivered))

    async def reset_consumer(self, durable: str, subjects: str | Sequence[str], *, stream: str | None = None) -> bool:
        """As ``NatsBus.reset_consumer``."""
        target = self._stream_for([subjects] if isinstance(subjects, str) else subjects, stream)
        return self._consumers.pop((target.spec.name, durable), None) is not None

    def messages(self, stream: str) -> list[Delivery]:
        """Every message a stream holds now, in order (tests and the simulator's checks)."""
        target = self._streams[stream]
        return [self.delivery(target, m, 1) for _, m in sorted(target.msgs.items())]

    async def close(self) -> None:
        """Stop every member; further publishes raise ``BusClosedError``."""
        members, self.members = self.members, []
        for member in members:
            await member.stop()
        self._closed = True

    def forget(self, member: Member) -> None:
        """Drop a stopped member (the simulator restarting an instance)."""
        if member in self.members:
            self.members.remove(member)

    # -- waking ---------------------------------------------------------------------------

    def notify(self) -> None:
        if not self.driven:
            for member in self.members:
                member.wake()

    async def dead_letter(self, durable: str, delivery: Delivery, verdict: Verdict, *, watch: str = "") -> None:
        """As ``NatsBus.dead_letter``."""
        await self.dead_letter_now(durable, delivery, verdict, watch=watch)

    async def dead_letter_now(self, durable: str, delivery: Delivery, verdict: Verdict, *, watch: str = "") -> None:
        out = dead_letter(durable, delivery, verdict, max_payload=self.max_payload, watch=watch)
        _log.warning(
            "message_dead_lettered",
            durable=durable,
            subject=delivery.subject,
            msg_id=delivery.msg_id,
            reason=verdict.reason,
            error_type=verdict.error_type,
            error=verdict.error,
            num_delivered=delivery.num_delivered,
        )
        self.publish_now(out.subject, out.payload, msg_id=out.msg_id, headers=out.headers)
