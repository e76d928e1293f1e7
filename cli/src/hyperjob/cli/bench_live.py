"""``hyperjob bench live``: the real system at fleet scale, measured from outside.

Starts ``nats-server`` (with its monitoring port) and ``redis-server`` from the pip wheels, then
every service as its own process exactly as ``hyperjob up`` does (``up.System``), with
``--clusters`` simulated clusters of ``--nodes`` 8-GPU nodes each and pods that run until stopped.
Once every cluster-scheduler sees its whole fleet and ``--settle`` seconds have passed (a fleet
just started is not at rest: each agent reads and publishes every node's telemetry once at start,
which at 10,000 nodes takes the agents several seconds), it measures the idle cost of each process,
then publishes ``--hyperjobs`` HyperJobs of ``--replicas`` one-GPU replicas at once (split evenly
across the clusters unless ``--no-split``) and waits until each is Running.

Figures (never assertions; the machine's load is reported beside them):

- ``podsPerSecond``: pods of the HyperJobs that ran / seconds from the publish to the last one Running;
- ``submitToRunningP50``/``P99``: per HyperJob, seconds from the publish to its status saying Running;
- ``acceptedPerSecond`` (the splitter's answers), ``admittedPerSecond`` (the global-scheduler's);
- ``admissionCpuMsPerHyperJob``: the splitter's and the global-scheduler's CPU from the publish to
  the last admission, per HyperJob (what admitting costs them, whatever else the machine runs), and
  ``admissionCoreShare``: each service's CPU over that time (how much of a core each had meanwhile;
  ``all``: the system's, of the machine's cores);
- CPU milliseconds per pod of each service (``/proc/<pid>/stat``), NATS messages in and out per
  pod (``/varz``), Redis commands per pod (``INFO commandstats``);
- ``idleCpuPercent``: the services' CPU at rest at this fleet size, in % of one core (per process too);
- ``nodesSeen``/``nodesTotal``: Ready nodes in the cluster-schedulers' capacity summaries (their
  view), at rest; ``nodesSeenMin`` is the lowest seen while the HyperJobs were placed.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import string
import sys
import tempfile
import time
import urllib.request
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import msgspec

from hyperjob import events
from hyperjob.bus import BusError
from hyperjob.events import subjects
from hyperjob.testkit.servers import NatsServer, RedisServer, free_port

from .config import ClusterConfig, UpConfig

GPU = "nvidia.com/gpu"
QUEUE = "bench"


# -- what to run (pure) ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    clusters: int
    nodes: int
    hyperjobs: int
    replicas: int
    split: bool = True
    schedule_period: str = "1s"
    one_at_a_time: bool = False  # each HyperJob submitted once the one before runs: latency on an idle fleet

    def cluster_names(self) -> list[str]:
        if self.clusters <= len(string.ascii_lowercase):
            return [f"cluster-{string.ascii_lowercase[i]}" for i in range(self.clusters)]
        return [f"cluster-{i + 1}" for i in range(self.clusters)]

    def up_config(self) -> UpConfig:
        return UpConfig(
            clusters=[
                ClusterConfig(name=name, nodes=self.nodes, pod_duration="never") for name in self.cluster_names()
            ],
            schedule_period=self.schedule_period,
        )

    @property
    def pods(self) -> int:
        return self.hyperjobs * self.replicas

    def shares(self, index: int) -> dict[str, int]:
        """How HyperJob ``index``'s replicas are split: evenly over every cluster (the first ones
        take the remainder), or all on one cluster, round-robin, with ``split=False``."""
        names = self.cluster_names()
        if not self.split:
            return {names[index % len(names)]: self.replicas}
        base, extra = divmod(self.replicas, len(names))
        shares = {name: base + (1 if i < extra else 0) for i, name in enumerate(names)}
        return {name: n for name, n in shares.items() if n > 0}

    def check(self) -> None:
        """The fleet must hold every pod at once (the pods never end): a clear error otherwise."""
        gpus = self.clusters * self.nodes * 8
        if self.pods > gpus:
            raise click.UsageError(
                f"--hyperjobs x --replicas = {self.pods} one-GPU pods do not fit {gpus} GPUs "
                f"(--clusters {self.clusters} x --nodes {self.nodes} x 8): add nodes or submit fewer"
            )
        if not self.split and self.replicas > self.nodes * 8:
            raise click.UsageError(f"--replicas {self.replicas} do not fit one cluster of {self.nodes} nodes")


def queue_manifest() -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": QUEUE},
        "spec": {"weight": 1, "reclaimable": True},
    }


def hyperjob_manifest(name: str, replicas: int, shares: Mapping[str, int]) -> dict[str, Any]:
    """A gang of ``replicas`` one-GPU trainers (minAvailable = replicas), split by ``shares``."""
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "HyperJob",
        "metadata": {"name": name},
        "spec": {
            "template": {
                "apiVersion": "batch.volcano.sh/v1alpha1",
                "kind": "Job",
                "spec": {
                    "minAvailable": replicas,
                    "schedulerName": "volcano",
                    "queue": QUEUE,
                    "tasks": [
                        {
                            "name": "trainer",
                            "replicas": replicas,
                            "template": {
                                "spec": {
                                    "containers": [
                                        {
                                            "name": "trainer",
                                            "image": "example.com/train:latest",
                                            "resources": {"requests": {"cpu": "8", "memory": "64Gi", GPU: "1"}},
                                        }
                                    ],
                                    "restartPolicy": "OnFailure",
                                }
                            },
                        }
                    ],
                },
            },
            "splitPolicy": {
                "strategy": "ByCluster",
                "clusters": [{"name": c, "replicas": n} for c, n in shares.items()],
            },
        },
    }


# -- what was measured (pure) ---------------------------------------------------------------------


@dataclass
class Counters:
    """Cumulative counters read at one instant."""

    at: float
    cpu: dict[str, float]  # process name -> CPU seconds
    nats_in: int = 0
    nats_out: int = 0
    redis_calls: int = 0


@dataclass
class Observed:
    """What the run saw: submit time, and when each HyperJob was accepted, admitted, Running."""

    submitted_at: float  # the first submit
    submitted: dict[str, float] = field(default_factory=dict)  # each HyperJob's submit
    accepted: dict[str, float] = field(default_factory=dict)
    admitted: dict[str, float] = field(default_factory=dict)
    running: dict[str, float] = field(default_factory=dict)
    nodes_seen_min: int | None = None
    cpu_at_submit: dict[str, float] = field(default_factory=dict)  # every process's CPU seconds
    cpu_at_admitted: dict[str, float] = field(default_factory=dict)  # ... once every HyperJob was admitted
    messages: list[tuple[float, str]] = field(default_factory=list)  # (when, subject family), with --timeline
    firsts: dict[tuple[str, str], float] = field(default_factory=dict)  # (family, job) -> first seen


def percentile(values: Sequence[float], share: float) -> float | None:
    """The nearest-rank percentile (``share`` in 0..1) of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * share // 1))  # ceil(n * share), at least the first
    return ordered[int(rank) - 1]


def family(subject: str, clusters: Sequence[str]) -> str:
    """A subject without its cluster, object and request names: ``sched.gang.control.cluster-a``
    -> ``sched.gang.control``, ``jobstate.cluster-a.job.0`` -> ``jobstate``."""
    tokens = subject.split(".")
    if tokens[0] == "state":
        return ".".join(tokens[:2])
    kept: list[str] = []
    for token in tokens[:3]:
        if token in clusters or tokens[0] in ("jobstate", "nodestatus", "heartbeat", "telemetry") and kept:
            break
        kept.append(token)
    return ".".join(kept) if tokens[:2] != ["hj", "result"] else "hj.result"


def timeline(seen: Sequence[tuple[float, str]], since: float) -> dict[str, dict[str, float]]:
    """Per subject family: how many messages, and when the first, the median and the last passed
    (seconds after ``since``), in the order the families first appeared."""
    times: dict[str, list[float]] = {}
    for at, name in seen:
        times.setdefault(name, []).append(at - since)
    return {
        name: {"count": len(ts), "first": round(ts[0], 2), "p50": round(ts[len(ts) // 2], 2), "last": round(ts[-1], 2)}
        for name, ts in sorted(times.items(), key=lambda item: item[1][0])
    }


def stages(firsts: Mapping[tuple[str, str], float], since: float) -> dict[str, dict[str, float]]:
    """Per subject family that names a job: when its first message about each job passed, as the
    median and the 90th percentile over jobs (seconds after ``since``), in pipeline order."""
    times: dict[str, list[float]] = {}
    for (name, _job), at in firsts.items():
        times.setdefault(name, []).append(at - since)
    out = {}
    for name, ts in times.items():
        ts.sort()
        out[name] = {"jobs": len(ts), "p50": round(ts[len(ts) // 2], 2), "p90": round(ts[int(len(ts) * 0.9)], 2)}
    return dict(sorted(out.items(), key=lambda item: item[1]["p50"]))


def job_of(subject: str, payload: bytes) -> str:
    """The job (child) a message is about, when it names one."""
    if subject.startswith("jobstate."):
        return subject.split(".")[2]
    try:
        data = msgspec.json.decode(payload)
    except msgspec.DecodeError:
        return ""
    if not isinstance(data, dict):
        return ""
    return str(data.get("child") or data.get("job") or "")


def service_of(process: str) -> str:
    """``cluster_scheduler@cluster-a`` -> ``cluster_scheduler``."""
    return process.split("@", 1)[0]


def _rate(count: int, times: Mapping[str, float], since: float) -> float | None:
    if not times or len(times) < count:
        return None
    seconds = max(times.values()) - since
    return round(count / seconds, 1) if seconds > 0 else None


ADMITTING = ("splitter", "global_scheduler")


def admission_cpu(observed: Observed, hyperjobs: int) -> dict[str, dict[str, float]]:
    """CPU milliseconds per HyperJob of the admitting services from the publish to the last
    admission, and the share of one core each service had meanwhile (empty unless every one was
    admitted)."""
    if not observed.cpu_at_admitted or len(observed.admitted) < hyperjobs or hyperjobs == 0:
        return {}
    window = max(max(observed.admitted.values()) - observed.submitted_at, 1e-9)
    used: dict[str, float] = {}
    for name, seconds in observed.cpu_at_admitted.items():
        service = service_of(name)
        used[service] = used.get(service, 0.0) + seconds - observed.cpu_at_submit.get(name, 0.0)
    return {
        "admissionCpuMsPerHyperJob": {
            k: round(1000.0 * v / hyperjobs, 2) for k, v in sorted(used.items()) if k in ADMITTING
        },
        "admissionCoreShare": {k: round(v / window, 2) for k, v in sorted(used.items())}
        | {"all": round(sum(used.values()) / window, 2)},
    }


def report(
    plan: Plan,
    idle: tuple[Counters, Counters],
    run: tuple[Counters, Counters],
    observed: Observed,
    nodes_seen: int,
    load: Mapping[str, Sequence[float]],
) -> dict[str, Any]:
    """The figures of one run as one JSON-able object (camelCase keys, seconds, rounded)."""
    latencies = [t - observed.submitted.get(name, observed.submitted_at) for name, t in observed.running.items()]
    ran = len(observed.running)
    pods = ran * plan.replicas
    last = max(observed.running.values(), default=observed.submitted_at)
    elapsed = last - observed.submitted_at
    idle_seconds = max(idle[1].at - idle[0].at, 1e-9)
    idle_by_process = {
        name: round(100.0 * (idle[1].cpu[name] - idle[0].cpu.get(name, 0.0)) / idle_seconds, 1) for name in idle[1].cpu
    }
    per_pod = max(pods, 1)
    cpu_ms_by_service: dict[str, float] = {}
    for name, seconds in run[1].cpu.items():
        used = seconds - run[0].cpu.get(name, 0.0)
        cpu_ms_by_service[service_of(name)] = cpu_ms_by_service.get(service_of(name), 0.0) + used
    services_idle = sum(v for k, v in idle_by_process.items() if k not in ("nats-server", "redis-server"))

    def rounded(value: float | None, digits: int = 3) -> float | None:
        return None if value is None else round(value, digits)

    return {
        "clusters": plan.clusters,
        "nodesPerCluster": plan.nodes,
        "hyperjobs": plan.hyperjobs,
        "replicas": plan.replicas,
        "split": plan.split,
        "oneAtATime": plan.one_at_a_time,
        "hyperjobsRunning": ran,
        "podsRunning": pods,
        "secondsToAllRunning": rounded(elapsed) if ran == plan.hyperjobs and ran else None,
        "podsPerSecond": round(pods / elapsed, 1) if elapsed > 0 else None,
        "submitToRunningP50": rounded(percentile(latencies, 0.50)),
        "submitToRunningP99": rounded(percentile(latencies, 0.99)),
        "submitToRunningMax": rounded(max(latencies, default=None) if latencies else None),
        "acceptedPerSecond": _rate(plan.hyperjobs, observed.accepted, observed.submitted_at),
        "admittedPerSecond": _rate(plan.hyperjobs, observed.admitted, observed.submitted_at),
        **admission_cpu(observed, plan.hyperjobs),
        "cpuMsPerPod": {k: round(1000.0 * v / per_pod, 3) for k, v in sorted(cpu_ms_by_service.items())},
        "cpuMsPerPodServices": round(
            1000.0 * sum(v for k, v in cpu_ms_by_service.items() if k not in ("nats-server", "redis-server")) / per_pod,
            3,
        ),
        "natsMessagesInPerPod": round((run[1].nats_in - run[0].nats_in) / per_pod, 2),
        "natsMessagesOutPerPod": round((run[1].nats_out - run[0].nats_out) / per_pod, 2),
        "redisCommandsPerPod": round((run[1].redis_calls - run[0].redis_calls) / per_pod, 2),
        "idleCpuPercent": round(services_idle, 1),
        "idleCpuPercentByProcess": dict(sorted(idle_by_process.items())),
        "nodesSeen": nodes_seen,
        "nodesSeenMin": nodes_seen if observed.nodes_seen_min is None else observed.nodes_seen_min,
        "nodesTotal": plan.clusters * plan.nodes,
        "loadAverage": {k: [round(x, 2) for x in v] for k, v in load.items()},
    } | (
        {
            "timeline": timeline(observed.messages, observed.submitted_at),
            "stages": stages(observed.firsts, observed.submitted_at),
        }
        if observed.messages
        else {}
    )


def render(figures: Mapping[str, Any]) -> str:
    lines = []
    for key, value in figures.items():
        if isinstance(value, dict):
            inner = ", ".join(f"{k}={v}" for k, v in value.items())
            lines.append(f"{key:>24}: {inner}")
        else:
            lines.append(f"{key:>24}: {value}")
    return "\n".join(lines)


# -- reading the processes and servers ------------------------------------------------------------


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a live process (``/proc/<pid>/stat``), 0 if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    return (int(fields[11]) + int(fields[12])) / _TICK


def nats_varz(monitor_url: str) -> tuple[int, int]:
    with urllib.request.urlopen(f"{monitor_url}/varz", timeout=5) as answer:  # noqa: S310 - loopback
        varz = json.load(answer)
    return int(varz["in_msgs"]), int(varz["out_msgs"])


# -- the run --------------------------------------------------------------------------------------


class LiveBench:
    def __init__(self, plan: Plan, home: Path, echo: Any, trace: bool = False) -> None:
        self.plan = plan
        self.trace = trace
        self.home = home
        self.echo = echo
        self.nats: NatsServer | None = None
        self.redis: RedisServer | None = None
        self.system: Any = None

    def processes(self) -> dict[str, int]:
        pids = {s.name: s.proc.pid for s in self.system.services if s.proc is not None}
        for server in (self.nats, self.redis):
            if server is not None and server.pid is not None:
                pids[server.name] = server.pid
        return pids

    def cpu(self) -> dict[str, float]:
        return {name: cpu_seconds(pid) for name, pid in self.processes().items()}

    def start(self, stack: ExitStack) -> None:
        from .up import System  # noqa: PLC0415 - the CLI imports its commands lazily

        self.nats = stack.enter_context(NatsServer(self.home / "nats", monitor_port=free_port()))
        self.redis = stack.enter_context(RedisServer(self.home / "redis", appendonly=True))
        self.system = System(self.plan.up_config())
        stack.callback(self.system.stop)
        self.system.start(self.nats.url, self.redis.url)

    async def counters(self, redis: Any) -> Counters:
        assert self.nats is not None
        cpu = self.cpu()
        nats_in, nats_out = await asyncio.to_thread(nats_varz, self.nats.monitor_url)
        stats = await redis.info("commandstats")
        calls = sum(int(v["calls"]) for v in stats.values() if isinstance(v, dict))
        return Counters(at=time.monotonic(), cpu=cpu, nats_in=nats_in, nats_out=nats_out, redis_calls=calls)

    async def run(self, idle_seconds: float, timeout: float, settle_seconds: float = 3.0) -> dict[str, Any]:
        import redis.asyncio as aioredis  # noqa: PLC0415

        from .client import connect  # noqa: PLC0415
        from .config import Endpoints  # noqa: PLC0415

        assert self.nats is not None and self.redis is not None
        client = await connect(Endpoints(nats_url=self.nats.url, redis_url=self.redis.url))
        redis = aioredis.from_url(self.redis.url)
        try:
            await self._wait_ready(client, timeout)
            answer = await client.apply(queue_manifest())
            if not isinstance(answer, events.RequestAccepted):
                raise click.ClickException(f"the bench queue was rejected: {answer.reason}")
            await asyncio.sleep(settle_seconds)  # the queue's news, the agents' first telemetry
            load = {"idle": os.getloadavg()}
            idle_start = await self.counters(redis)
            await asyncio.sleep(idle_seconds)
            idle_end = await self.counters(redis)
            nodes_seen = await self._nodes_seen(client)
            self.echo(f"idle: {nodes_seen}/{self.plan.clusters * self.plan.nodes} nodes seen; submitting ...")
            run_start = await self.counters(redis)
            observed = await self._submit_and_wait(client, timeout)
            run_end = await self.counters(redis)
            load["run"] = os.getloadavg()
            return report(self.plan, (idle_start, idle_end), (run_start, run_end), observed, nodes_seen, load)
        finally:
            await redis.aclose()
            await client.close()

    async def _nodes_seen(self, client: Any) -> int:
        return sum(c.ready_nodes for c in (await client.capacities()).values())

    async def _wait_ready(self, client: Any, timeout: float) -> None:
        """Until every service started and every cluster-scheduler sees its whole fleet."""
        wanted = self.plan.clusters * self.plan.nodes
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            capacities = await client.capacities()
            seen = sum(c.ready_nodes for c in capacities.values())
            if (
                len(capacities) == self.plan.clusters
                and seen == wanted
                and len(await client.instances()) >= len(self.system.services)
            ):
                return
            for note in self.system.supervise_once():
                self.echo(note)
            await asyncio.sleep(0.5)
        raise click.ClickException(f"the fleet did not come up within {timeout:g}s: {seen}/{wanted} nodes seen")

    async def _submit_and_wait(self, client: Any, timeout: float) -> Observed:
        plan = self.plan
        names = [f"bench-{i:05d}" for i in range(plan.hyperjobs)]
        requests = {
            name: events.ApplyManifest(
                event_id=events.new_request_id(),
                occurred_at=time.time(),
                producer="hyperjob-bench",
                manifest=hyperjob_manifest(name, plan.replicas, plan.shares(i)),
            )
            for i, name in enumerate(names)
        }
        by_request = {msg.event_id: name for name, msg in requests.items()}
        observed = Observed(submitted_at=time.monotonic())
        statuses = events.decoder(events.HyperJobStatusChanged)
        admissions = events.decoder(events.OwnerAdmitted)
        answers = events.decoder(events.RequestAccepted, events.RequestRejected)
        done = asyncio.Event()

        async def on_status(delivery: Any) -> None:
            status = statuses.decode(delivery.data)
            if status.name in requests and status.phase == "Running" and status.name not in observed.running:
                observed.running[status.name] = time.monotonic()
                if len(observed.running) == len(names):
                    done.set()

        async def on_admitted(delivery: Any) -> None:
            name = admissions.decode(delivery.data).name
            if name in requests and name not in observed.admitted:
                observed.admitted[name] = time.monotonic()
                if len(observed.admitted) == len(names):
                    observed.cpu_at_admitted = self.cpu()

        async def on_answer(delivery: Any) -> None:
            request = delivery.subject.rsplit(".", 1)[-1]
            if request in by_request:
                answer = answers.decode(delivery.data)
                if isinstance(answer, events.RequestRejected):
                    self.echo(f"rejected: {by_request[request]}: {answer.reason}")
                observed.accepted.setdefault(by_request[request], time.monotonic())

        watches = [
            await client.bus.watch(subjects.HYPERJOB_STATUS, on_status),
            await client.bus.watch(subjects.OWNER_ADMITTED, on_admitted),
            await client.bus.watch(subjects.result("*"), on_answer),
        ]
        tracer = await self._trace(observed) if self.trace else None
        try:
            observed.cpu_at_submit = self.cpu()
            observed.submitted_at = time.monotonic()
            batches = [[m] for m in requests.values()] if plan.one_at_a_time else [list(requests.values())]
            for batch in batches:
                now = time.monotonic()
                observed.submitted.update({by_request[m.event_id]: now for m in batch})
                await client.bus.publish_many(
                    [(subjects.APPLY, m.event_id, events.encode(m)) for m in batch], timeout=60.0
                )
                if plan.one_at_a_time:
                    await self._until_running(observed, by_request[batch[0].event_id], timeout)
            if names:
                await self._follow(client, observed, done, timeout)
        finally:
            for watch in watches:
                await watch.stop()
            if tracer is not None:
                await tracer.close()
        return observed

    async def _trace(self, observed: Observed) -> Any:
        """Note every message published (a core subscription to everything but JetStream's own
        traffic): when each kind of message flowed, to see where a run spends its time."""
        import nats  # noqa: PLC0415

        assert self.nats is not None
        clusters = self.plan.cluster_names()
        connection = await nats.connect(self.nats.url, name="hyperjob-bench-trace")

        seen: set[tuple[str, str]] = set()

        async def on_msg(msg: Any) -> None:
            if msg.subject.startswith(("_INBOX", "$JS")):
                return
            # A message a consumer is handed may pass this subscription again under its subject:
            # count each published message once, by its id.
            key = (msg.subject, (msg.headers or {}).get("Nats-Msg-Id", ""))
            if key[1] and key in seen:
                return
            seen.add(key)
            now, name = time.monotonic(), family(msg.subject, clusters)
            observed.messages.append((now, name))
            if not name.startswith("state."):
                job = job_of(msg.subject, msg.data)
                if job:
                    observed.firsts.setdefault((name, job), now)

        await connection.subscribe(">", cb=on_msg)
        return connection

    async def _until_running(self, observed: Observed, name: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while name not in observed.running and time.monotonic() < deadline:
            await asyncio.sleep(0.005)

    async def _follow(self, client: Any, observed: Observed, done: asyncio.Event, timeout: float) -> None:
        """Wait for every HyperJob to run, noting the scheduler's view and saying how far it got."""
        started, last_note, last_count, progressed = time.monotonic(), 0.0, -1, time.monotonic()
        seen = -1
        while not done.is_set():
            now = time.monotonic()
            if now - started > timeout:
                self.echo(
                    f"timeout: {len(observed.running)}/{self.plan.hyperjobs} HyperJobs Running after {timeout:g}s"
                )
                return
            try:
                seen = await self._nodes_seen(client)
            except BusError as exc:  # a loaded machine may answer late: the next second asks again
                self.echo(f"could not read the capacity summaries: {exc}")
            else:
                observed.nodes_seen_min = (
                    seen if observed.nodes_seen_min is None else min(observed.nodes_seen_min, seen)
                )
            if len(observed.running) != last_count:
                last_count, progressed = len(observed.running), now
            if now - last_note >= 10.0:
                stalled = f"; no new Running for {now - progressed:.0f}s" if now - progressed >= 30.0 else ""
                self.echo(
                    f"[{now - started:6.1f}s] accepted {len(observed.accepted)} admitted {len(observed.admitted)} "
                    f"running {len(observed.running)}/{self.plan.hyperjobs}; nodes seen {seen}; "
                    f"load {os.getloadavg()[0]:.2f}{stalled}"
                )
                last_note = now
            for note in self.system.supervise_once():
                self.echo(note)
            try:
                await asyncio.wait_for(done.wait(), 1.0)
            except TimeoutError:
                pass


@click.command("live")
@click.option("--clusters", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--nodes", type=click.IntRange(min=1), default=500, show_default=True, help="8-GPU nodes per cluster")
@click.option("--hyperjobs", type=click.IntRange(min=0), default=100, show_default=True)
@click.option("--replicas", type=click.IntRange(min=1), default=64, show_default=True, help="one-GPU pods each")
@click.option(
    "--split/--no-split",
    default=True,
    show_default=True,
    help="split each HyperJob evenly across the clusters, or put each whole on one (round-robin)",
)
@click.option(
    "--one-at-a-time",
    is_flag=True,
    help="submit each HyperJob once the one before runs (submit->Running on an idle fleet), not all at once",
)
@click.option(
    "--settle",
    "settle_seconds",
    type=click.FloatRange(min=0.0),
    default=15.0,
    show_default=True,
    help="seconds between the whole fleet being seen and the idle measurement",
)
@click.option(
    "--idle", "idle_seconds", type=click.FloatRange(min=1.0), default=30.0, show_default=True, help="idle window"
)
@click.option("--timeout", type=click.FloatRange(min=1.0), default=600.0, show_default=True)
@click.option("--schedule-period", default="1s", show_default=True)
@click.option(
    "--scheduler-conf",
    type=click.Path(exists=True, dir_okay=False),
    help="volcano-scheduler.conf for every cluster-scheduler (default: the live default, with gpufrag)",
)
@click.option(
    "--timeline", "trace", is_flag=True, help="report when each kind of message flowed (costs the bench some CPU)"
)
@click.option(
    "--profile",
    type=click.Path(file_okay=False),
    help="directory where each service process writes its cProfile stats (<service>[-<cluster>].prof) at exit",
)
@click.option("--keep", is_flag=True, help="keep the run's directory (service logs) and print where it is")
@click.option("-o", "--output", type=click.Choice(["json", "table"]), default="table", show_default=True)
def bench_live(
    clusters: int,
    nodes: int,
    hyperjobs: int,
    replicas: int,
    split: bool,
    one_at_a_time: bool,
    settle_seconds: float,
    idle_seconds: float,
    timeout: float,
    schedule_period: str,
    scheduler_conf: str | None,
    trace: bool,
    profile: str | None,
    keep: bool,
    output: str,
) -> None:
    """The live system (NATS, Redis, every service as a process, a simulated fleet) under a burst of HyperJobs."""
    plan = Plan(clusters, nodes, hyperjobs, replicas, split, schedule_period, one_at_a_time)
    plan.check()
    home = Path(tempfile.mkdtemp(prefix="hyperjob-bench-live-"))
    os.environ["HYPERJOB_HOME"] = str(home)  # the services' logs and up's endpoints file go there
    if scheduler_conf:  # up.System hands its environment to every service process
        os.environ["CLUSTER_SCHEDULER_SCHEDULER_CONF"] = Path(scheduler_conf).read_text(encoding="utf-8")
    if profile:
        os.environ["HYPERJOB_PROFILE_DIR"] = str(Path(profile).resolve())  # each service writes its cProfile
        Path(profile).mkdir(parents=True, exist_ok=True)

    def echo(line: str) -> None:
        click.echo(line, err=True)

    bench = LiveBench(plan, home, echo, trace=trace)
    signal.signal(signal.SIGTERM, _interrupt)  # a killed bench still stops what it started
    try:
        with ExitStack() as stack:
            bench.start(stack)
            echo(f"{len(bench.system.services)} service processes up in {home}; waiting for the fleet ...")
            figures = asyncio.run(bench.run(idle_seconds, timeout, settle_seconds))
    finally:
        if keep:
            echo(f"kept {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)
    click.echo(json.dumps(figures, indent=2) if output == "json" else render(figures))
    sys.exit(0 if figures["hyperjobsRunning"] == hyperjobs else 1)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
