"""The runtime every service instance runs on: its state, its inputs, its clock, its one commit.

A service declares, in its ``build``: its tables (``table``), its durable inputs
(``subscribe``: commands and events, taken in batches), its latest-value inputs (``watch``),
its rounds (``every``) and what to redo after its state is (re)loaded (``on_load``: derived
indexes, timers). ``start`` then restores the state if the store lost it, loads it, fills the
watched projections, and only then starts consuming and running rounds.

Handling a batch of messages (ADR 0002, ADR 0004): decode each (undecodable → dead letter),
run the handlers in order — they read and change the tables in memory and return a
``Reaction`` (messages to publish, binds and unbinds) — then one ``store.commit`` with every
dedup marker, every queued write (version-checked), the binds and the outputs; then publish the
outputs and the changelog (``state.<instance>.<kind>.<name>``); then the bus acks. If the commit
is refused (a marker already there, a version conflict from another replica, a refused bind, a
wiped store) or a handler raised, the tables are reloaded from the store and the batch is
handled again without what cannot be handled, so memory never keeps an uncommitted change.
Outputs are recorded in the store's outbox with the commit and removed once published; after a
crash they are published again (their ids are deterministic, JetStream drops the copies): see
``outbox``. The changelog and the restore from it: ``changelog``.

Replicas: several processes may run one instance (the same name, so the same durable consumers
and documents), but one at a time, the holder of its lease (``lease``, when ``lease_ttl`` is set).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar

import msgspec
import structlog
from opentelemetry import trace

from hyperjob import events
from hyperjob.bus import Bus, Delivery, RetryableError, Subscription, Verdict
from hyperjob.events import Envelope, Message, derive_id, subjects
from hyperjob.store import Binding, Commit, CommitResult, Output, Store, Unbind
from hyperjob.telemetry.spans import ServiceTracing

from .changelog import changelog_outputs, latest_documents
from .inputs import Reader, Unreadable
from .lease import Lease
from .metrics import ACTIVE, BUS
from .outbox import Outbox
from .projection import Projection, Table
from .timers import Clock, Rank, Timers, Work

__all__ = ["Reaction", "Runtime"]

M = TypeVar("M", bound=Message)
T = TypeVar("T")
P = ParamSpec("P")
# A handler takes the message type it is registered under (``{JobPlaced: on_placed}``): a mapping
# cannot tie each key to its value's parameter type, hence ``Any`` (the ``Reader`` decodes exactly
# those types, so each handler gets its own).
Handler = Callable[[Any], "Reaction | None | Awaitable[Reaction | None]"]
WatchHandler = Callable[[Any], None]
# Told of a payload no handler can take (it is dead-lettered all the same): the splitter answers
# a malformed request with a rejection naming what is wrong.
UnreadableHandler = Callable[[Delivery, Exception], Awaitable[None]]
MAX_ATTEMPTS = 5
# A replica of the same instance committed meanwhile (``stale``): no conflict over the batch itself,
# so it is handled again on reloaded memory, more times, after a short random pause that lets the
# busier replica go first (two replicas refusing each other in step would otherwise never end).
MAX_STALE_ATTEMPTS = 50


class Reaction(msgspec.Struct, kw_only=True):
    """What handling one message decided besides its table writes: messages to publish (in
    order), and pods to bind or unbind (the cluster-scheduler's compare-and-set)."""

    outputs: list[tuple[str, Message]] = []
    binds: list[Binding] = []
    unbinds: list[Unbind] = []
    after: list[Callable[[], Awaitable[None]]] = []  # in-process work once committed and published

    def publish(self, subject: str, message: Message) -> Reaction:
        self.outputs.append((subject, message))
        return self

    def extend(self, other: Reaction | None) -> Reaction:
        if other is not None:
            self.outputs += other.outputs
            self.binds += other.binds
            self.unbinds += other.unbinds
            self.after += other.after
        return self


_ADMIN = Reader([events.AdminCommand])


def _durable(instance: str) -> str:
    """A durable consumer's name from an instance name (letters, digits, ``-`` and ``_`` only)."""
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in instance)


class _Subscription(msgspec.Struct, kw_only=True):
    durable: str
    subjects: list[str]
    handlers: dict[type, Handler]
    batch: int
    max_deliver: int
    backoff: Sequence[float] | None
    ack_wait: float
    on_unreadable: UnreadableHandler | None = None
    concerns: Callable[[Message], bool] | None = None


class Runtime:
    """One service instance's connections, state and time. Built by ``process.run_service`` live
    and by the simulator; tests build it directly."""

    def __init__(
        self,
        service: str,
        instance: str,
        bus: Bus,
        store: Store,
        *,
        clock: Clock,
        timers: Timers,
        fault: Callable[[str], None] | None = None,
        changelog: bool = True,
        lease_ttl: float = 0.0,
    ) -> None:
        self.service = service
        self.instance = instance
        self.bus = bus
        self.store = store
        self.clock = clock
        self.timers = timers
        self.fault = fault or (lambda point: None)
        self.changelog = changelog
        self.log = structlog.get_logger(service)
        # One trace per HyperJob: each message's work in its object's trace, and what it emits too.
        self.tracing = ServiceTracing(service)
        self.projection = Projection()
        self._subscriptions: list[_Subscription] = []
        self._watches: list[tuple[str, dict[type, WatchHandler]]] = []
        self._on_load: list[Callable[[], Awaitable[None] | None]] = []
        self._on_stop: list[Callable[[], Awaitable[None]]] = []
        self._before_commit: list[Callable[[], Reaction | None]] = []
        self._members: list[Subscription] = []
        self._binding_clusters: list[str] = []
        self._stale = False
        self._epoch = -1  # the store's commit count of this instance when memory was loaded
        self.outbox = Outbox(bus)
        self.started = False
        # 0: no lease (the simulator, a test's lone instance); else replicas take turns (``lease``).
        self.lease_ttl = lease_ttl
        self.lease = Lease(store, instance, lease_ttl, self.log)
        self._lease_keeper: asyncio.Task[None] | None = None
        self._activation: asyncio.Task[None] | None = None
        self.active = False  # consuming and running rounds (the lease holder)
        # Timers that came due while this replica was not active (key → when, work): run once it is.
        self._held: dict[str, tuple[float, Work]] = {}
        self.metrics_url = ""  # where its /metrics, /healthz, /readyz are served (live only)
        # Live, CPU-long pure work (a scheduling session) runs in a worker thread (``offloaded``) so
        # the event loop keeps receiving and reporting meanwhile; the simulator keeps it inline.
        self.offload = False
        # One unit of work at a time: a batch, a round or a timer changes memory and commits it
        # before the next one reads it (they interleave only at awaits, so this is cheap).
        self.lock = asyncio.Lock()

    # -- declarations ------------------------------------------------------------------------------

    def table(self, kind: str, type_: type[T]) -> Table[T]:
        return self.projection.table(kind, type_)

    def subscribe(
        self,
        durable: str,
        subjects: str | Sequence[str],
        handlers: Mapping[type, Handler],
        *,
        batch: int = 100,
        max_deliver: int = 5,
        backoff: Sequence[float] | None = None,
        ack_wait: float = 30.0,
        on_unreadable: UnreadableHandler | None = None,
        concerns: Callable[[Message], bool] | None = None,
    ) -> None:
        """Consume ``subjects`` with the durable ``durable`` (shared by every replica), in batches.
        ``on_unreadable`` hears of each payload that no handler can take before it is dead-lettered.
        ``concerns`` is a cheap look at each decoded message: a first delivery it says False of is
        acknowledged without a handler, a span or a commit (a consumer of shared news that acts on
        little of it); a redelivery is always handled."""
        self._subscriptions.append(
            _Subscription(
                durable=durable,
                subjects=[subjects] if isinstance(subjects, str) else list(subjects),
                handlers=dict(handlers),
                batch=batch,
                max_deliver=max_deliver,
                backoff=backoff,
                ack_wait=ack_wait,
                on_unreadable=on_unreadable,
                concerns=concerns,
            )
        )

    def watch(self, subject_filter: str, handlers: Mapping[type, WatchHandler]) -> None:
        """Follow the latest value of every subject matching ``subject_filter``; ``start`` waits
        until the existing values are in. A handler only updates in-memory state (never commits)."""
        self._watches.append((subject_filter, dict(handlers)))

    def every(self, period: float, work: Work, name: str, *, rank: int = 0, exclusive: bool = True) -> None:
        """A round every ``period`` (and soon after a ``kick``); it runs alone (``lock``) unless
        ``exclusive`` is False: a round that only reads memory and publishes (a summary, a beat)
        then goes on while a long unit of work holds the lock."""
        work = BUS.timed(name, work)  # hyperjob_round_duration_seconds (servicekit.metrics)
        work = self._exclusive(work) if exclusive else self._when_active(work)
        self.timers.every(period, work, f"{self.instance}/{name}", rank=rank)

    def kick(self, name: str) -> None:
        self.timers.kick(f"{self.instance}/{name}")

    def at(self, when: float, key: str, work: Work) -> None:
        """``work`` at ``when`` (a later ``at`` with the same key replaces it); it runs alone. One
        due before this replica is active (re-armed by the load of an activation, which goes on
        consuming before the replica counts as active) waits for the activation: never dropped."""
        self._held.pop(key, None)
        self.timers.at(when, f"{self.instance}/{key}", self._held_until_active(when, key, work))

    def _held_until_active(self, when: float, key: str, work: Work) -> Work:
        async def run() -> None:
            async with self.lock:
                if self.active:
                    await work()
                else:
                    self._held[key] = (when, work)

        return run

    def _release_held(self) -> None:
        """Arm again, now that this replica is active, the timers that came due before."""
        held, self._held = self._held, {}
        for key, (when, work) in held.items():
            self.at(when, key, work)

    def _exclusive(self, work: Work) -> Work:
        async def run() -> None:
            async with self.lock:
                if self.active:
                    await work()

        return run

    def _when_active(self, work: Work) -> Work:
        """``work`` when this replica runs the instance (a standby's rounds do nothing)."""

        async def run() -> None:
            if self.active:
                await work()

        return run

    async def offloaded(self, work: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``work(*args, **kwargs)``: in a worker thread when ``offload`` is set (live), else inline."""
        if self.offload:
            return await asyncio.to_thread(work, *args, **kwargs)
        return work(*args, **kwargs)

    def cancel(self, key: str) -> None:
        self.timers.cancel(f"{self.instance}/{key}")

    def own_bindings(self, cluster: str) -> None:
        """This instance owns ``cluster``'s resource accounting (a rebuild restores it too)."""
        self._binding_clusters.append(cluster)

    def on_load(self, callback: Callable[[], Awaitable[None] | None]) -> None:
        """Run after every (re)load of the tables: rebuild indexes, re-arm timers from state."""
        self._on_load.append(callback)

    # -- messages ----------------------------------------------------------------------------------

    def now(self) -> float:
        return self.clock.now()

    def envelope(self, cause: Message | str, step: str) -> Envelope:
        """The envelope of a message caused by ``cause`` (a message, or a cause id for rounds and
        timers): its id derived (the same on every retry), its correlation id inherited. The
        message is built as its own struct, so mypy checks its fields:
        ``events.RequestAccepted(**rt.envelope(msg, "answer"), kind=..., name=...)``; inside a
        work span it is published with that span's context."""
        cause_id = cause if isinstance(cause, str) else cause.event_id
        correlation = "" if isinstance(cause, str) else (cause.correlation_id or cause.event_id)
        event_id = derive_id(cause_id, step)
        self.tracing.note(event_id)
        return Envelope(
            event_id=event_id,
            occurred_at=self.now(),
            producer=self.service,
            correlation_id=correlation or cause_id,
            causation_id=cause_id,
        )

    def span(self, name: str, key: str, **attributes: object) -> contextlib.AbstractContextManager[trace.Span]:
        """A span of a round's or timer's work on the object ``key`` (a HyperJob, a job), in that
        object's trace: ``place child``, ``admit``, ``bind gang``. What is emitted inside joins it."""
        return self.tracing.span(name, key, **attributes)

    # -- life --------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Run the instance (restore, load, consume; ``_activate``), or, when another replica holds
        its lease, wait as a standby and run it once the lease is free."""
        self.timers.every(1.0, self._exclusive(self.outbox.flush), f"{self.instance}/outbox", rank=Rank.HOUSEKEEPING)
        if not self.lease_ttl:
            await self._activate()
        else:
            if await self.lease.take():
                await self._activate()
            else:
                self.log.info("standby", instance=self.instance, why="another replica holds the lease")
            keep = self.lease.keep(self._running, self._take_over, self._deactivate)
            self._lease_keeper = asyncio.create_task(keep, name=f"{self.instance}/lease")
        self.timers.start()
        self.started = True

    async def _activate(self) -> None:
        """Restore the state if the store lost it, load it, fill the watches, then consume."""
        await self._restore_if_wiped()
        await self._load()
        await self.outbox.resend(await self.store.outbox(self.instance))
        for subject_filter, handlers in self._watches:
            self._members.append(await self.bus.watch(subject_filter, self._watch_handler(subject_filter, handlers)))
        for sub in self._subscriptions:
            self._members.append(
                await self.bus.consume_batch(
                    sub.durable,
                    sub.subjects,
                    self._batch_handler(sub),
                    batch=sub.batch,
                    max_deliver=sub.max_deliver,
                    backoff=sub.backoff,
                    ack_wait=sub.ack_wait,
                )
            )
        self._members.append(
            await self.bus.consume(
                f"{_durable(self.instance)}-admin", subjects.admin(self.instance), self._on_admin, max_deliver=3
            )
        )
        self.active = True
        ACTIVE.set(1)
        self._release_held()
        started = events.InstanceStarted(
            **self.envelope(self.instance, f"started/{self.now()!r}"),
            instance=self.instance,
            service=self.service,
            started_at=self.now(),
        )
        await self.bus.publish(subjects.instance(self.instance), events.encode(started), msg_id=started.event_id)

    async def _deactivate(self) -> None:
        """Another replica holds the lease: stop consuming and forget the state (loaded again when
        this replica runs the instance again)."""
        await self._stop_consuming()
        async with self.lock:
            self.projection.discard()
            self._stale = True

    async def _stop_consuming(self) -> None:
        """What is in flight finishes; what is unacknowledged goes to whoever consumes next."""
        self.active = False
        ACTIVE.set(0)
        await _cancelled(self._activation)
        self._activation = None
        for member in self._members:
            await member.stop()
        self._members.clear()

    def _running(self) -> bool:
        """Whether this replica runs the instance or is becoming its runner."""
        return self.active or self._activation is not None

    def _take_over(self) -> None:
        """The lease is this replica's now: activate beside the renewals (a long load must not
        let the lease lapse)."""
        self._activation = asyncio.create_task(self._activate_once())

    async def _activate_once(self) -> None:
        try:
            await self._activate()
        except Exception:  # noqa: BLE001 - the store or bus is away: the next renewal tries again
            self.log.exception("activation_failed", instance=self.instance)
            self._activation = None  # so that stopping what did start does not cancel this task
            await self._stop_consuming()
        finally:
            self._activation = None

    def before_commit(self, callback: Callable[[], Reaction | None]) -> None:
        """Run at the end of every unit of work, before its commit: what it adds is committed and
        published with the unit (e.g. one summary per changed object instead of one per message)."""
        self._before_commit.append(callback)

    def on_stop(self, callback: Callable[[], Awaitable[None]]) -> None:
        """Run when the instance stops (kill the processes it started, ...)."""
        self._on_stop.append(callback)

    async def stop(self) -> None:
        await _cancelled(self._lease_keeper)
        self._lease_keeper = None
        for callback in self._on_stop:
            await callback()
        await self._stop_consuming()
        await self.timers.stop()
        if self.lease_ttl:
            await self.lease.release()
        self.started = False

    @property
    def members(self) -> list[Subscription]:
        return list(self._members)

    def inputs(self) -> list[tuple[str, list[str], tuple[type, ...]]]:
        """What this instance consumes, as declared: ``(durable or "watch", subject filters, the
        message types handled)``, its admin consumer included (the fuzz tests' bus surface)."""
        out: list[tuple[str, list[str], tuple[type, ...]]] = [
            (sub.durable, list(sub.subjects), tuple(sub.handlers)) for sub in self._subscriptions
        ]
        out += [("watch", [flt], tuple(handlers)) for flt, handlers in self._watches]
        out.append((f"{_durable(self.instance)}-admin", [subjects.admin(self.instance)], (events.AdminCommand,)))
        return out

    async def _load(self) -> None:
        # The epoch first: a commit another replica makes while the tables load makes this one's
        # next commit refused (and memory reloaded), never missed.
        self._held.clear()  # re-armed from the state by the load's callbacks
        self._epoch = await self.store.epoch(self.instance)
        await self.projection.load(self.store)
        self._stale = False
        for callback in self._on_load:
            result = callback()
            if inspect.isawaitable(result):
                await result

    async def ensure_fresh(self) -> None:
        """Reload the tables if an earlier failure left memory ahead of the store."""
        if self._stale:
            self.projection.discard()
            await self._load()

    async def reload(self) -> None:
        """Forget what memory holds beyond the store (a refused commit, a failed handler)."""
        self.projection.discard()
        self._stale = True
        await self._load()

    # -- restore from the changelog (ADR 0004 §4) ---------------------------------------------------

    async def _restore_if_wiped(self) -> None:
        if await self.store.alive(self.instance):
            return
        restored = await self.restore_from_changelog() if self.changelog else 0
        await self.store.mark_alive(self.instance)
        if restored:
            self.log.warning("state_restored_from_changelog", instance=self.instance, documents=restored)

    async def _on_admin(self, delivery: Delivery) -> None:
        command = _ADMIN.read(delivery.data)
        if isinstance(command, events.AdminCommand) and command.action == "rebuild":
            await self.rebuild()

    async def rebuild(self) -> None:
        """Forget this instance's state in the store and rebuild it from its changelog, then
        reload it: ``hyperjob admin rebuild``. Nothing is handled meanwhile."""
        async with self.lock:
            await self.store.forget(self.instance, list(self.projection.tables), self._binding_clusters)
            await self._restore_if_wiped()
            await self.reload()
            self.log.warning("state_rebuilt", instance=self.instance)

    async def restore_from_changelog(self) -> int:
        """Put back every document this instance's changelog holds; returns how many."""
        docs = await latest_documents(self.bus, self.instance, self._restorable)
        await self.store.restore(docs)
        return len(docs)

    async def _restorable(self, kind: str, delivery: Delivery) -> bool:
        """Whether a changelog entry decodes as its table's type: a poisoned entry restored into
        the store would make every later load fail, so it is dead-lettered and left out."""
        table = self.projection.tables.get(kind)
        if table is None:
            return True  # bindings: the store's own format, checked by the store
        try:
            msgspec.json.decode(delivery.data, type=table.type)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
            await self._dead_letter_value(delivery, "undecodable", exc, watch="state")
            return False
        return True

    async def _dead_letter_value(self, delivery: Delivery, reason: str, exc: BaseException, *, watch: str) -> None:
        """Dead-letter a latest value this instance cannot use (there is nothing to ack): once per
        stream position (the letter's id derives from it), and never fatal."""
        verdict = Verdict("dlq", reason=reason, error_type=type(exc).__name__, error=str(exc))
        try:
            await self.bus.dead_letter(_durable(self.instance), delivery, verdict, watch=watch)
        except Exception as failure:  # noqa: BLE001 - the value is skipped either way; seen again at the next start
            self.log.warning("dead_letter_failed", subject=delivery.subject, error=str(failure))

    # -- handling a batch ----------------------------------------------------------------------------

    def _batch_handler(self, sub: _Subscription) -> Callable[[Sequence[Delivery]], Awaitable[dict[int, BaseException]]]:
        reader = Reader(sub.handlers)

        async def on_batch(deliveries: Sequence[Delivery]) -> dict[int, BaseException]:
            if self.lease_ttl and not self.active and self._activation is None:
                # A consumer that outlived this replica's turn (its start was cut short): not handled
                # here, so that the replica holding the lease gets the batch again.
                raise RetryableError(f"{self.instance}: this replica does not hold the lease")
            async with self.lock:
                started, failures = time.perf_counter(), None  # None: the batch raised, all failed
                try:
                    failures = await self._on_batch(sub, reader, deliveries)
                    return failures
                finally:  # the bus metrics (servicekit.metrics)
                    BUS.batch(deliveries, failures, time.perf_counter() - started)

        return on_batch

    async def _on_batch(
        self, sub: _Subscription, reader: Reader, deliveries: Sequence[Delivery]
    ) -> dict[int, BaseException]:
        failures: dict[int, BaseException] = {}
        batch: list[tuple[int, Message]] = []
        headers = {i: d.headers for i, d in enumerate(deliveries)}
        ids: set[str] = set()
        for i, delivery in enumerate(deliveries):
            try:
                message = reader.read(delivery.data, delivery.subject)
            except Unreadable as exc:  # dead-lettered at once with its reason; the rest goes on
                failures[i] = exc
                if sub.on_unreadable is not None:
                    await sub.on_unreadable(delivery, exc)
                continue
            if message is None:  # another consumer's message on a shared subject
                self.log.debug("message_type_not_handled", subject=delivery.subject)
            elif sub.concerns is not None and delivery.num_delivered == 1 and not sub.concerns(message):
                # News of nothing this service keeps: acknowledged as it is. Not a redelivery: one
                # might be of a message whose commit went in but whose outputs did not go out, and
                # only its handling (refused as a duplicate) publishes them again.
                continue
            elif message.event_id not in ids:  # a copy in the same batch: once
                ids.add(message.event_id)
                if isinstance(message, events.Request):  # where NATS checked its sender (ADR 0006)
                    message = msgspec.structs.replace(message, received_on=delivery.subject)
                batch.append((i, message))
        await self._handle(sub, batch, failures, headers)
        return failures

    async def _handle(
        self,
        sub: _Subscription,
        batch: list[tuple[int, Message]],
        failures: dict[int, BaseException],
        headers: Mapping[int, Mapping[str, str]] | None = None,
    ) -> None:
        if self._stale:
            await self._load()
        done: set[int] = set()  # committed before (a redelivery): acked without handling
        stale = 0
        for attempt in range(MAX_ATTEMPTS + MAX_STALE_ATTEMPTS):
            if attempt - stale >= MAX_ATTEMPTS:
                break
            live = [(i, m) for i, m in batch if i not in failures and i not in done]
            if not live:
                return
            reaction = Reaction()
            failed = False
            for i, message in live:
                try:
                    with self.tracing.handling(message, (headers or {}).get(i)):
                        reaction.extend(await _call(sub.handlers[type(message)], message))
                except Exception as exc:  # noqa: BLE001 - the message's own failure, settled by the bus
                    failures[i] = exc
                    failed = True
                    break
            if failed:
                await self.reload()
                continue
            self._finish_unit(reaction)
            ids = [m.event_id for _, m in live]
            result = await self._commit(sub.durable, ids, reaction, unit=ids[0])
            if result.ok:
                return
            await self._after_refusal(result)
            if result.refusal == "duplicate":
                done |= await self._skip_processed(sub.durable, live)
            elif result.refusal == "stale" and stale < MAX_STALE_ATTEMPTS:
                stale += 1
                await asyncio.sleep(random.uniform(0.0, 0.02 * min(stale, 10)))
        raise RetryableError(f"{sub.durable}: could not commit after {MAX_ATTEMPTS} attempts")

    async def _skip_processed(self, durable: str, live: list[tuple[int, Message]]) -> set[int]:
        """Messages committed before (a redelivery): publish again what they recorded."""
        seen = await self.store.seen(durable, [m.event_id for _, m in live], self.instance)
        for outputs in {id(o): o for o in seen.values()}.values():
            await self.bus.publish_many(outputs)
        return {i for i, m in live if m.event_id in seen}

    async def _after_refusal(self, result: CommitResult) -> None:
        if result.refusal == "wiped":
            self.log.warning("store_wiped", instance=self.instance)
            await self._restore_if_wiped()
        elif result.refusal != "duplicate":
            # Another replica's commit or a version conflict: handled again at once, resolves itself.
            self.log.debug("commit_refused", instance=self.instance, why=result.describe())
        await self.reload()

    # -- committing ----------------------------------------------------------------------------------

    async def commit(self, cause: str, reaction: Reaction | None = None, *, consumer: str = "") -> bool:
        """Commit what a round or a timer changed (no message caused it): the queued writes and
        ``reaction``. ``cause`` is a deterministic id of the work (output ids derive from it).
        Returns False when the commit was refused (the tables are reloaded; decide again)."""
        reaction = reaction or Reaction()
        if self._stale:
            self.projection.discard()
            await self._load()
            return False
        self._finish_unit(reaction)
        result = await self._commit(consumer or self.instance, [], reaction, unit=cause)
        if result.ok:
            return True
        await self._after_refusal(result)
        return False

    def _finish_unit(self, reaction: Reaction) -> None:
        for callback in self._before_commit:
            reaction.extend(callback())

    async def _commit(self, consumer: str, event_ids: list[str], reaction: Reaction, *, unit: str) -> CommitResult:
        if self.outbox.behind:
            # Outputs of an earlier commit whose publish failed go out first (``outbox``: in
            # commit order). Still failing: commit nothing now.
            try:
                await self.outbox.flush()
            except BaseException:
                self._stale = True  # this unit's changes are in memory only: reload before the next
                raise
        writes = self.projection.take()
        outputs = [
            Output(
                subject=subject,
                msg_id=message.event_id,
                payload=events.encode(message),
                headers=self.tracing.headers_for(message),
            )
            for subject, message in reaction.outputs
        ]
        self.tracing.forget_emitted()
        if self.changelog:
            outputs += changelog_outputs(self.instance, writes, reaction.binds, reaction.unbinds, unit)
        if not (event_ids or writes or reaction.binds or reaction.unbinds or outputs):
            return CommitResult()
        okey = f"o:{self.instance}:{unit}" if outputs else ""
        published = self.outbox.take_published()
        commit = Commit(
            consumer=consumer,
            event_ids=event_ids,
            writes=writes,
            binds=reaction.binds,
            unbinds=reaction.unbinds,
            outputs=outputs,
            sentinel=self.instance,
            outbox_key=okey,
            outbox=self.instance,
            published=published,
            epoch=self._epoch,
        )
        try:
            result = await self.store.commit(commit)
        except BaseException:
            self.outbox.give_back(published)
            self._stale = True
            raise
        if not result.ok:
            self.outbox.give_back(published)
            return result
        self._epoch = result.epoch
        self.projection.confirm(writes, result.versions)
        self.fault("after-commit")
        await self.outbox.publish(okey, outputs)
        self.fault("after-publish")
        for work in reaction.after:
            await work()
        return result

    # -- watches -------------------------------------------------------------------------------------

    def _watch_handler(
        self, subject_filter: str, handlers: dict[type, WatchHandler]
    ) -> Callable[[Delivery], Awaitable[None]]:
        reader = Reader(handlers)

        async def on_value(delivery: Delivery) -> None:
            if not delivery.data:
                return  # a tombstone without a payload: nothing to decode
            try:
                value = reader.read(delivery.data)
            except Unreadable as exc:
                # Still the latest value of its subject: skipped, and dead-lettered once, at
                # every start, until a good value replaces it or the letter is purged.
                self.log.warning("watched_value_unreadable", subject=delivery.subject, error=str(exc))
                await self._dead_letter_value(delivery, exc.reason, exc, watch=subject_filter)
                return
            if value is None:
                return
            self.tracing.learn(value, delivery.headers)
            try:
                handlers[type(value)](value)
            except Exception as exc:  # noqa: BLE001 - one value must not stop the watch or the instance
                self.log.error("watched_value_failed", subject=delivery.subject, exc_info=exc)
                await self._dead_letter_value(delivery, "handler-failed", exc, watch=subject_filter)

        return on_value


async def _cancelled(task: asyncio.Task[None] | None) -> None:
    """Cancel ``task`` (if any) and wait until it has ended."""
    if task is not None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def _call(handler: Handler, message: Message) -> Reaction | None:
    result = handler(message)
    if inspect.isawaitable(result):
        return await result
    return result
