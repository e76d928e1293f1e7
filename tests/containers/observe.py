"""What the container tests see of a running system, from the host only: the CLI (as a user would
drive it), the NATS streams read without declaring anything (the record of what happened), and a
sampler of the nodes' bookings while a run goes on.

The invariants every test checks (``Figures.problems``): each HyperJob reached its expected phase;
no pod was started twice (one incarnation started by two different commands, or run in two
clusters) and no two copies of a pod ran at once (``copies.Copies``: a copy frozen by its agent
stops counting from the freeze); no node's bookings ever went above its allocatable; nothing was
dropped silently (no dead letters, no child left in a non-final phase, no booking left behind once
every HyperJob is final). A pod run again under a new incarnation (its job's policy, or its child
moved to another cluster) is counted, not a problem by itself.
"""

from __future__ import annotations

import asyncio
import collections
import json
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
import nats.errors
import nats.js.errors

from hyperjob import events
from tests.service.copies import Copies

REPO = Path(__file__).resolve().parents[2]
HYPERJOB = str(Path(sys.executable).parent / "hyperjob")
EXAMPLE = REPO / "examples" / "hyperjob-llm.yaml"
EXAMPLE_NAME = "llm-train-hyperjob"
FINAL_PHASES = ("Completed", "Failed", "Aborted")
# What the run reports at its end (conftest prints them): seconds per step, figures per test.
TIMINGS: dict[str, float] = {}
FIGURES: dict[str, dict[str, Any]] = {}


class Cli:
    """``hyperjob`` on the host, pointed at the compose system's loopback ports."""

    def __init__(self, nats_url: str, redis_url: str, home: Path) -> None:
        import os

        self.env = {**os.environ, "NATS_URL": nats_url, "REDIS_URL": redis_url, "HYPERJOB_HOME": str(home)}

    def run(self, *args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        try:
            done = subprocess.run(
                [HYPERJOB, *args], env=self.env, cwd=REPO, capture_output=True, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            done = subprocess.CompletedProcess([HYPERJOB, *args], 124, "", f"timed out after {timeout}s")
        if check and done.returncode != 0:
            raise AssertionError(f"hyperjob {' '.join(args)} failed ({done.returncode}): {done.stdout}{done.stderr}")
        return done

    def json(self, *args: str) -> Any:
        """The command's JSON output as flat views (as tests/e2e/conftest.py's ``Cli.json``), or
        None while the system cannot answer (during a fault)."""
        done = self.run(*args, "-o", "json", check=False, timeout=30)
        if done.returncode != 0:
            return None
        data = json.loads(done.stdout)
        return [view(item) for item in data["items"]] if data.get("kind") == "List" else view(data)

    def phase(self, hyperjob: str) -> str | None:
        found = self.json("get", "hyperjobs", hyperjob)
        return found["phase"] if found else None

    def wait_for_phase(self, hyperjob: str, phases: tuple[str, ...], timeout: float) -> str | None:
        """Poll until the HyperJob is in one of ``phases``; the last phase seen either way."""
        deadline, phase = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            phase = self.phase(hyperjob)
            if phase in phases:
                return phase
            time.sleep(2)
        return phase


class BookingSampler:
    """Samples every node's bookings (``hyperjob get nodes``) in the background; remembers any
    sample where a resource was booked above the node's allocatable."""

    def __init__(self, cli: Cli, period: float = 3.0) -> None:
        self.cli, self.period = cli, period
        self.samples = 0
        self.oversubscribed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> BookingSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)

    def sample(self) -> list[dict[str, Any]] | None:
        nodes = self.cli.json("get", "nodes")
        if nodes is None:
            return None
        self.samples += 1
        for node in nodes:
            for resource, used in node["used"].items():
                if used > node["allocatable"].get(resource, 0):
                    self.oversubscribed.append(
                        f"{node['name']}: {resource} {used} > {node['allocatable'].get(resource)}"
                    )
        return nodes

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            self.sample()


class Deployment:
    """A running compose system (``podman_kit.ComposeSystem``) and the host's CLI pointed at it."""

    def __init__(self, system: Any, home: Path) -> None:
        self.system = system
        self.cli = Cli(system.nats_url, system.redis_url, home)


@dataclass
class Ledger:
    """What the streams recorded."""

    reports: list[tuple[str, events.PodReport]] = field(default_factory=list)  # (cluster, report), in order
    starts_per_incarnation: dict[tuple[str, str], set[str]] = field(default_factory=dict)  # (pod, uid) -> event ids
    frozen: list[events.PodsFrozen] = field(default_factory=list)  # what the agents froze, and when
    confirmed: list[events.StartPods] = field(default_factory=list)  # the resume-only starts
    dead_letters: list[str] = field(default_factory=list)
    statuses: list[tuple[str, str]] = field(default_factory=list)  # (hyperjob, phase), in order
    replicas: dict[str, int] = field(default_factory=dict)

    @property
    def pods_started_twice(self) -> list[str]:
        """A pod incarnation started by two different commands, or run by two clusters."""
        clusters: dict[tuple[str, str], set[str]] = {}
        for cluster, report in self.reports:
            if report.phase == "Running":
                clusters.setdefault((report.pod, report.uid), set()).add(cluster)
        twice = {pod for (pod, _), seen in clusters.items() if len(seen) > 1}
        twice |= {pod for (pod, _), starts in self.starts_per_incarnation.items() if len(starts) > 1}
        return sorted(twice)

    @property
    def pods_started_again(self) -> list[str]:
        """Pod names run under a second incarnation: recreated by the job's policy or moved with
        their child to another cluster, as a fault may make them (no invariant broken by itself)."""
        incarnations: dict[str, set[tuple[str, str]]] = {}
        for cluster, report in self.reports:
            if report.phase == "Running":
                incarnations.setdefault(report.pod, set()).add((cluster, report.uid))
        return sorted(pod for pod, seen in incarnations.items() if len(seen) > 1)

    @property
    def pods_reported_running(self) -> int:
        """Pod names some agent reported Running: what the two checks above look through."""
        return len({report.pod for _, report in self.reports if report.phase == "Running"})

    @property
    def concurrent_copies(self) -> int:
        """Pods of which two copies ran at overlapping times (``outage_kit.Copies``)."""
        return Copies(self.reports, self.frozen, self.confirmed).concurrent()


async def _messages(js: Any, stream: str, subject: str) -> list[Any]:
    """Every message of ``stream`` on ``subject``, by direct get (nothing is declared or consumed)."""
    found, seq = [], 1
    while True:
        try:
            message = await js.get_msg(stream, seq=seq, subject=subject, next=True)
        except nats.js.errors.NotFoundError:
            return found
        found.append(message)
        seq = message.seq + 1


_PHASES = events.decoder(events.PodPhasesReported)
_STARTS = events.decoder(events.StartPods)
_FROZEN = events.decoder(events.PodsFrozen)


async def _read_ledger(nats_url: str) -> Ledger:
    ledger = Ledger()
    nc = await nats.connect(nats_url, connect_timeout=5, max_reconnect_attempts=3)
    try:
        js = nc.jetstream(timeout=10)
        for message in await _messages(js, "NODE", "node.pods.phase.>"):
            reported = _PHASES.decode(message.data)
            ledger.reports.extend((reported.cluster, report) for report in reported.reports)
        for message in await _messages(js, "NODE", "node.pods.frozen.>"):
            ledger.frozen.append(_FROZEN.decode(message.data))
        for message in await _messages(js, "JOB", "job.pods.start.>"):
            command = _STARTS.decode(message.data)
            if command.resume_only:  # resumes frozen pods, starts none
                ledger.confirmed.append(command)
                continue
            for start in command.pods:
                ledger.starts_per_incarnation.setdefault((start.pod, start.uid), set()).add(command.event_id)
        for message in await _messages(js, "DLQ", "dlq.>"):
            ledger.dead_letters.append(f"{message.subject}: {(message.headers or {}).get('Hyperjob-Dlq-Reason')}")
        for message in await _messages(js, "HYPERJOB", "hj.hyperjob.status"):
            status = json.loads(message.data)
            ledger.statuses.append((status["name"], status["phase"]))
        for info in await js.streams_info():
            ledger.replicas[info.config.name] = info.config.num_replicas or 1
    finally:
        await nc.close()
    return ledger


def read_ledger(nats_url: str) -> Ledger:
    return asyncio.run(_read_ledger(nats_url))


@dataclass
class Figures:
    """One test's outcome, as the report states it."""

    expected: dict[str, str]
    reached: dict[str, str | None]
    pods_started_twice: list[str]
    concurrent_copies: int
    oversubscribed: list[str]
    dead_letters: list[str]
    children_not_final: list[str]
    bookings_left: list[str]
    notes: dict[str, Any] = field(default_factory=dict)

    def problems(self) -> list[str]:
        found = [
            f"{name} is {self.reached.get(name)}, expected {phase}"
            for name, phase in self.expected.items()
            if self.reached.get(name) != phase
        ]
        if self.pods_started_twice:
            found.append(f"{len(self.pods_started_twice)} pods started twice: {self.pods_started_twice[:4]}")
        if self.concurrent_copies:
            found.append(f"{self.concurrent_copies} pods ran two copies at once")
        if self.oversubscribed:
            found.append(f"bookings above allocatable: {self.oversubscribed[:4]}")
        if self.dead_letters:
            found.append(f"{len(self.dead_letters)} dead letters: {collections.Counter(self.dead_letters)}")
        if self.children_not_final:
            found.append(f"children not final: {self.children_not_final}")
        if self.bookings_left:
            found.append(f"bookings left behind: {self.bookings_left}")
        return found

    def summary(self) -> dict[str, Any]:
        return {
            "hyperjobs": f"{sum(self.reached.get(n) == p for n, p in self.expected.items())}/{len(self.expected)}"
            f" reached {sorted(set(self.expected.values()))}",
            "reached": self.reached,
            "pods started twice": len(self.pods_started_twice),
            "concurrent copies": self.concurrent_copies,
            "oversubscribed samples": len(self.oversubscribed),
            "dead letters": len(self.dead_letters),
            "children not final": self.children_not_final,
            "bookings left": self.bookings_left,
            **self.notes,
        }


def leftovers(cli: Cli) -> list[str] | None:
    """Children not in a final phase and nodes with bookings; None while the CLI gets no answer."""
    jobs, nodes = cli.json("get", "jobs"), cli.json("get", "nodes")
    if jobs is None or nodes is None:
        return None
    return [f"{j['name']}@{j['cluster']}" for j in jobs if j["phase"] not in FINAL_PHASES] + [
        n["name"] for n in nodes if any(n["used"].values())
    ]


def wait_until_settled(cli: Cli, timeout: float) -> bool:
    """Poll until no child is left in a non-final phase and no node keeps a booking. A HyperJob
    can be final while a cluster it left is still cut off: that cluster's bookings stay (its pods
    may still run) until it is back and hears that they ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if leftovers(cli) == []:
            return True
        time.sleep(1)
    return False


def collect(
    cli: Cli, sampler: BookingSampler, nats_url: str, expected: dict[str, str], notes: dict[str, Any] | None = None
) -> Figures:
    reached = {name: cli.phase(name) for name in expected}
    ledger = read_ledger(nats_url)
    jobs = cli.json("get", "jobs") or []
    nodes = sampler.sample() or []
    all_final = all(phase in FINAL_PHASES for phase in reached.values())
    return Figures(
        expected=expected,
        reached=reached,
        pods_started_twice=ledger.pods_started_twice,
        concurrent_copies=ledger.concurrent_copies,
        oversubscribed=sampler.oversubscribed,
        dead_letters=ledger.dead_letters,
        children_not_final=[f"{j['name']}@{j['cluster']}={j['phase']}" for j in jobs if j["phase"] not in FINAL_PHASES],
        bookings_left=[f"{n['name']}: {n['used']}" for n in nodes if all_final and any(n["used"].values())],
        notes={
            "booking samples": sampler.samples,
            "pods reported running": ledger.pods_reported_running,
            "pods started again (recreated or moved)": len(ledger.pods_started_again),
            "pods frozen": sum(len(m.pods) for m in ledger.frozen),
            "stream replicas": ledger.replicas,
            **(notes or {}),
        },
    )


# -- without the CLI: the CLI declares the streams at every call (R1), which would undo the
# replication the NATS-cluster test sets up, so that test watches and replicates through these.


async def _last_status(nats_urls: list[str], hyperjob: str) -> str | None:
    nc = await nats.connect(nats_urls, connect_timeout=3, max_reconnect_attempts=1)
    try:
        message = await nc.jetstream(timeout=5).get_last_msg("HYPERJOB", "hj.hyperjob.status")
        status = json.loads(message.data)
        return status["phase"] if status["name"] == hyperjob else None
    finally:
        await nc.close()


def wait_for_status(nats_urls: list[str], hyperjob: str, phases: tuple[str, ...], timeout: float) -> str | None:
    """Poll the last published status of ``hyperjob`` until it is in ``phases``; the last seen."""
    deadline, phase = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        try:
            phase = asyncio.run(_last_status(nats_urls, hyperjob))
        except (TimeoutError, nats.errors.Error, nats.js.errors.Error, OSError):
            pass  # the cluster is electing, or this server is cut off: ask again
        if phase in phases:
            return phase
        time.sleep(2)
    return phase


async def _replicate(nats_urls: list[str], replicas: int) -> dict[str, int]:
    nc = await nats.connect(nats_urls, connect_timeout=5)
    try:
        js = nc.jetstream(timeout=20)
        for info in await js.streams_info():
            info.config.num_replicas = replicas
            await js.update_stream(info.config)
        return {info.config.name: info.config.num_replicas for info in await js.streams_info()}
    finally:
        await nc.close()


def replicate_streams(nats_urls: list[str], replicas: int) -> dict[str, int]:
    """Set every stream's replica count (the bus declares R1 and has no setting for it yet)."""
    return asyncio.run(_replicate(nats_urls, replicas))


def stream_replicas(nats_urls: list[str]) -> dict[str, int]:
    async def read() -> dict[str, int]:
        nc = await nats.connect(nats_urls, connect_timeout=5)
        try:
            return {i.config.name: i.config.num_replicas or 1 for i in await nc.jetstream(timeout=10).streams_info()}
        finally:
            await nc.close()

    return asyncio.run(read())


def view(obj: dict[str, Any]) -> dict[str, Any]:
    """An object as ``get -o json`` prints it (kubectl's shape), its status fields next to its name."""
    if "metadata" not in obj:
        return obj
    status = obj.get("status", {})
    flat = {"name": obj["metadata"]["name"], **status, "status": status}
    if isinstance(status.get("state"), dict):  # a Volcano Job's status.state.phase
        flat["phase"] = status["state"]["phase"]
    return flat
