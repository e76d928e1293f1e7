"""Helpers for the service tests: run a real service (its own ``build`` on a ``Runtime`` over the
fixtures' ``NatsBus`` and ``RedisStore``, wall clock, asyncio timers) in-process, send it catalogue
messages, and look at what it stored and published, always with a bounded deadline.

Test modules import it as a module of the ``tests`` package (pytest puts the repository on
``sys.path``: ``pythonpath`` in pyproject.toml), as the unit suites import their builders::

    from tests.service import service_helpers as sh

``Probe`` reads the streams with a connection of its own (ephemeral consumers, nothing acked), so
it sees exactly what JetStream stored — a republished output with the same ``Nats-Msg-Id`` is
dropped by the server and therefore appears once. ``settled(durable, subject)`` waits until a
service's durable consumer has acked every message it was given: the runtime acks only after its
commit and its publishes, so after ``settled`` every effect of those messages is visible.

``Crash(point)`` is a runtime fault hook: at the named point (``after-commit``: the commit landed,
nothing was published or acked; ``after-publish``: published, not acked) the unit of work fails,
once, as when the bus does not answer or the process is killed there. A message's batch is then
redelivered and must have exactly one effect, its outputs published once; a round's outputs are
published by the instance's next life (its outbox), which the tests start.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import nats
import nats.js.errors
import yaml
from nats.js import api as jsapi

from hyperjob import events
from hyperjob.bus import subject_covers
from hyperjob.events import subjects
from hyperjob.servicekit import AsyncioTimers, Runtime, WallClock, instance_name
from hyperjob.services.cluster_scheduler import app as cs_app
from hyperjob.services.cluster_scheduler import config as cs_config
from hyperjob.services.global_scheduler import app as gs_app
from hyperjob.services.global_scheduler import config as gs_config
from hyperjob.services.job_controller import app as jc_app
from hyperjob.services.job_controller import config as jc_config
from hyperjob.services.node_agent import app as na_app
from hyperjob.services.node_agent import config as na_config
from hyperjob.services.splitter import app as sp_app
from hyperjob.services.splitter import config as sp_config
from hyperjob.services.status_aggregator import app as sa_app
from hyperjob.services.status_aggregator import config as sa_config
from hyperjob.store import StoreUnavailableError

T = TypeVar("T")
M = TypeVar("M", bound=events.Message)

REPO = Path(__file__).resolve().parents[2]
DEADLINE = 10.0
ALL_TYPES = events.decoder(*events.ALL_MESSAGES)
# A batch a crashed instance held comes back after this (the services' 30 s would make tests slow).
ACK_WAIT = 2.0


# -- messages --------------------------------------------------------------------------------------


def message(message_type: type[M], **fields: Any) -> M:
    """A message as a client or another service would send it: a fresh id unless given."""
    fields.setdefault("event_id", events.new_request_id())
    fields.setdefault("occurred_at", time.time())
    fields.setdefault("producer", "test")
    return message_type(**fields)


async def send(bus: Any, subject: str, msg: events.Message, *, copy: int = 0) -> None:
    """Publish ``msg`` on ``subject``. ``copy > 0`` publishes the same payload under another
    ``Nats-Msg-Id`` so JetStream stores it again: a redelivery of the same event as the service sees it."""
    msg_id = msg.event_id if copy == 0 else f"{msg.event_id}#copy{copy}"
    await bus.publish(subject, events.encode(msg), msg_id=msg_id)


async def until(
    probe: Callable[[], Awaitable[T] | T], *, timeout: float = DEADLINE, what: str = "condition", interval: float = 0.02
) -> T:
    """Poll ``probe`` (sync or async) until it returns something truthy, which is returned;
    AssertionError naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = probe()
        if inspect.isawaitable(last):
            last = await last
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout}s (last: {last!r})")
        await asyncio.sleep(interval)


async def doc(
    store: Any,
    kind: str,
    name: str,
    type_: type[T],
    *,
    timeout: float = DEADLINE,
    where: Callable[[T], bool] = lambda _d: True,
) -> T:
    """Wait for the document ``kind/name`` to exist (and satisfy ``where``); return it decoded."""

    async def probe() -> T | None:
        stored = await store.get(kind, name)
        if stored is None:
            return None
        value = stored.decode(type_)
        return value if where(value) else None

    return await until(probe, timeout=timeout, what=f"document {kind}/{name}")


async def version(store: Any, kind: str, name: str) -> int:
    stored = await store.get(kind, name)
    return 0 if stored is None else int(stored.version)


# -- running a service --------------------------------------------------------------------------------


class TestRuntime(Runtime):
    """The runtime every service runs on, with a short ack wait so that a batch a crashed instance
    held comes back within a test's deadline."""

    __test__ = False  # not a pytest test class

    def subscribe(self, durable: str, subject_list: str | Sequence[str], handlers: Any, **kw: Any) -> None:
        kw["ack_wait"] = ACK_WAIT
        kw.setdefault("backoff", [0.1, 0.5, 1.0])
        super().subscribe(durable, subject_list, handlers, **kw)


class InjectedCrash(ConnectionError):
    """What ``Crash`` raises: transient, so the bus logs it as an expected retry."""

    transient = True


class Crash:
    """A fault hook: raises at ``point`` (``after-commit`` or ``after-publish``) the first ``times``
    times the runtime passes it: the unit of work ends there, unacknowledged."""

    def __init__(self, point: str, times: int = 1) -> None:
        self.point = point
        self.left = times
        self.fired = 0

    def __call__(self, point: str) -> None:
        if point == self.point and self.left > 0:
            self.left -= 1
            self.fired += 1
            raise InjectedCrash(f"injected crash {point}")


@contextlib.asynccontextmanager
async def running(
    service: str,
    build: Callable[[Any, Runtime], Awaitable[Any]],
    settings: Any,
    bus: Any,
    store: Any,
    *,
    instance: str | None = None,
    fault: Callable[[str], None] | None = None,
    lease_ttl: float = 0.0,
) -> AsyncIterator[tuple[Runtime, Any]]:
    """The service built and started on ``bus`` and ``store``; stopped on exit. With ``lease_ttl``,
    one replica of several of the same instance (``Runtime``'s lease)."""
    clock = WallClock()
    runtime = TestRuntime(
        service,
        instance or instance_name(service, settings),
        bus,
        store,
        clock=clock,
        timers=AsyncioTimers(clock),
        fault=fault,
        lease_ttl=lease_ttl,
    )
    built = await build(settings, runtime)
    await runtime.start()
    try:
        yield runtime, built
    finally:
        await runtime.stop()


# -- reading the streams --------------------------------------------------------------------------


class Stored(msgspec.Struct, frozen=True):
    """One message as JetStream stored it."""

    subject: str
    msg_id: str
    data: bytes
    headers: dict[str, str] = {}

    def decode(self) -> events.Message:
        return ALL_TYPES.decode(self.data)  # type: ignore[no-any-return]


class Probe:
    """Reads one test namespace's streams and consumers through a connection of its own."""

    def __init__(self, nc: Any, namespace: str) -> None:
        self._nc = nc
        self._js = nc.jetstream()
        self._ns = namespace

    @classmethod
    async def connect(cls, url: str, namespace: str) -> Probe:
        return cls(await nats.connect(url, name=f"probe-{namespace}"), namespace)

    async def close(self) -> None:
        await self._nc.close()

    def _stream(self, subject_filter: str) -> str:
        for decl in subjects.STREAMS:
            if any(subject_covers(pattern, subject_filter) for pattern in decl.subjects):
                return f"{self._ns}_{decl.name}" if self._ns else decl.name
        raise ValueError(f"no stream captures {subject_filter}")

    @property
    def _prefix(self) -> str:
        """What the namespace puts before every subject (nothing without one: a whole system's bus)."""
        return f"{self._ns}." if self._ns else ""

    async def messages(self, subject_filter: str) -> list[Stored]:
        """Every message stored on subjects matching ``subject_filter``, in stream order."""
        stream = self._stream(subject_filter)
        config = jsapi.ConsumerConfig(
            ack_policy=jsapi.AckPolicy.NONE,
            deliver_policy=jsapi.DeliverPolicy.ALL,
            filter_subject=f"{self._prefix}{subject_filter}",
            inactive_threshold=30.0,
            mem_storage=True,
        )
        info = await self._js.add_consumer(stream, config)
        psub = await self._js.pull_subscribe_bind(durable=None, stream=stream, name=info.name)
        out: list[Stored] = []
        try:
            remaining = info.num_pending or 0
            while remaining > 0:
                batch = await psub.fetch(min(remaining, 500), timeout=5)
                remaining -= len(batch)
                for msg in batch:
                    headers = dict(msg.headers or {})
                    out.append(
                        Stored(msg.subject[len(self._prefix) :], headers.get("Nats-Msg-Id", ""), msg.data, headers)
                    )
        finally:
            await psub.unsubscribe()
            with contextlib.suppress(nats.js.errors.NotFoundError):
                await self._js.delete_consumer(stream, info.name)
        return out

    async def decoded(self, subject_filter: str, type_: type[M] | None = None) -> list[M]:
        """The stored messages on ``subject_filter`` decoded (only those of ``type_`` if given)."""
        found = [m.decode() for m in await self.messages(subject_filter) if m.data]
        return [m for m in found if type_ is None or isinstance(m, type_)]  # type: ignore[misc]

    async def wait(
        self,
        subject_filter: str,
        type_: type[M] | None = None,
        *,
        count: int = 1,
        timeout: float = DEADLINE,
        where: Callable[[M], bool] = lambda _m: True,
    ) -> list[M]:
        """Wait until at least ``count`` matching messages are stored; return all matching ones."""

        async def probe() -> list[M]:
            found = [m for m in await self.decoded(subject_filter, type_) if where(m)]
            return found if len(found) >= count else []

        return await until(
            probe, timeout=timeout, what=f"{count} x {type_.__name__ if type_ else 'message'} on {subject_filter}"
        )

    async def settled(self, durable: str, subject: str, *, timeout: float = DEADLINE) -> None:
        """Wait until the durable consumer ``durable`` (on ``subject``'s stream) has no message
        waiting and none delivered but unacked: every effect of what it was sent is visible."""
        stream = self._stream(subject)

        async def probe() -> bool:
            try:
                info = await self._js.consumer_info(stream, durable)
            except nats.js.errors.NotFoundError:
                return False
            return info.num_pending == 0 and info.num_ack_pending == 0

        await until(probe, timeout=timeout, what=f"consumer {durable} settled")

    async def changelog(self, instance: str) -> dict[str, Stored]:
        """The latest changelog entry of every document of ``instance`` (``kind/name`` → entry)."""
        from hyperjob.servicekit import parse_state_subject  # noqa: PLC0415

        latest: dict[str, Stored] = {}
        for m in await self.messages(f"state.{subjects.token(instance)}.>"):
            kind, name = parse_state_subject(instance, m.subject)
            latest[f"{kind}/{name}"] = m
        return latest


async def probe_for(nats_url: str, namespace: str) -> Probe:
    return await Probe.connect(nats_url, namespace)


# -- what the clusters and clients send ----------------------------------------------------------------

NODE_ALLOCATABLE = {"cpu": 96.0, "memory": float(1 << 40), "nvidia.com/gpu": 8.0, "pods": 110.0}


def capacity(
    cluster: str, nodes: int = 4, allocatable: dict[str, float] | None = None, full: bool = False
) -> events.ClusterCapacityReported:
    """A cluster's summary as its cluster-scheduler publishes it: ``nodes`` alike idle nodes (every
    resource in use if ``full``), all Ready."""
    per_node = allocatable or NODE_ALLOCATABLE
    free = {r: 0.0 for r in per_node} if full else dict(per_node)
    total = {r: a * nodes for r, a in per_node.items()}
    return message(
        events.ClusterCapacityReported,
        cluster=cluster,
        allocatable=total,
        free={r: f * nodes for r, f in free.items()},
        nodes=nodes,
        ready_nodes=nodes,
        largest_node_free=dict(free),
        node_classes=[events.NodeClass(name=f"{cluster}-node-0", count=nodes, free=free, allocatable=dict(per_node))],
    )


async def report_capacity(bus: Any, *caps: events.ClusterCapacityReported) -> None:
    for cap in caps:
        await send(bus, subjects.capacity(cap.cluster), cap)


def example_documents(name: str = "hyperjob-llm.yaml") -> list[dict[str, Any]]:
    """The manifests of an example file, as a client sends them (plain data)."""
    text = (REPO / "examples" / name).read_text()
    return [d for d in yaml.safe_load_all(text) if d]


def queue_manifest(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {"weight": 1, **spec},
    }


def job_manifest(
    name: str,
    *,
    replicas: int = 2,
    queue: str = "default",
    min_available: int | None = None,
    gpu: str = "1",
    duration: str = "10s",
    policies: list[dict[str, Any]] | None = None,
    max_retry: int | None = None,
    restart_policy: str = "Never",
) -> dict[str, Any]:
    """A Volcano Job of one task ``worker`` with ``replicas`` pods, each asking one GPU and 8 cpu."""
    spec: dict[str, Any] = {
        "minAvailable": replicas if min_available is None else min_available,
        "schedulerName": "volcano",
        "queue": queue,
        "tasks": [
            {
                "name": "worker",
                "replicas": replicas,
                "template": {
                    "metadata": {"annotations": {"hyperjob.io/sim-duration": duration}},
                    "spec": {
                        "containers": [
                            {
                                "name": "worker",
                                "image": "example.com/w:1",
                                "resources": {"requests": {"cpu": "8", "memory": "16Gi", "nvidia.com/gpu": gpu}},
                            }
                        ],
                        "restartPolicy": restart_policy,
                    },
                },
            }
        ],
    }
    if policies is not None:
        spec["policies"] = policies
    if max_retry is not None:
        spec["maxRetry"] = max_retry
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


def hyperjob_manifest(
    name: str,
    clusters: dict[str, int],
    *,
    queue: str = "default",
    min_available: int | None = None,
    duration: str = "10s",
    plugins: dict[str, list[str]] | None = None,
) -> dict[str, Any]:
    """A HyperJob of one template (task ``worker``: 1 GPU, 8 cpu per pod) split ByCluster."""
    total = sum(clusters.values())
    template = job_manifest(name, replicas=total, queue=queue, min_available=min_available, duration=duration)
    del template["metadata"]
    spec: dict[str, Any] = {
        "template": template,
        "splitPolicy": {"strategy": "ByCluster", "clusters": [{"name": c, "replicas": r} for c, r in clusters.items()]},
    }
    if plugins is not None:
        spec["plugins"] = plugins
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "HyperJob", "metadata": {"name": name}, "spec": spec}


def apply(manifest: dict[str, Any]) -> events.ApplyManifest:
    return message(events.ApplyManifest, manifest=manifest)


# -- the whole system ---------------------------------------------------------------------------------


class Fleet:
    """Every service of a small fleet, in-process on one bus and one store: per cluster a
    simulating node-agent, a cluster-scheduler and a job-controller; the splitter, the
    global-scheduler and the status-aggregator. ``period`` paces every round; ``lease_ttl`` makes each
    instance one replica of several (``Runtime``'s lease)."""

    def __init__(
        self,
        bus: Any,
        store: Any,
        clusters: Sequence[str],
        *,
        nodes: int = 2,
        period: float = 0.2,
        lease_ttl: float = 0.0,
    ) -> None:
        self.bus = bus
        self.lease_ttl = lease_ttl
        self.store = store
        self.clusters = list(clusters)
        self.nodes = nodes
        self.period = period
        self.runtimes: dict[str, Runtime] = {}
        self._stack = contextlib.AsyncExitStack()

    def plans(self) -> list[tuple[str, Any, Any, str]]:
        """(service, build, settings, instance) of every instance, in the order they start: the nodes,
        then each cluster's controllers, then the fleet's services."""
        out: list[tuple[str, Any, Any, str]] = []
        for c in self.clusters:
            agent = na_config.Settings(
                cluster=c, nodes=self.nodes, telemetry="off", pod_duration="never", heartbeat_period=self.period
            )
            out.append(("node-agent", na_app.build, agent, na_app.agent_name(agent)))
        for c in self.clusters:
            cs = cs_config.Settings(cluster=c, schedule_period=f"{self.period}s")
            jc = jc_config.Settings(cluster=c)
            out.append(("cluster-scheduler", cs_app.build, cs, instance_name("cluster-scheduler", cs)))
            out.append(("job-controller", jc_app.build, jc, instance_name("job-controller", jc)))
        out.append(("splitter", sp_app.build, sp_config.Settings(replan_period=self.period), "splitter"))
        out.append(("global-scheduler", gs_app.build, gs_config.Settings(retry_period=self.period), "global-scheduler"))
        out.append(("status-aggregator", sa_app.build, sa_config.Settings(), "status-aggregator"))
        return out

    async def __aenter__(self) -> Fleet:
        await self._stack.__aenter__()
        for service, build_service, settings, instance in self.plans():
            if service == "splitter":
                # The splitter checks the clusters a HyperJob names against the summaries it watched.
                for c in self.clusters:
                    await until(lambda c=c: self.bus.last(subjects.capacity(c)), what=f"capacity of {c}")
            runtime, _ = await self._stack.enter_async_context(
                running(
                    service, build_service, settings, self.bus, self.store, instance=instance, lease_ttl=self.lease_ttl
                )
            )
            self.runtimes[instance] = runtime
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._stack.__aexit__(*exc)


class StoreDownForAWhile:
    """The real store, except that ``commit`` fails while ``down`` is set (Redis unreachable): back
    by itself after ``refusals`` refused commits, or when the test clears ``down``."""

    def __init__(self, inner: Any, refusals: int | None = None) -> None:
        self.inner = inner
        self.down = False
        self.refused = 0
        self.refusals = refusals

    async def commit(self, commit: Any) -> Any:
        if self.down:
            self.refused += 1
            if self.refusals is not None and self.refused >= self.refusals:
                self.down = False
            raise StoreUnavailableError("injected: store unavailable")
        return await self.inner.commit(commit)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
