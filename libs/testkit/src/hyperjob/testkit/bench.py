"""Measure the infrastructure: ``python -m testkit.bench [MODE] [-n N] [--batch B] [--no-changelog]``.

``consume``: publish ``n`` messages with ``publish_many``, then consume them with a no-op handler
through one durable pull consumer (the bus alone). ``pipeline``: the same messages through what
every service runs, ``servicekit.Runtime``'s batch pipeline: decode each message of a batch, run
its handler (one table write, one output), then one ``store.commit`` for the batch (dedup markers,
version-checked writes, outbox), one ``publish_many`` (the outputs, then the changelog unless
``--no-changelog``), then the acks. A message counts once its unit of work is committed and
published. Starts its own ``nats-server`` and ``redis-server`` in a temporary directory unless
``--nats``/``--redis`` URLs are given. Not a test: numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
from collections.abc import Iterator

import msgspec

from hyperjob import events
from hyperjob.bus import Delivery, StreamSpec
from hyperjob.bus.natsbus import NatsBus
from hyperjob.servicekit import AsyncioTimers, Reaction, Runtime, WallClock
from hyperjob.store.redis_store import RedisStore
from hyperjob.telemetry import setup_logging

from .servers import NatsServer, RedisServer

STREAMS = [
    StreamSpec(name="BENCH", subjects=["bench.>"]),
    StreamSpec(name="OUT", subjects=["out.>"]),
    StreamSpec(name="STATE", subjects=["state.>"], max_msgs_per_subject=1),
]


class BenchTask(events.Message, frozen=True, kw_only=True, tag="bench.task.v1"):
    """A unit of work: place pod ``pod``."""

    n: int
    pod: str


class PodDoc(msgspec.Struct, frozen=True):
    n: int
    node: str


class Placer:
    """A service of one table: each task writes its pod's document and announces it."""

    def __init__(self, runtime: Runtime, n: int, batch: int) -> None:
        self.rt = runtime
        self.pods = runtime.table("pod", PodDoc)
        self.n = n
        self.committed: set[int] = set()
        self.done = asyncio.Event()
        runtime.subscribe("bench", "bench.>", {BenchTask: self.on_task}, batch=batch)

    def on_task(self, msg: BenchTask) -> Reaction:
        self.pods.put(msg.pod, PodDoc(msg.n, f"node-{msg.n % 64}"))
        reaction = Reaction().publish(
            f"out.bound.{msg.n % 16}", BenchTask(**self.rt.envelope(msg, "bound"), n=msg.n, pod=msg.pod)
        )

        async def counted() -> None:  # runs once the unit is committed and published
            self.committed.add(msg.n)
            if len(self.committed) >= self.n:
                self.done.set()

        reaction.after.append(counted)
        return reaction


@contextlib.contextmanager
def _servers(nats_url: str | None, redis_url: str | None) -> Iterator[tuple[str, str]]:
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        if nats_url is None:
            nats_url = stack.enter_context(NatsServer(f"{tmp}/nats")).url
        if redis_url is None:
            redis_url = stack.enter_context(RedisServer(f"{tmp}/redis")).url
        yield nats_url, redis_url


async def _publish(bus: NatsBus, n: int) -> float:
    t0 = time.perf_counter()
    for start in range(0, n, 10_000):
        await bus.publish_many(
            [
                (f"bench.task.{i % 16}", f"m{i}", events.encode(BenchTask(event_id=f"m{i}", n=i, pod=f"pod-{i}")))
                for i in range(start, min(n, start + 10_000))
            ]
        )
    return n / (time.perf_counter() - t0)


async def run(mode: str, nats_url: str, redis_url: str, n: int, batch: int, changelog: bool = True) -> dict[str, float]:
    ns = f"b{time.time_ns()}"
    bus = await NatsBus.connect(nats_url, STREAMS, namespace=ns)
    store = RedisStore(redis_url, ns)
    runtime: Runtime | None = None
    try:
        publish_rate = await _publish(bus, n)
        t1 = time.perf_counter()
        if mode == "consume":
            done, count = asyncio.Event(), 0

            async def noop(_: Delivery) -> None:
                nonlocal count
                count += 1
                if count == n:
                    done.set()

            await bus.consume("bench", "bench.>", noop, batch=batch)
            await asyncio.wait_for(done.wait(), timeout=600)
        else:
            clock = WallClock()
            runtime = Runtime(
                "bench", "bench", bus, store, clock=clock, timers=AsyncioTimers(clock), changelog=changelog
            )
            placer = Placer(runtime, n, batch)
            await runtime.start()
            await asyncio.wait_for(placer.done.wait(), timeout=600)
        return {"publish_per_s": publish_rate, f"{mode}_per_s": n / (time.perf_counter() - t1)}
    finally:
        if runtime is not None:
            await runtime.stop()
        await bus.close()
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", nargs="?", choices=["consume", "pipeline"], default="pipeline")
    parser.add_argument("--nats")
    parser.add_argument("--redis")
    parser.add_argument("-n", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--no-changelog", action="store_true", help="commit without publishing the changelog")
    parser.add_argument("--uvloop", action="store_true")
    args = parser.parse_args()
    if args.uvloop:
        import uvloop  # noqa: PLC0415

        uvloop.install()
    setup_logging("bench", "WARNING")
    with _servers(args.nats, args.redis) as (nats_url, redis_url):
        result = asyncio.run(run(args.mode, nats_url, redis_url, args.n, args.batch, not args.no_changelog))
    print(" ".join(f"{k}={v:,.0f}" for k, v in result.items()))


if __name__ == "__main__":
    main()
