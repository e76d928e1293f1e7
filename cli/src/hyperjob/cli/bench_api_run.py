"""The run of ``hyperjob bench api`` (``bench_api``): the system, the apiserver over aiohttp, the
stages. Imported only when the bench runs (aiohttp costs every other command its import)."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import click
import yaml

from hyperjob import events
from hyperjob.client import Client, request_subject
from hyperjob.events import subjects

from .bench_api import (
    HYPERJOBS_PATH,
    KUBECTL_TABLE,
    NAMESPACE,
    Applied,
    Listed,
    Plan,
    Watched,
    hyperjob_manifest,
    queue_manifest,
    report,
)

# -- talking to the apiserver ---------------------------------------------------------------------


@dataclass(frozen=True)
class Kubeconfig:
    server: str
    token: str
    ca: bytes

    @classmethod
    def read(cls, path: Path) -> Kubeconfig:
        """The server, CA and token of the kubeconfig ``up`` wrote (one cluster, one user)."""
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
        cluster = config["clusters"][0]["cluster"]
        return cls(
            cluster["server"],
            config["users"][0]["user"]["token"],
            base64.b64decode(cluster["certificate-authority-data"]),
        )

    def session(self, connections: int) -> aiohttp.ClientSession:
        tls = ssl.create_default_context(cadata=self.ca.decode())
        return aiohttp.ClientSession(
            base_url=self.server,
            connector=aiohttp.TCPConnector(ssl=tls, limit=connections),
            headers={"Authorization": f"Bearer {self.token}"},
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
        )


async def list_once(session: aiohttp.ClientSession, accept: str) -> tuple[float, int, int]:
    """One list: its seconds, items (or Table rows) and bytes. The Table is listed as kubectl
    lists it, in chunks of 500 (``limit``), following each chunk's ``continue`` token."""
    started = time.monotonic()
    items, size, token = 0, 0, None
    while True:
        params = {"limit": "500", **({"continue": token} if token else {})} if accept == KUBECTL_TABLE else {}
        async with session.get(HYPERJOBS_PATH, headers={"Accept": accept}, params=params) as answer:
            body = await answer.read()
            if answer.status != 200:
                raise click.ClickException(f"list answered {answer.status}: {body[:300]!r}")
        data = json.loads(body)
        items += len(data["rows"] if data.get("kind") == "Table" else data["items"])
        size += len(body)
        token = data["metadata"].get("continue")
        if not token:
            return time.monotonic() - started, items, size


async def list_many(session: aiohttp.ClientSession, accept: str, times: int) -> Listed:
    seconds, items, size = [], 0, 0
    for _ in range(times):
        elapsed, items, size = await list_once(session, accept)
        seconds.append(elapsed)
    return Listed(seconds, items, size)


async def post(session: aiohttp.ClientSession, manifest: dict[str, Any]) -> str:
    """Create one HyperJob through the API: "" once created (201), else what was answered."""
    async with session.post(HYPERJOBS_PATH, json=manifest) as answer:
        if answer.status == 201:
            await answer.read()
            return ""
        return f"{answer.status}: {(await answer.text())[:300]}"


async def through_nats(client: Client, manifest: dict[str, Any]) -> str:
    """Create one HyperJob as the CLI does (``Client.apply``): "" once accepted, else why not."""
    answer = await client.apply(manifest)
    return answer.reason if isinstance(answer, events.RequestRejected) else ""


async def apply_all(names: Sequence[str], create: Callable[[dict[str, Any]], Awaitable[str]], at_once: int) -> Applied:
    """Create ``names``, ``at_once`` at a time; how many were created, how long it took."""
    gate = asyncio.Semaphore(at_once)

    async def one(name: str) -> str:
        async with gate:
            return await create(hyperjob_manifest(name))

    started = time.monotonic()
    outcomes = await asyncio.gather(*(one(n) for n in names))
    elapsed = time.monotonic() - started
    errors = [o for o in outcomes if o]
    return Applied(len(names) - len(errors), len(errors), elapsed, errors[0] if errors else "")


# -- the run --------------------------------------------------------------------------------------


async def seed(client: Client, names: Sequence[str], timeout: float) -> tuple[int, float]:
    """Create ``names`` through the NATS contract in one burst; how many the splitter accepted (a
    refusal is said), and the seconds until the last answer."""
    requests = {
        name: events.ApplyManifest(
            event_id=events.new_request_id(), occurred_at=time.time(), producer="hyperjob-bench-api",
            manifest=hyperjob_manifest(name),
        )
        for name in names
    }  # fmt: skip
    answers = await answered(client, {m.event_id for m in requests.values()})
    subject = request_subject(subjects.APPLY, "HyperJob", NAMESPACE)
    started = time.monotonic()
    try:
        await client.bus.publish_many([(subject, m.event_id, events.encode(m)) for m in requests.values()], timeout=60)
        accepted = await answers.wait(timeout)
    finally:
        await answers.stop()
    return accepted, time.monotonic() - started


class Answers:
    """The splitter's answers to a set of requests, as they come (a watch of their subjects)."""

    def __init__(self, wanted: set[str]) -> None:
        self.wanted = wanted
        self.accepted: set[str] = set()
        self.rejected: dict[str, str] = {}
        self.done = asyncio.Event()
        self.watch: Any = None
        self.decoder = events.decoder(events.RequestAccepted, events.RequestRejected)

    async def on_answer(self, delivery: Any) -> None:
        request = delivery.subject.rsplit(".", 1)[-1]
        if request not in self.wanted:
            return
        answer = self.decoder.decode(delivery.data)
        if isinstance(answer, events.RequestRejected):
            self.rejected[request] = answer.reason
        else:
            self.accepted.add(request)
        if len(self.accepted) + len(self.rejected) == len(self.wanted):
            self.done.set()

    async def wait(self, timeout: float) -> int:
        try:
            await asyncio.wait_for(self.done.wait(), timeout)
        except TimeoutError:
            click.echo(f"timeout: {len(self.accepted)}/{len(self.wanted)} accepted after {timeout:g}s", err=True)
        if self.rejected:
            click.echo(f"{len(self.rejected)} refused, e.g. {next(iter(self.rejected.values()))}", err=True)
        return len(self.accepted)

    async def stop(self) -> None:
        await self.watch.stop()


async def answered(client: Client, wanted: set[str]) -> Answers:
    answers = Answers(wanted)
    answers.watch = await client.bus.watch(subjects.result("*"), answers.on_answer)
    return answers


async def watch_fan_out(
    session: aiohttp.ClientSession, client: Client, watchers: int, version: str, timeout: float
) -> Watched:
    """Open ``watchers`` watches of the HyperJobs from ``version``, create one HyperJob through
    NATS, and time each watcher until it reads that HyperJob's ADDED."""
    name = "bench-api-watched"
    params = {"watch": "1", "resourceVersion": version, "allowWatchBookmarks": "true"}
    asked = time.monotonic()
    streams = await asyncio.gather(*(session.get(HYPERJOBS_PATH, params=params) for _ in range(watchers)))
    open_seconds = time.monotonic() - asked
    opened = sum(1 for s in streams if s.status == 200)
    published = time.monotonic()
    seen = asyncio.gather(*(until_added(s, name, published) for s in streams if s.status == 200))
    try:
        refused = await asyncio.wait_for(through_nats(client, hyperjob_manifest(name)), timeout)
        accepted_after = None if refused else time.monotonic() - published
        try:
            times = await asyncio.wait_for(seen, timeout)
        except TimeoutError:
            times = []
            click.echo(f"timeout: not every watcher saw {name} within {timeout:g}s", err=True)
    finally:
        seen.cancel()  # a stage that failed leaves no reader behind
        for stream in streams:
            stream.close()
    return Watched(opened, open_seconds, [t for t in times if t is not None], accepted_after)


async def until_added(stream: aiohttp.ClientResponse, name: str, since: float) -> float | None:
    """Seconds from ``since`` until ``stream`` (a watch) says ``name`` was ADDED; None if it ends
    first. Bookmarks and the other objects' changes are read past."""
    async for line in stream.content:
        event = json.loads(line)
        if event.get("type") == "ADDED" and event["object"].get("metadata", {}).get("name") == name:
            return time.monotonic() - since
    return None


class ApiBench:
    """One run: the system (``start``, stopped by the caller's ExitStack), then ``run``."""

    def __init__(self, plan: Plan, echo: Callable[[str], None]) -> None:
        self.plan = plan
        self.echo = echo
        self.system: Any = None

    def start(self, stack: ExitStack) -> None:
        from .config import UpConfig  # noqa: PLC0415 - the CLI imports its commands lazily
        from .up import System  # noqa: PLC0415

        self.system = System(UpConfig(), apiserver_port=0)
        stack.callback(self.system.stop)  # before start: what started is stopped if the rest fails
        self.system.start()

    async def run(self, timeout: float) -> dict[str, Any]:
        from hyperjob.testkit.auth import CLI_USER  # noqa: PLC0415

        from .kubeconfig import kubeconfig_file  # noqa: PLC0415

        client = await Client.connect(
            self.system.nats_url(CLI_USER), self.system.redis_url(CLI_USER), producer="hyperjob-bench-api"
        )
        session = Kubeconfig.read(kubeconfig_file()).session(self.plan.watchers + self.plan.concurrency + 2)
        try:
            await self._ready(client, session, timeout)
            return await self._measure(client, session, timeout)
        finally:
            await session.close()
            await client.close()

    async def _ready(self, client: Client, session: aiohttp.ClientSession, timeout: float) -> None:
        """Until every cluster registered and the apiserver answers; then the bench's queue."""
        deadline = time.monotonic() + timeout
        while len(await client.cluster_names()) < len(self.system.config.clusters) or not await apiserver_ready(
            session
        ):
            if time.monotonic() > deadline:
                raise click.ClickException(f"the system did not come up within {timeout:g}s")
            for note in self.system.supervise_once():
                self.echo(note)
            await asyncio.sleep(0.5)
        if await through_nats(client, queue_manifest()):
            raise click.ClickException("the bench queue was refused")

    async def _measure(self, client: Client, session: aiohttp.ClientSession, timeout: float) -> dict[str, Any]:
        plan = self.plan
        self.echo(f"creating {plan.hyperjobs} HyperJobs through NATS ...")
        seeded = await seed(client, [f"bench-{i:05d}" for i in range(plan.hyperjobs)], timeout)
        self.echo(f"listing {plan.lists} times, as JSON and as kubectl's Table ...")
        lists = (
            await list_many(session, "application/json", plan.lists),
            await list_many(session, KUBECTL_TABLE, plan.lists),
        )
        version = await list_version(session)
        self.echo(f"{plan.watchers} watchers, one change ...")
        watched = await watch_fan_out(session, client, plan.watchers, version, timeout)
        self.echo(f"{plan.applies} HyperJobs through the API, then as many through NATS ...")
        api_names = [f"api-{i:05d}" for i in range(plan.applies)]
        by_api = await apply_all(api_names, lambda m: post(session, m), plan.concurrency)
        nats_names = [f"nats-{i:05d}" for i in range(plan.applies)]
        by_nats = await apply_all(nats_names, lambda m: through_nats(client, m), plan.concurrency)
        return report(plan, seeded, lists, watched, (by_api, by_nats))


async def apiserver_ready(session: aiohttp.ClientSession) -> bool:
    try:
        async with session.get("/readyz") as answer:
            return answer.status == 200
    except aiohttp.ClientError:
        return False


async def list_version(session: aiohttp.ClientSession) -> str:
    async with session.get(HYPERJOBS_PATH) as answer:
        return str((await answer.json())["metadata"]["resourceVersion"])
