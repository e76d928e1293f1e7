"""A whole fleet on NATS and Redis servers of its own, a bounded load, the faults of the control
plane itself (a NATS or Redis outage: the server stopped and started again on the same port and
data directory; a Redis wipe; a service killed; one cluster's agent and scheduler cut off behind a
TCP ``Partition``), and the audit of what they did. Services run in-process (``sh.Fleet``) or, with
``Run(home=...)``, each as its own process under ``hyperjob up``'s supervisor (``Processes``).

Shared by the outage service tests (``test_outage.py``), the chaos test (``tests/chaos``) and the
measuring script (``.venv/bin/python -m tests.service.outage_kit``). The figures of an audit:

- ``evicted``: pods the cluster-schedulers took off their nodes because the node went silent
  (``nodeDown``); ``moved``: children failed over to another cluster (``sched.child.move``);
- ``started_twice``: pods started more than once (the same pod name in two ``job.pods.start``);
- ``concurrent``: pods of which two copies ran at overlapping times (``copies.Copies``: each copy,
  a pod name on one cluster, node and uid, runs from its agent's Running report to its last one,
  or to when its agent froze it, and again from a confirmation that resumed it);
- ``over``: samples of a node whose bookings exceeded its allocatable (the store, sampled);
- ``dlq``: dead letters; ``phases``: every HyperJob's final phase as the status-aggregator wrote it;
- ``bookings_left``: pods still booked per cluster once every HyperJob is final.

``.venv/bin/python -m tests.service.outage_kit [--processes] none nats60 redis60 redis90apply wipe partition45``
prints one line of figures per fault (docs/reliability.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import redis.asyncio as aioredis

from hyperjob import events, records
from hyperjob.events import subjects
from hyperjob.events.subjects import STREAMS
from hyperjob.testkit.isolation import new_namespace, open_nats_bus, open_redis_store
from hyperjob.testkit.servers import NatsServer, RedisServer
from tests.service import service_helpers as sh
from tests.service.copies import Copies

CLUSTERS = ("c1", "c2")
REPORTED: dict[str, object] = {}  # figures the chaos tests print at the end of the session


class Figures(msgspec.Struct, kw_only=True):
    submitted: int = 0
    completed: int = 0
    lost: int = 0  # submitted HyperJobs with no status at the end, or not in their expected phase
    evicted: int = 0
    moved: int = 0
    started_twice: int = 0
    concurrent: int = 0
    over: int = 0
    samples: int = 0
    dlq: int = 0
    seconds: float = 0.0
    phases: dict[str, int] = {}
    bookings_left: dict[str, int] = {}

    def line(self, fault: str) -> str:
        return (
            f"{fault:<14} submitted={self.submitted} completed={self.completed} lost={self.lost} "
            f"evicted={self.evicted} moved={self.moved} started_twice={self.started_twice} "
            f"concurrent={self.concurrent} "
            f"over={self.over}/{self.samples} dlq={self.dlq} seconds={self.seconds:.0f} "
            f"bookings_left={self.bookings_left}"
        )


class Servers:
    """A ``nats-server -js`` and a ``redis-server`` (AOF) of the run's own, stopped and started
    again on the same port and data directory for an outage."""

    def __init__(self, root: Path) -> None:
        self.nats = NatsServer(root / "nats")
        self.redis = RedisServer(root / "redis", appendonly=True)

    def __enter__(self) -> Servers:
        self.nats.start()
        self.redis.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.nats.stop()
        self.redis.stop()

    async def outage(self, server: NatsServer | RedisServer, seconds: float) -> None:
        await asyncio.to_thread(server.stop)
        await asyncio.sleep(seconds)
        await asyncio.to_thread(server.start)

    async def wipe(self) -> None:
        client = aioredis.Redis.from_url(self.redis.url)
        try:
            await client.flushall()
        finally:
            await client.aclose()


class Partition:
    """A TCP proxy in front of a server, for the clients behind it: ``cut()`` stops forwarding in
    both directions and opening new connections (they stay open, unanswered, as under a network
    partition), ``heal()`` lets everything through again. ``heal(resume=False)`` lets only new
    connections through: those open during the cut stay silent for good, as when the server
    dropped them meanwhile (the NATS server's write deadline) and nothing of it reached the client."""

    def __init__(self, url: str) -> None:
        scheme, _, rest = url.partition("://")
        host, _, port = rest.partition(":")
        self.scheme, self.target = scheme, (host, int(port.split("/")[0]))
        self.open = asyncio.Event()
        self.open.set()
        self.closing = asyncio.Event()
        self.cuts = 0
        self.dead = 0  # connections opened before the ``dead``-th cut never forward again
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._client, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"{self.scheme}://127.0.0.1:{port}"

    async def close(self) -> None:
        self.closing.set()
        if self.server is not None:
            self.server.close()

    def cut(self) -> None:
        self.open.clear()
        self.cuts += 1

    def heal(self, *, resume: bool = True) -> None:
        if not resume:
            self.dead = self.cuts
        self.open.set()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await self.open.wait()
        born = self.cuts
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(
            self._pipe(reader, up_writer, born), self._pipe(up_reader, writer, born), return_exceptions=True
        )

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, born: int) -> None:
        try:
            while data := await reader.read(65536):
                await self.open.wait()
                if born < self.dead:
                    await self.closing.wait()  # dropped across the cut: silent until the proxy closes
                    return
                writer.write(data)
                await writer.drain()
        finally:
            writer.close()


class Bookings:
    """Samples every node's bookings in the store while the run goes on (a store that does not
    answer is skipped: that sample is not taken)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.samples = 0
        self.over: list[tuple[str, str]] = []
        self.stopping = False

    async def run(self) -> None:
        while not self.stopping:  # stopped by a flag: a cancellation inside redis-py can be swallowed
            try:
                for c in CLUSTERS:
                    for node, usage in (await self.store.nodes(c)).items():
                        if any(a > usage.allocatable.get(r, a) + 1e-9 for r, a in usage.used.items()):
                            self.over.append((c, node))
                self.samples += 1
            except Exception:  # noqa: BLE001 - Redis is down on purpose: no sample
                pass
            await asyncio.sleep(0.1)


class CutOffFleet(sh.Fleet):
    """``sh.Fleet`` where the node-agent and cluster-scheduler of ``cut_cluster`` reach NATS and
    Redis through ``Partition`` proxies of their own (issue 16's fault (a))."""

    def __init__(self, *args: Any, cut_cluster: str, cut_bus: Any, cut_store: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.cut = {f"node-agent-{cut_cluster}", f"cluster-scheduler-{cut_cluster}"}
        self.cut_bus, self.cut_store = cut_bus, cut_store

    async def __aenter__(self) -> CutOffFleet:
        await self._stack.__aenter__()
        for service, build_service, settings, instance in self.plans():
            if service == "splitter":
                for c in self.clusters:
                    await sh.until(lambda c=c: self.bus.last(subjects.capacity(c)), what=f"capacity of {c}")
            behind = instance in self.cut
            runtime, _ = await self._stack.enter_async_context(
                sh.running(
                    service,
                    build_service,
                    settings,
                    self.cut_bus if behind else self.bus,
                    self.cut_store if behind else self.store,
                    instance=instance,
                )
            )
            self.runtimes[instance] = runtime
        return self


class Processes:
    """Every service as its own process, as ``hyperjob up`` starts and restarts them (its
    ``System``), on the run's servers; a supervising thread restarts a service that dies."""

    def __init__(self, home: Path, nats_url: str, redis_url: str, *, nodes: int, period: float) -> None:
        from hyperjob.cli import up  # noqa: PLC0415 - only the process mode needs the CLI
        from hyperjob.cli.config import ClusterConfig, UpConfig  # noqa: PLC0415

        os.environ["HYPERJOB_HOME"] = str(home)
        clusters = [ClusterConfig(name=c, nodes=nodes) for c in CLUSTERS]
        self.system = up.System(config=UpConfig(clusters=clusters, schedule_period=f"{period}s"))
        self.urls = (nats_url, redis_url)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self.notes: list[str] = []

    def __enter__(self) -> Processes:
        self.system.start(*self.urls)
        # Restarted services die with the thread that started them (PR_SET_PDEATHSIG): this one
        # lives as long as the run.
        self._thread = threading.Thread(target=self._supervise, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
        self.system.stop()

    def _supervise(self) -> None:
        while not self._stopping.wait(0.5):
            self.notes += self.system.supervise_once()

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        """``kill -9`` (or ``sig``) of one service (``splitter``, ``cluster_scheduler@c1`` ...);
        one waiting out its back-off after a death has no process to signal."""
        service = next(s for s in self.system.services if s.name == name)
        if service.proc is not None and service.proc.poll() is None:
            os.kill(service.proc.pid, sig)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.system.services]


class Run:
    """The fleet (in-process services, or each service its own process), its load and its audit."""

    def __init__(
        self,
        nats_url: str,
        redis_url: str,
        *,
        nodes: int = 4,
        period: float = 0.5,
        home: Path | None = None,
        cut_cluster: str = "",
    ) -> None:
        self.nats_url = nats_url
        self.redis_url = redis_url
        self.nodes = nodes
        self.period = period
        self.home = home  # given: every service runs as its own process (``hyperjob up``'s way)
        self.cut_cluster = cut_cluster  # given: its agent and scheduler sit behind ``Partition``s
        self.partitions: list[Partition] = []
        self.namespace = "" if home is not None else new_namespace()
        self.submitted: list[str] = []
        self.started = time.monotonic()
        self.processes: Processes | None = None

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Run]:
        async with (
            open_nats_bus(self.nats_url, self.namespace, STREAMS, cleanup=False) as bus,
            open_redis_store(self.redis_url, self.namespace or "hj", cleanup=False) as store,
        ):
            self.bus, self.store = bus, store
            self.probe = await sh.probe_for(self.nats_url, self.namespace)
            self.bookings = Bookings(store)
            watcher = asyncio.create_task(self.bookings.run())
            try:
                if self.home is not None:
                    with Processes(self.home, self.nats_url, self.redis_url, nodes=self.nodes, period=self.period) as p:
                        self.processes = p
                        await self._registered()
                        yield self
                elif self.cut_cluster:
                    async with self._cut_off_fleet(bus, store) as fleet:
                        self.fleet = fleet
                        yield self
                else:
                    async with sh.Fleet(bus, store, CLUSTERS, nodes=self.nodes, period=self.period) as fleet:
                        self.fleet = fleet
                        yield self
            finally:
                self.bookings.stopping = True
                await watcher
                await self.probe.close()

    @contextlib.asynccontextmanager
    async def _cut_off_fleet(self, bus: Any, store: Any) -> AsyncIterator[CutOffFleet]:
        self.partitions = [Partition(self.nats_url), Partition(self.redis_url)]
        nats_url, redis_url = [await p.start() for p in self.partitions]
        try:
            async with (
                open_nats_bus(nats_url, self.namespace, STREAMS, cleanup=False) as cut_bus,
                open_redis_store(redis_url, self.namespace, cleanup=False) as cut_store,
                CutOffFleet(
                    bus,
                    store,
                    CLUSTERS,
                    nodes=self.nodes,
                    period=self.period,
                    cut_cluster=self.cut_cluster,
                    cut_bus=cut_bus,
                    cut_store=cut_store,
                ) as fleet,
            ):
                yield fleet
        finally:
            for p in self.partitions:
                p.heal()
                await p.close()

    async def bookings_left(self) -> dict[str, int]:
        """Pods still booked per cluster (once every HyperJob is final there should be none)."""
        return {c: len(await self.store.allocations(c)) for c in CLUSTERS}

    async def _registered(self) -> None:
        for c in CLUSTERS:
            await sh.until(lambda c=c: self.bus.last(subjects.capacity(c)), what=f"capacity of {c}", timeout=60)

    async def submit(self, count: int, *, duration: str = "30s", pods_per_cluster: int = 2, first: int = 0) -> None:
        """``count`` HyperJobs ``hj<first>`` ... (the queue too, with the first ones)."""
        if first == 0:
            await _apply(self.bus, self.probe, sh.queue_manifest("outage"))
        for i in range(first, first + count):
            name = f"hj{i}"
            manifest = sh.hyperjob_manifest(
                name, dict.fromkeys(CLUSTERS, pods_per_cluster), queue="outage", duration=duration
            )
            await _apply(self.bus, self.probe, manifest)
            self.submitted.append(name)

    async def send_one(self, *, duration: str) -> None:
        """One more HyperJob applied with no wait for the answer (the services may be down: it
        waits in its stream)."""
        name = f"hj{len(self.submitted)}"
        manifest = sh.hyperjob_manifest(name, dict.fromkeys(CLUSTERS, 2), queue="outage", duration=duration)
        await sh.send(self.bus, subjects.APPLY, sh.apply(manifest))
        self.submitted.append(name)

    async def until_running(self, pods: int, timeout: float = 60) -> None:
        async def enough() -> bool:
            return len(await self._starts()) >= pods

        await sh.until(enough, what=f"{pods} pods started", timeout=timeout)

    async def until_done(self, timeout: float) -> None:
        async def done() -> bool:
            with contextlib.suppress(Exception):
                statuses = await self._statuses()
                return all(statuses.get(n, "") in ("Completed", "Failed") for n in self.submitted)
            return False

        with contextlib.suppress(TimeoutError, AssertionError):
            await sh.until(done, what="every HyperJob finished", timeout=timeout)

    async def audit(self) -> Figures:
        statuses = await self._statuses()
        starts = Counter(p.pod for p in await self._starts())
        evicted = [
            ref
            for c in CLUSTERS
            for m in await self.probe.decoded(subjects.pods_evicted(c), events.PodsEvicted)
            for ref in m.pods
            if ref.reason == "nodeDown"
        ]
        moved = await self.probe.decoded(subjects.MOVE_CHILD, events.MoveChild)
        return Figures(
            submitted=len(self.submitted),
            completed=sum(1 for n in self.submitted if statuses.get(n) == "Completed"),
            lost=sum(1 for n in self.submitted if statuses.get(n) != "Completed"),
            evicted=len(evicted),
            moved=len(moved),
            started_twice=sum(1 for n in starts.values() if n > 1),
            concurrent=Copies(await self._reports(), await self._frozen(), await self._confirmed()).concurrent(),
            over=len(self.bookings.over),
            samples=self.bookings.samples,
            dlq=len(await self.probe.messages("dlq.>")),
            seconds=time.monotonic() - self.started,
            phases=dict(Counter(statuses.get(n, "none") for n in self.submitted)),
        )

    async def _starts(self) -> list[events.PodStart]:
        """Every pod started (a confirmation that only resumes frozen pods starts none)."""
        return [
            p
            for c in CLUSTERS
            for m in await self.probe.decoded(subjects.start_pods(c), events.StartPods)
            if not m.resume_only
            for p in m.pods
        ]

    async def _frozen(self) -> list[events.PodsFrozen]:
        """What the agents froze, with when, as each said once back on the bus."""
        return [m for c in CLUSTERS for m in await self.probe.decoded(subjects.pods_frozen(c), events.PodsFrozen)]

    async def _confirmed(self) -> list[events.StartPods]:
        """The confirmations that resumed frozen pods."""
        return [
            m
            for c in CLUSTERS
            for m in await self.probe.decoded(subjects.start_pods(c), events.StartPods)
            if m.resume_only
        ]

    async def _reports(self) -> list[tuple[str, events.PodReport]]:
        """Every pod phase the agents reported, with its cluster, in stream order."""
        return [
            (c, r)
            for c in CLUSTERS
            for m in await self.probe.decoded(subjects.pod_phases(c), events.PodPhasesReported)
            for r in m.reports
        ]

    async def _statuses(self) -> dict[str, str]:
        docs = await self.store.list(records.HYPERJOB_STATUS)
        return {name: doc.decode(records.HyperJobStatusDoc).phase for name, doc in docs.items()}


async def _apply(bus: Any, probe: sh.Probe, manifest: dict[str, Any]) -> None:
    msg = sh.apply(manifest)
    await sh.send(bus, subjects.APPLY, msg)
    [answer] = await probe.wait(subjects.result(msg.event_id), timeout=30)
    assert isinstance(answer, events.RequestAccepted), answer


Fault = Callable[[Servers, Run], Awaitable[None]]


async def measure(
    root: Path,
    fault: Fault,
    *,
    hyperjobs: int = 24,
    duration: str = "30s",
    processes: bool = False,
    cut_cluster: str = "",
) -> Figures:
    """One run: the load submitted, the fault once some pods run, then every HyperJob to its end."""
    with Servers(root) as servers:
        run = Run(
            servers.nats.url,
            servers.redis.url,
            home=root / "home" if processes else None,
            cut_cluster=cut_cluster,
        )
        async with run.running():
            await run.submit(hyperjobs, duration=duration)
            await run.until_running(8)
            await fault(servers, run)
            await run.until_done(timeout=300)
            figures = await run.audit()
            figures.bookings_left = await run.bookings_left()
            return figures


def nats_outage(seconds: float) -> Fault:
    async def fault(servers: Servers, run: Run) -> None:
        await servers.outage(servers.nats, seconds)

    return fault


def redis_outage(seconds: float) -> Fault:
    async def fault(servers: Servers, run: Run) -> None:
        await servers.outage(servers.redis, seconds)

    return fault


def redis_outage_with_applies(seconds: float, count: int = 4) -> Fault:
    """Redis down while more HyperJobs are applied: they must be created once it is back."""

    async def fault(servers: Servers, run: Run) -> None:
        await asyncio.to_thread(servers.redis.stop)
        for _ in range(count):
            await run.send_one(duration="10s")
        await asyncio.sleep(seconds)
        await asyncio.to_thread(servers.redis.start)

    return fault


def cluster_partition(seconds: float) -> Fault:
    """c1's node-agent and cluster-scheduler cut off from NATS and Redis (issue 16's fault (a))."""

    async def fault(servers: Servers, run: Run) -> None:
        for p in run.partitions:
            p.cut()
        await asyncio.sleep(seconds)
        for p in run.partitions:
            p.heal()

    return fault


async def redis_wipe(servers: Servers, run: Run) -> None:
    await servers.wipe()


async def nothing(servers: Servers, run: Run) -> None:
    return None


async def _main(which: list[str]) -> None:
    import tempfile  # noqa: PLC0415

    faults: dict[str, Fault] = {
        "none": nothing,
        "nats60": nats_outage(60),
        "redis60": redis_outage(60),
        "redis90apply": redis_outage_with_applies(90),
        "wipe": redis_wipe,
        "partition45": cluster_partition(45),
    }
    processes = "--processes" in which
    for name in [w for w in which if not w.startswith("--")]:
        with tempfile.TemporaryDirectory() as tmp:
            cut = "c1" if name.startswith("partition") else ""
            figures = await measure(Path(tmp), faults[name], processes=processes, cut_cluster=cut)
            print(figures.line(name), figures.phases, flush=True)


if __name__ == "__main__":
    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    asyncio.run(_main(sys.argv[1:] or ["none", "nats60", "redis60", "wipe"]))
