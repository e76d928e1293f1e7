"""The pull loop behind ``NatsBus.consume``: JetStream pull requests by hand.

nats-py's ``fetch`` costs a task and a round of futures per message (10-17k msg/s here); sending
our own pull requests (``$JS.API.CONSUMER.MSG.NEXT.<stream>.<durable>``) to one inbox whose
callback only buffers, and acking by publishing to each message's reply subject, is several
times faster. The loop keeps about two batches requested ahead, so the
server streams the next batch while the handler works on this one.

Credit accounting: each request asks for ``n`` messages and expires after ``EXPIRES`` seconds.
A delivered message uses one credit of the oldest open request; a 408/409 status closes the
oldest request; a request silent past its expiry (lost on a reconnect) is forgotten.

A refused pull (409 "Consumer Deleted", 503: nobody serves the durable) is said in ``refused``
(``/readyz`` reports it) and, after ``REFUSED_PAUSE``, the durable is created again from where
this member left off: the lowest sequence it has not finished (one nak'd or still buffered), else
the one after the last it saw; a member that saw nothing re-creates it as first declared.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

import msgspec
import nats.errors
import structlog
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription as NatsSubscription

from .dispatch import Run, Verdict, hold_delay
from .model import ConsumerPolicy, Delivery

__all__ = ["PullLoop"]

_log = structlog.get_logger("bus")
EXPIRES = 5.0
REFUSED_PAUSE = 1.0  # after the server refuses a pull (consumer deleted, no JetStream), wait this long
_NATS_ERRORS = (nats.errors.Error, asyncio.TimeoutError)


class _Request:
    __slots__ = ("deadline", "remaining")

    def __init__(self, remaining: int, deadline: float) -> None:
        self.remaining = remaining
        self.deadline = deadline


class PullLoop:
    """One member of a durable consumer group. Built and started by ``NatsBus.consume``."""

    def __init__(
        self,
        bus: _BusSide,
        nc: NatsClient,
        stream: str,
        durable: str,
        run: Run,
        policy: ConsumerPolicy,
        *,
        batched: bool = False,
        recreate: Callable[[int | None], Awaitable[bool]] | None = None,
    ) -> None:
        self.durable = durable
        self._bus = bus
        self._nc = nc
        self._next_subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{durable}"
        self._handle = run
        self._batched = batched
        self._policy = policy
        self._buffer: collections.deque[Msg] = collections.deque()
        self._requests: collections.deque[_Request] = collections.deque()
        self._arrived = asyncio.Event()
        self._stopping = False
        self._refused_until = 0.0
        self.refused = ""  # why the server refuses this member's pulls ("" while it serves them)
        self._recreate = recreate  # the durable again, delivering from a stream sequence (None: as declared)
        self._next_seq = 0  # one past the highest stream sequence delivered here (0: none yet)
        self._naked: set[int] = set()  # sequences handed back (nak), to be delivered again
        self._inbox = ""
        self._sub: NatsSubscription | None = None
        self._task: asyncio.Task[None] | None = None
        self._keeper: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._inbox = self._nc.new_inbox()
        self._sub = await self._nc.subscribe(
            self._inbox, cb=self._on_msg, pending_msgs_limit=-1, pending_bytes_limit=-1
        )
        self._task = asyncio.create_task(self._run(), name=f"consume-{self.durable}")
        self._keeper = asyncio.create_task(self._keepalive(), name=f"keepalive-{self.durable}")

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    async def stop(self, grace: float = 10.0) -> None:
        """Finish the handler calls in progress (cancel them after ``grace`` seconds), nak what was
        pulled but not started so another member gets it at once, then stop. A cancelled call's
        message is redelivered after ``ack_wait``. Idempotent."""
        self._stopping = True
        self._arrived.set()
        task, self._task = self._task, None
        if task is not None:
            done, _ = await asyncio.wait({task}, timeout=grace)
            if not done:
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        keeper, self._keeper = self._keeper, None
        if keeper is not None:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
        if self._sub is not None:
            with contextlib.suppress(*_NATS_ERRORS):
                await self._sub.unsubscribe()
            self._sub = None
        # Hand what we pulled but never started back at once, instead of after ack_wait.
        while self._buffer:
            with contextlib.suppress(*_NATS_ERRORS, nats.errors.MsgAlreadyAckdError):
                await self._buffer.popleft().nak()

    def reconnected(self) -> None:
        """Pull requests die with the connection: forget their credit and ask again at once."""
        self._requests.clear()
        self._arrived.set()

    async def _on_msg(self, msg: Msg) -> None:
        status = msg.headers.get("Status") if msg.headers else None
        if status is None:
            if self._requests:
                head = self._requests[0]
                head.remaining -= 1
                if head.remaining <= 0:
                    self._requests.popleft()
            self._buffer.append(msg)
            self.refused = ""
            self._arrived.set()
        elif status in ("408", "409", "404", "503"):
            # The oldest request ended: expired (408), no messages (404), or refused (409: e.g.
            # consumer deleted, server shutdown; 503: no JetStream responder).
            if self._requests:
                self._requests.popleft()
            description = msg.headers.get("Description", "") if msg.headers else ""
            if status == "503" or (status == "409" and "Exceeded" not in description):
                _log.warning("pull_refused", durable=self.durable, status=status, description=description)
                self._refused_until = time.monotonic() + REFUSED_PAUSE
                self.refused = f"pull refused: {status} {description or 'no responders'}"
            else:
                self.refused = ""
            self._arrived.set()

    def _credit(self) -> int:
        now = time.monotonic()
        while self._requests and self._requests[0].deadline < now:
            self._requests.popleft()
        return sum(r.remaining for r in self._requests)

    async def _top_up(self) -> None:
        if time.monotonic() < self._refused_until:
            return
        want = 2 * self._policy.batch - self._credit() - len(self._buffer)
        if want < max(1, self._policy.batch // 2):
            return
        body = msgspec.json.encode({"batch": want, "expires": int(EXPIRES * 1e9)})
        self._requests.append(_Request(want, time.monotonic() + EXPIRES + 1.0))
        await self._nc.publish(self._next_subject, body, reply=self._inbox)

    async def _run(self) -> None:
        while not self._stopping:
            try:
                if self.refused and self._recreate is not None and time.monotonic() >= self._refused_until:
                    await self._recreate_durable(self._recreate)
                await self._top_up()
            except nats.errors.ConnectionClosedError:
                return
            except _NATS_ERRORS as exc:
                _log.warning("pull_request_failed", durable=self.durable, error=str(exc) or type(exc).__name__)
                await asyncio.sleep(0.5)
                continue
            if not self._buffer:
                self._arrived.clear()
                pause = max(0.0, self._refused_until - time.monotonic())
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._arrived.wait(), pause or EXPIRES)
                continue
            try:
                await self._process(min(len(self._buffer), self._policy.batch))
            except Exception:  # noqa: BLE001 - a bug here must not silently end the consumer
                _log.exception("consume_loop_error", durable=self.durable)
                await asyncio.sleep(0.5)

    async def _recreate_durable(self, recreate: Callable[[int | None], Awaitable[bool]]) -> None:
        """Create the durable again (deleted by hand, or lost with the server's state). Messages
        still buffered are handled as they are (their acks go nowhere) and delivered again from
        ``start``: the handlers' dedup markers give them one effect. A durable that still exists (the
        refusal had another cause) is left as it is; failing (JetStream away), the next pull says
        whether it is served."""
        unfinished = min([*self._naked, *(m.metadata.sequence.stream for m in self._buffer)], default=0)
        start = unfinished or self._next_seq or None
        try:
            created = await recreate(start)
        except _NATS_ERRORS as exc:
            _log.warning("consumer_recreate_failed", durable=self.durable, error=str(exc) or type(exc).__name__)
        else:
            if created:
                _log.warning("consumer_recreated", durable=self.durable, start_seq=start)
                self._requests.clear()
                self.refused = ""
        self._refused_until = 0.0

    async def _process(self, n: int) -> None:
        # Messages leave the buffer only when their handler starts, so ``_keepalive`` covers
        # every message still waiting for its turn.
        if self._batched:
            await self._batch([self._buffer.popleft() for _ in range(n)])
        elif self._policy.concurrency == 1:
            for _ in range(n):
                if self._stopping:
                    break
                await self._one(self._buffer.popleft())
        else:
            sem = asyncio.Semaphore(self._policy.concurrency)

            async def guarded() -> None:
                async with sem:
                    if not self._stopping:
                        await self._one(self._buffer.popleft())

            await asyncio.gather(*(guarded() for _ in range(n)))
        _log.debug("batch_consumed", durable=self.durable, size=n)

    async def _keepalive(self) -> None:
        """Tell the server that buffered messages are being worked on (``+WPI``) every third of
        ``ack_wait``, so a slow batch does not get its queued tail redelivered elsewhere. A message
        whose handler has started gets no extension: a handler hung past ``ack_wait`` is redelivered."""
        period = self._policy.ack_wait / 3
        while True:
            await asyncio.sleep(period)
            for msg in list(self._buffer):
                with contextlib.suppress(*_NATS_ERRORS, nats.errors.MsgAlreadyAckdError):
                    await msg.in_progress()

    async def _one(self, msg: Msg) -> None:
        delivery = self._bus.delivery(msg)

        async def run(indexes: list[int]) -> list[Verdict]:
            return await self._handle([delivery], self.durable, self._policy)

        verdicts = await self._until_not_held([msg], run)
        await self._settle(msg, delivery, verdicts[0])

    async def _batch(self, msgs: list[Msg]) -> None:
        deliveries = [self._bus.delivery(m) for m in msgs]

        async def run(indexes: list[int]) -> list[Verdict]:
            return await self._handle([deliveries[i] for i in indexes], self.durable, self._policy)

        verdicts = await self._until_not_held(msgs, run)
        for msg, delivery, verdict in zip(msgs, deliveries, verdicts, strict=True):
            await self._settle(msg, delivery, verdict)

    async def _until_not_held(
        self, msgs: list[Msg], run: Callable[[list[int]], Awaitable[list[Verdict]]]
    ) -> list[Verdict]:
        """Run the handler over ``msgs``; while it says a dependency is down (``hold``), keep those
        messages in progress and run it again over them after a back-off, as the same delivery:
        an outage of Redis or NATS never uses up a message's ``max_deliver``. Stopping turns the
        holds into naks (the message comes back, counted once more)."""
        verdicts = await run(list(range(len(msgs))))
        holds = 0
        while held := [i for i, v in enumerate(verdicts) if v.action == "hold"]:
            delay = hold_delay(holds)
            holds += 1
            await self._wait_in_progress([msgs[i] for i in held], delay)
            if self._stopping:
                for i in held:
                    verdicts[i] = Verdict("nak", delay=delay)
                break
            for i, verdict in zip(held, await run(held), strict=True):
                verdicts[i] = verdict
        return verdicts

    async def _wait_in_progress(self, msgs: list[Msg], delay: float) -> None:
        """Wait ``delay`` seconds telling the server the messages are being worked on (``+WPI``),
        so it neither redelivers them elsewhere nor counts another delivery."""
        deadline = time.monotonic() + delay
        step = max(0.05, min(delay, self._policy.ack_wait / 3))
        while not self._stopping and (left := deadline - time.monotonic()) > 0:
            for msg in msgs:
                with contextlib.suppress(*_NATS_ERRORS, nats.errors.MsgAlreadyAckdError):
                    await msg.in_progress()
            await asyncio.sleep(min(step, left))

    async def _settle(self, msg: Msg, delivery: Delivery, verdict: Verdict) -> None:
        self._next_seq = max(self._next_seq, delivery.seq + 1)
        if verdict.action in ("nak", "hold"):
            self._naked.add(delivery.seq)
        else:
            self._naked.discard(delivery.seq)
        try:
            await self._bus.settle(msg, delivery, self.durable, verdict)
        except Exception as exc:  # noqa: BLE001 - unsettled: the server redelivers after ack_wait
            _log.warning("settle_failed", durable=self.durable, subject=delivery.subject, error=str(exc))


class _BusSide(Protocol):
    """What the loop needs from the bus (``NatsBus`` implements it)."""

    def delivery(self, msg: Msg) -> Delivery: ...

    async def settle(self, msg: Msg, delivery: Delivery, durable: str, verdict: Verdict) -> None: ...
