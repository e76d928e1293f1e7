"""Measure the infrastructure: ``python -m testkit.bench [MODE] [-n N] [--batch B] [--concurrency C]``.

``consume``: publish ``n`` messages with ``publish_many``, then consume them with a no-op handler
through one durable pull consumer. ``pipeline``: the handler does what a service handler does:
decode, ``store.apply`` (dedup marker + one document write + one recorded output), publish the
output, return (ack). ``batch-pipeline``: the same through ``consume_batch``, with one
``store.apply_many`` round trip and one ``publish_many`` per batch. Starts its own
``nats-server`` and ``redis-server`` in a temporary directory unless ``--nats``/``--redis`` URLs
are given. Not a test: numbers depend on the machine and its load.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import tempfile
import time
from collections.abc import Iterator, Sequence

import msgspec

from bus import Delivery, NatsBus, StreamSpec
from store import ApplyItem, Output, RedisStore, Write
from telemetry import setup_logging

from .servers import NatsServer, RedisServer

STREAMS = [StreamSpec(name="BENCH", subjects=["bench.>"]), StreamSpec(name="OUT", subjects=["out.>"])]


class Task(msgspec.Struct, frozen=True):
    id: int
    pod: str


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
        await bus.publish_many([(f"bench.task.{i % 16}", f"m{i}", Task(i, f"pod-{i}"))
                                for i in range(start, min(n, start + 10_000))])
    return n / (time.perf_counter() - t0)


async def run(mode: str, nats_url: str, redis_url: str, n: int, batch: int, concurrency: int) -> dict[str, float]:
    ns = f"b{time.time_ns()}"
    bus = await NatsBus.connect(nats_url, STREAMS, namespace=ns)
    store = RedisStore(redis_url, ns)
    decoder = msgspec.json.Decoder(Task)
    done = asyncio.Event()
    count = 0

    async def noop(_: Delivery) -> None:
        nonlocal count
        count += 1
        if count == n:
            done.set()

    async def pipeline(d: Delivery) -> None:
        task = decoder.decode(d.data)
        out = Output(subject=f"out.bound.{task.id % 16}", msg_id=f"out-{task.id}", payload=d.data)
        result = await store.apply("bench", d.msg_id or "", [Write.put("pod", task.pod, task)], [out])
        await bus.publish_many(result.outputs)
        await noop(d)

    async def batch_pipeline(ds: Sequence[Delivery]) -> None:
        tasks = [decoder.decode(d.data) for d in ds]
        items = [ApplyItem(event_id=d.msg_id or "", writes=[Write.put("pod", t.pod, t)],
                           outputs=[Output(subject=f"out.bound.{t.id % 16}", msg_id=f"out-{t.id}", payload=d.data)])
                 for d, t in zip(ds, tasks, strict=True)]
        results = await store.apply_many("bench", items)
        await bus.publish_many([o for r in results for o in r.outputs])
        for d in ds:
            await noop(d)

    try:
        publish_rate = await _publish(bus, n)
        t1 = time.perf_counter()
        if mode == "batch-pipeline":
            await bus.consume_batch("bench", "bench.>", batch_pipeline, batch=batch)
        else:
            await bus.consume("bench", "bench.>", noop if mode == "consume" else pipeline, batch=batch,
                              concurrency=concurrency)
        await asyncio.wait_for(done.wait(), timeout=600)
        return {"publish_per_s": publish_rate, f"{mode}_per_s": n / (time.perf_counter() - t1)}
    finally:
        await bus.close()
        await store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", nargs="?", choices=["consume", "pipeline", "batch-pipeline"], default="consume")
    parser.add_argument("--nats")
    parser.add_argument("--redis")
    parser.add_argument("-n", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--uvloop", action="store_true")
    args = parser.parse_args()
    if args.uvloop:
        import uvloop  # noqa: PLC0415
        uvloop.install()
    setup_logging("bench", "WARNING")
    with _servers(args.nats, args.redis) as (nats_url, redis_url):
        result = asyncio.run(run(args.mode, nats_url, redis_url, args.n, args.batch, args.concurrency))
    print(" ".join(f"{k}={v:,.0f}" for k, v in result.items()))


if __name__ == "__main__":
    main()
