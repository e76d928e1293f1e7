"""Chaos on the real processes (issue 14 item 5): every service its own process as ``hyperjob up``
runs them (and restarts them), real ``nats-server`` and ``redis-server``, a bounded load of
HyperJobs across two clusters, and in turn: ``kill -9`` of each service, a NATS restart, a Redis
restart, a Redis wipe (``FLUSHALL``). After each, the audit: every HyperJob Completed, no pod
started twice, no node booked above its allocatable at any sample, no eviction or failover the
fault did not call for, nothing dead-lettered (nothing silently dropped: every submitted
HyperJob has its final status). ``make test-chaos``; the figures are printed at the end."""

from __future__ import annotations

import asyncio
import os
import shutil
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


FAULTS = {
    "kill -9 each service": kill_each_service,
    "NATS restart": nats_restart,
    "Redis restart": redis_restart,
    "Redis wipe": outage_kit.redis_wipe,
}


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_the_system_rides_out_the_fault_with_nothing_lost_doubled_or_overbooked(tmp_path, fault) -> None:
    with outage_kit.Servers(tmp_path) as servers:
        run = outage_kit.Run(servers.nats.url, servers.redis.url, home=tmp_path / "home")
        async with run.running():
            await run.submit(BEFORE, duration="20s")
            await run.until_running(8)
            await FAULTS[fault](servers, run)
            await run.submit(AFTER, duration="5s", first=BEFORE)
            await run.until_done(timeout=300)
            figures = await run.audit()
    outage_kit.REPORTED[fault] = msgspec_dict(figures)
    try:
        assert figures.lost == 0, figures.phases
        assert figures.completed == BEFORE + AFTER
        assert (figures.started_twice, figures.over, figures.dlq) == (0, 0, 0), figures
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
