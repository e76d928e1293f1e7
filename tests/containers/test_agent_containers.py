"""A node-agent in ``mode: container`` (its own ``build`` on a runtime over real JetStream and Redis,
as ``hyperjob up`` runs it) with real podman containers: a pod is reported Running, then Failed
with its container's exit code (one over its memory limit: 137, ``OOMKilled``); when the agent
stops, a standby replica that takes over adopts the container it left running (the same container:
nothing started twice, nothing reported lost); ``kill -9`` of that container is then reported
Failed with 137, and no container of the agent is left behind.

Prints the seconds from a pod's start message until its container runs (bind → running).
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from hyperjob import events
from hyperjob.events import subjects
from hyperjob.services.node_agent.app import agent_name, build
from hyperjob.services.node_agent.config import Settings
from hyperjob.services.node_agent.containerpods import LABEL_AGENT, container_name
from hyperjob.testkit.isolation import new_namespace, open_nats_bus, open_redis_store
from hyperjob.testkit.servers import NatsServer, RedisServer
from tests.containers import podman_kit
from tests.containers.observe import FIGURES
from tests.service import service_helpers as sh

pytestmark = [pytest.mark.containers, pytest.mark.timeout(600)]  # a cold machine builds the base first

C = f"hj27a{os.getpid()}"
LEASE = 2.0  # seconds: how long a standby waits for a stopped agent's lease


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    with NatsServer(tmp_path_factory.mktemp("nats")) as nats, RedisServer(tmp_path_factory.mktemp("redis")) as redis:
        yield nats.url, redis.url


@pytest.fixture
async def wired(
    servers: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[object, object, sh.Probe]]:
    monkeypatch.setenv("CONTAINERS_CONF", str(podman_kit.CONTAINERS_CONF))  # the agent passes it on to podman
    namespace = new_namespace()
    async with (
        open_nats_bus(servers[0], namespace, subjects.STREAMS) as bus,
        open_redis_store(servers[1], new_namespace()) as store,
    ):
        probe = await sh.probe_for(servers[0], namespace)
        try:
            yield bus, store, probe
        finally:
            await probe.close()


def settings(work_dir: Path) -> Settings:
    return Settings(
        cluster=C,
        nodes=1,
        mode="container",
        telemetry="off",
        heartbeat_period=1.0,
        work_dir=str(work_dir),
        kill_grace=2,
    )


def start(pod: str, image: str, script: str) -> events.StartPods:
    return sh.message(
        events.StartPods,
        cluster=C,
        job="j",
        job_version=0,
        pods=[
            events.PodStart(
                pod=pod,
                uid=f"{pod}-uid",
                node=f"{C}-node-0",
                task="worker",
                image=image,
                command=["sh", "-c", script],
                restart_policy="Never",
                limits={"memory": "64Mi"},
            )
        ],
    )


async def reports(probe: sh.Probe, pod: str) -> list[tuple[str, int | None, str]]:
    return [
        (r.phase, r.exit_code, r.reason)
        for m in await probe.decoded(subjects.pod_phases(C), events.PodPhasesReported)
        for r in m.reports
        if r.pod == pod
    ]


async def reports_reach(probe: sh.Probe, pod: str, count: int) -> list[tuple[str, int | None, str]]:
    async def enough() -> list[tuple[str, int | None, str]]:
        found = await reports(probe, pod)
        return found if len(found) >= count else []

    return await sh.until(enough, what=f"{count} reports of {pod}")


def state(name: str) -> dict[str, str]:
    done = podman_kit.podman(
        "inspect", "--format", "{{.Id}} {{.State.Status}} {{.State.Pid}} {{.State.StartedAt}}", name, check=False
    )
    if done.returncode != 0:
        return {}
    fields = done.stdout.split(maxsplit=3)
    return dict(zip(("id", "status", "pid", "started"), fields, strict=True))


def containers_of(agent: str) -> list[str]:
    found = podman_kit.podman("ps", "--all", "--filter", f"label={LABEL_AGENT}={agent}", "--format", "{{.Names}}")
    return found.stdout.split()


async def test_an_agent_runs_reports_and_adopts_real_containers(wired, tmp_path: Path) -> None:
    image = podman_kit.ensure_base_image()
    bus, store, probe = wired
    s = settings(tmp_path)
    agent = agent_name(s)
    sleeper = container_name(agent, "sleeper")
    try:
        first = sh.running("node-agent", build, s, bus, store, instance=agent, lease_ttl=LEASE)
        await first.__aenter__()
        await sh.send(bus, subjects.start_pods(C), start("ends", image, "echo bye; exit 3"))
        hog = "python3 -c 'b = bytearray(512 * 2**20)'"  # over its 64Mi: what `get pods` shows OOMKilled
        await sh.send(bus, subjects.start_pods(C), start("hog", image, hog))
        sent = time.monotonic()
        await sh.send(bus, subjects.start_pods(C), start("sleeper", image, "sleep 600"))
        await sh.until(lambda: state(sleeper).get("status") == "running", what="the sleeper's container running")
        FIGURES["container mode: start message → container running"] = f"{time.monotonic() - sent:.2f} s"
        assert await reports_reach(probe, "ends", 2) == [("Running", None, ""), ("Failed", 3, "Error")]
        assert await reports_reach(probe, "hog", 2) == [("Running", None, ""), ("Failed", 137, "OOMKilled")]
        before = state(sleeper)

        # A second agent waits as a standby and takes over when the first one stops; the first
        # one's container runs on and is adopted, not started again nor reported lost.
        async with sh.running("node-agent", build, s, bus, store, instance=agent, lease_ttl=LEASE) as (rt, second):
            assert not rt.active
            await first.__aexit__(None, None, None)
            assert state(sleeper) == before
            await sh.until(lambda: "sleeper" in second.runner.running, what="the sleeper adopted")
            assert state(sleeper) == before and containers_of(agent) == [sleeper]  # the same one, not a second
            assert await reports(probe, "sleeper") == [("Running", None, "")]  # nothing reported lost
            os.kill(int(before["pid"]), 9)
            assert await reports_reach(probe, "sleeper", 2) == [("Running", None, ""), ("Failed", 137, "Error")]
            await sh.until(lambda: not second.pods.rows, what="the pods gone from the agent's table")
        assert containers_of(agent) == []
    finally:
        for name in containers_of(agent):
            podman_kit.podman("rm", "--force", "--time", "0", name, check=False)
