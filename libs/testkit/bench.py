"""Measure the bus: ``python -m bus.bench [--url nats://...] [-n 50000] [--batch 500] [--memory]``.

Publishes ``n`` messages with ``publish_many`` and consumes them with a no-op handler through one
durable pull consumer; prints messages per second for both. Starts its own ``nats-server`` in a
temporary directory unless ``--url`` is given. Not a test: numbers vary with the machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
from collections.abc import Iterator

from telemetry import setup_logging
from testkit.servers import NatsServer

from .model import Delivery, StreamSpec
from .natsbus import NatsBus


@contextlib.contextmanager
def _server(url: str | None) -> Iterator[str]:
    if url:
        yield url
        return
    with tempfile.TemporaryDirectory() as tmp, NatsServer(tmp) as server:
        yield server.url


async def run(url: str, n: int, batch: int, concurrency: int, size: int) -> dict[str, float]:
    bus = await NatsBus.connect(url, [StreamSpec(name="BENCH", subjects=["bench.>"])], namespace=f"b{time.time_ns()}")
    payload = b"x" * size
    try:
        t0 = time.perf_counter()
        for start in range(0, n, 10_000):
            await bus.publish_many([(f"bench.s.{i % 16}", f"m{i}", payload) for i in range(start, min(n, start + 10_000))])
        publish_rate = n / (time.perf_counter() - t0)
        done = asyncio.Event()
        count = 0

        async def handler(_: Delivery) -> None:
            nonlocal count
            count += 1
            if count == n:
                done.set()

        t1 = time.perf_counter()
        sub = await bus.consume("bench", "bench.>", handler, batch=batch, concurrency=concurrency)
        await asyncio.wait_for(done.wait(), timeout=300)
        consume_rate = n / (time.perf_counter() - t1)
        await sub.stop()
    finally:
        await bus.close()
    return {"publish_per_s": publish_rate, "consume_per_s": consume_rate}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url")
    parser.add_argument("-n", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--uvloop", action="store_true")
    args = parser.parse_args()
    if args.uvloop:
        import uvloop  # noqa: PLC0415
        uvloop.install()
    setup_logging("bench", "WARNING")
    with _server(args.url) as url:
        result = asyncio.run(run(url, args.n, args.batch, args.concurrency, args.size))
    print(" ".join(f"{k}={v:,.0f}" for k, v in result.items()))


if __name__ == "__main__":
    main()
