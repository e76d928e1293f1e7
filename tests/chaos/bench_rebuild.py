"""What rebuilding a wiped Redis from the changelogs costs, at 1,000 and 10,000 HyperJobs.

A benchmark, not a test (``.venv/bin/python -m tests.chaos.bench_rebuild [N ...]`` in the
repository). It runs a small fleet (``outage_kit``: 2 clusters, in-process services) through a
real load to completion, reads every instance's changelog (``state.<instance>.<kind>.<name>``:
the documents each keeps), and copies
the per-HyperJob documents N / load times under new names into a fresh STATE stream: each
instance's changelog as it would be after N HyperJobs ran. Then Redis is wiped and every
instance restores as it does when it finds its sentinel gone (``Runtime.restore_from_changelog``:
one ordered read of the last entry per subject, one pipelined write), one after another and all
at once (as the fleet does). Prints the changelog's size and the rebuild time per instance.
"""

from __future__ import annotations

import asyncio
import re
import sys
import tempfile
import time
from pathlib import Path

import structlog

from hyperjob.events.subjects import STREAMS
from hyperjob.servicekit import AsyncioTimers, Runtime, WallClock, parse_state_subject, state_subject
from hyperjob.testkit.isolation import new_namespace, open_nats_bus, open_redis_store
from tests.service import outage_kit
from tests.service import service_helpers as sh

LOAD = 8  # HyperJobs in the real run the changelogs are copied from
PER_HYPERJOB = re.compile(r"^(.*?)\bhj(\d+)\b")


async def changelogs(servers: outage_kit.Servers) -> tuple[dict[str, dict[str, sh.Stored]], list[str]]:
    """Every instance's latest changelog entries after a real run of ``LOAD`` HyperJobs."""
    run = outage_kit.Run(servers.nats.url, servers.redis.url, nodes=4, period=0.2)
    async with run.running():
        await run.submit(LOAD, duration="2s")
        await run.until_done(timeout=120)
        instances = list(run.fleet.runtimes)
        logs = {i: await run.probe.changelog(i) for i in instances}
    return logs, instances


def renamed(name: str, copy: int) -> str | None:
    """A per-HyperJob document's name in copy ``copy`` (None: not a per-HyperJob document)."""
    match = PER_HYPERJOB.search(name)
    if match is None:
        return None
    return name.replace(f"hj{match.group(2)}", f"hj{match.group(2)}x{copy}", 1)


async def rebuild(servers: outage_kit.Servers, logs: dict[str, dict[str, sh.Stored]], hyperjobs: int) -> None:
    copies = max(1, hyperjobs // LOAD)
    namespace = new_namespace()
    async with (
        open_nats_bus(servers.nats.url, namespace, STREAMS) as bus,
        open_redis_store(servers.redis.url, namespace) as store,
    ):
        entries, size = 0, 0
        for instance, latest in logs.items():
            batch = []
            for key, entry in latest.items():
                kind, name = parse_state_subject(instance, entry.subject)
                names = [n for c in range(copies) if (n := renamed(name, c)) is not None] or [name]
                for new in names:
                    subject = state_subject(instance, kind, new)
                    batch.append((subject, f"{subject}#{key}", entry.data, entry.headers))
            for start in range(0, len(batch), 2000):
                await bus.publish_many(
                    [sh_output(s, m, d, h) for s, m, d, h in batch[start : start + 2000]], timeout=60
                )
            entries += len(batch)
            size += sum(len(d) for _, _, d, _ in batch)
        runtimes = [Runtime("bench", i, bus, store, clock=WallClock(), timers=AsyncioTimers(WallClock())) for i in logs]
        await outage_kit.Servers.wipe(servers)
        timings: dict[str, tuple[int, float]] = {}
        for rt in runtimes:
            started = time.perf_counter()
            restored = await rt.restore_from_changelog()
            timings[rt.instance] = (restored, time.perf_counter() - started)
        await outage_kit.Servers.wipe(servers)
        started = time.perf_counter()
        await asyncio.gather(*(rt.restore_from_changelog() for rt in runtimes))
        together = time.perf_counter() - started
    print(f"{hyperjobs} HyperJobs: {entries} changelog entries, {size / 1e6:.1f} MB", flush=True)
    for instance, (docs, seconds) in sorted(timings.items(), key=lambda kv: -kv[1][1]):
        print(f"  {instance:<24} {docs:>7} documents  {seconds:6.2f} s", flush=True)
    serial = sum(s for _, s in timings.values())
    print(f"  one after another: {serial:.2f} s; all at once (as the fleet does): {together:.2f} s", flush=True)


def sh_output(subject: str, msg_id: str, data: bytes, headers: dict[str, str]) -> object:
    from hyperjob.store import Output  # noqa: PLC0415

    keep = {k: v for k, v in headers.items() if k.startswith("Hyperjob-")}
    return Output(subject=subject, msg_id=msg_id, payload=data, headers=keep or None)


async def main(sizes: list[int]) -> None:
    with tempfile.TemporaryDirectory() as tmp, outage_kit.Servers(Path(tmp)) as servers:
        logs, _ = await changelogs(servers)
        for n in sizes:
            await rebuild(servers, logs, n)


if __name__ == "__main__":
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(30))
    asyncio.run(main([int(a) for a in sys.argv[1:]] or [1000, 10000]))
