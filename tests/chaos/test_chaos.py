"""Chaos on the real processes (issue 14 item 5, issue 33): every service its own process as
``hyperjob up`` runs them (and restarts them), real ``nats-server`` and ``redis-server``, a bounded
load of HyperJobs across two clusters, and in turn: ``kill -9`` of each service, a NATS restart or
hang (``SIGSTOP``), a Redis restart, a Redis wipe (``FLUSHALL``), one cluster's control plane hung
while its nodes live, its node-agent killed, random kills every 5 s for 2 minutes. After each, the
audit: every HyperJob Completed, no pod started twice or running twice at once, no node booked
above its allocatable at any sample, no eviction or failover the fault did not call for, nothing
dead-lettered (nothing silently dropped: every submitted HyperJob has its final status).
``make test-chaos``; the figures are printed at the end."""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import signal
import tempfile
from pathlib import Path

import pytest

from tests.service import outage_kit

pytestmark = [pytest.mark.chaos, pytest.mark.timeout(900)]

# Where a failing run's service logs are kept (pytest's own temporary directories rotate away).
KEEP = Path(os.environ.get("HYPERJOB_CHAOS_LOGS", Path(tempfile.gettempdir()) / "hyperjob-chaos"))
BEFORE, AFTER = 12, 4  # HyperJobs submitted before the fault, and after it (the system still takes work)


async def kill_each_service(servers: outage_kit.Servers, run: outage_kit.Run) -> None:
    assert run.processes is not None
    for name in run.processes.names:
        run.processes.kill(name)
        await asyncio.sleep(6)  # up's supervisor restarts it after 1 s; let it find its feet


async def nats_restart(servers: outage_kit.Servers, run: outage_kit.Run) -> None:
    await servers.outage(servers.nats, 5)


async def redis_restart(servers: outage_kit.Servers, run: outage_kit.Run) -> None:
    await servers.outage(servers.redis, 5)


async def nats_hang(servers: outage_kit.Servers, run: outage_kit.Run) -> None:
    assert servers.nats.pid is not None
    os.kill(servers.nats.pid, signal.SIGSTOP)
    await asyncio.sleep(10)
    os.kill(servers.nats.pid, signal.SIGCONT)


async def control_plane_hang(servers: outage_kit.Servers, run: outage_kit.Run) -> None:
    """c1's scheduler and job-controller stopped while its node-agent lives: a hung control
    plane, not a lost cluster (the fleet must not move its children)."""
    assert run.processes is not None
    hung = ["cluster_scheduler@c1", "job_controller@c1"]
    for name in hung:
        run.processes.kill(name, signal.SIGSTOP)
    await asyncio.sleep(40)
    for name in hung:
        run.processes.kill(name, signal.SIGCONT)


async def agent_kill(servers: outage_kit.Servers, run: outage_kit.Run) -> None:
    assert run.processes is not None
    run.processes.kill("node_agent@c1")
    await asyncio.sleep(6)


async def random_kills(servers: outage_kit.Servers, run: outage_kit.Run) -> None:
    """``kill -9`` of a service drawn at random (seeded: the same draws every run) every 5 s for
    2 minutes, one still in its restart back-off left alone; a HyperJob applied with each, so work
    is in flight throughout."""
    assert run.processes is not None
    draw = random.Random(33)  # noqa: S311 - a reproducible draw, not a secret
    for _ in range(24):
        run.processes.kill(draw.choice(run.processes.names))
        await run.send_one(duration="10s")
        await asyncio.sleep(5)


FAULTS = {
    "kill -9 each service": kill_each_service,
    "NATS restart": nats_restart,
    "NATS hang": nats_hang,
    "Redis restart": redis_restart,
    "Redis wipe": outage_kit.redis_wipe,
    "control-plane hang": control_plane_hang,
    "agent kill": agent_kill,
    "random kills": random_kills,
}


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_the_system_rides_out_the_fault_with_nothing_lost_doubled_or_overbooked(tmp_path, fault) -> None:
    with outage_kit.Servers(tmp_path) as servers:
        run = outage_kit.Run(servers.nats.url, servers.redis.url, home=tmp_path / "home")
        async with run.running():
            await run.submit(BEFORE, duration="20s")
            await run.until_running(8)
            await FAULTS[fault](servers, run)
            await run.submit(AFTER, duration="5s", first=len(run.submitted))
            await run.until_done(timeout=300)
            figures = await run.audit()
    outage_kit.REPORTED[fault] = msgspec_dict(figures)
    try:
        assert figures.lost == 0, figures.phases
        assert figures.completed == figures.submitted
        assert (figures.started_twice, figures.concurrent, figures.over, figures.dlq) == (0, 0, 0, 0), figures
        assert (figures.evicted, figures.moved) == (0, 0), figures
        assert figures.samples > 50
    except AssertionError:
        kept = KEEP / fault.replace(" ", "-")
        shutil.rmtree(kept, ignore_errors=True)
        shutil.copytree(tmp_path / "home" / "logs", kept)
        raise AssertionError(f"{fault}: {figures} (the services' logs are kept in {kept})") from None


def msgspec_dict(figures: outage_kit.Figures) -> dict[str, object]:
    import msgspec  # noqa: PLC0415

    return msgspec.structs.asdict(figures)
