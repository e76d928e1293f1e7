"""An outage of the control plane is not a failure of the clusters (issue 14), on real NATS and Redis.

The splitter judges a cluster lost after 30 s without a summary showing a Ready node, and moves
its children. These tests play the clusters (their summaries, every half second) around a real
splitter:

- NATS is stopped for 35 s and started again on the same port and data directory; one cluster
  reconnects a few seconds after the other. The silence nobody could hear does not count: no
  child moves (before: the first summary after the outage made the other cluster look lost).
- A cluster really goes silent while another keeps reporting, with room for one of the two
  HyperJobs it ran: one HyperJob's child moves, the other's waits where it is with the reason
  (before: both moved, each counted against the same free GPUs).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from hyperjob import events, records
from hyperjob.events import subjects
from hyperjob.events.subjects import STREAMS
from hyperjob.services.splitter.app import build
from hyperjob.services.splitter.config import Settings
from hyperjob.testkit.isolation import new_namespace, open_nats_bus, open_redis_store
from tests.service import outage_kit
from tests.service import service_helpers as sh

pytestmark = pytest.mark.service

ONE_NODE_OF_4_GPUS = {"cpu": 96.0, "memory": float(1 << 40), "nvidia.com/gpu": 4.0, "pods": 110.0}


class Clusters:
    """Publishes every cluster's summary every half second, except those ``muted``; a publish the
    bus refuses (it is down) is simply not made, as a cluster-scheduler's would not be."""

    def __init__(self, bus: Any, **summaries: dict[str, float] | None) -> None:
        self.bus = bus
        self.summaries = summaries
        self.muted: set[str] = set()
        self.stopping = False

    async def run(self) -> None:
        while not self.stopping:
            for cluster, allocatable in self.summaries.items():
                if cluster not in self.muted:
                    with contextlib.suppress(Exception):
                        await sh.report_capacity(
                            self.bus, sh.capacity(cluster, nodes=1 if allocatable else 4, allocatable=allocatable)
                        )
            await asyncio.sleep(0.5)


@contextlib.asynccontextmanager
async def reporting(clusters: Clusters) -> AsyncIterator[Clusters]:
    task = asyncio.create_task(clusters.run())
    try:
        yield clusters
    finally:
        clusters.stopping = True
        await task


def one_child(name: str, pods: int) -> dict[str, Any]:
    """A HyperJob of one child gang of ``pods`` one-GPU pods, free to go to any cluster."""
    template = sh.job_manifest(name, replicas=pods)
    return {
        "apiVersion": "training.volcano.sh/v1alpha1",
        "kind": "HyperJob",
        "metadata": {"name": name},
        "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "templateSpec": template["spec"]}]},
    }


async def placed(bus: Any, probe: sh.Probe, name: str, manifest: dict[str, Any]) -> None:
    """A HyperJob applied, admitted and split (its children placed)."""
    apply = sh.apply(manifest)
    await sh.send(bus, subjects.APPLY, apply)
    await probe.wait(subjects.result(apply.event_id), timeout=30)
    await sh.send(bus, subjects.OWNER_ADMITTED, sh.message(events.OwnerAdmitted, name=name, queue="default"))
    await probe.wait(subjects.PLACE_CHILDREN, events.PlaceChildren, where=lambda m: m.owner == name, timeout=30)


async def test_a_nats_outage_moves_no_child_even_when_one_cluster_reconnects_later(tmp_path) -> None:
    with outage_kit.Servers(tmp_path) as servers:
        namespace = new_namespace()
        async with (
            open_nats_bus(servers.nats.url, namespace, STREAMS) as bus,
            open_redis_store(servers.redis.url, namespace) as store,
            reporting(Clusters(bus, c1=None, c2=None)) as clusters,
        ):
            probe = await sh.probe_for(servers.nats.url, namespace)
            try:
                await asyncio.sleep(1)
                async with sh.running("splitter", build, Settings(replan_period=0.2), bus, store):
                    await placed(bus, probe, "train", sh.hyperjob_manifest("train", {"c1": 2, "c2": 2}))
                    clusters.muted = {"c2"}  # c2's scheduler will be the slower to reconnect
                    await servers.outage(servers.nats, 35)
                    await asyncio.sleep(4)  # c1 reports again; c2 not yet
                    clusters.muted = set()
                    await asyncio.sleep(3)
                    moves = await probe.decoded(subjects.MOVE_CHILD, events.MoveChild)
                    doc = await store.get(records.HYPERJOB, "train")
            finally:
                await probe.close()
    assert moves == []
    assert doc is not None
    assert {ref.cluster for ref in doc.decode(records.HyperJobDoc).children} == {"c1", "c2"}


async def test_failover_moves_a_child_only_where_it_fits_and_the_rest_wait_with_the_reason(bus, store, probe) -> None:
    clusters = Clusters(bus, c1=ONE_NODE_OF_4_GPUS, c2=None)  # c1: room for one 4-pod child
    clusters.muted = {"c1"}  # not there yet: both HyperJobs go to c2
    async with reporting(clusters), sh.running("splitter", build, Settings(replan_period=0.2), bus, store):
        await asyncio.sleep(1)
        for name in ("first", "second"):
            await placed(bus, probe, name, one_child(name, 4))
        clusters.muted = {"c2"}  # c1 appears; c2 is gone
        await probe.wait(subjects.MOVE_CHILD, events.MoveChild, timeout=45)
        await asyncio.sleep(2)  # a few more rounds: nothing else may move
        moves = await probe.decoded(subjects.MOVE_CHILD, events.MoveChild)
        move = moves[0]
        docs = {n: d.decode(records.HyperJobDoc) for n, d in (await store.list(records.HYPERJOB)).items()}
    assert moves == [move] and move.to_cluster == "c1"
    waiting = next(d for d in docs.values() if all(ref.cluster == "c2" for ref in d.children))
    assert "cluster c2 lost; no eligible cluster can hold it now" in waiting.waiting_reason


async def test_after_a_wipe_every_hyperjob_completed_ones_too_the_queue_and_the_bookings_come_back(tmp_path) -> None:
    """Redis wiped while some HyperJobs are done and others run: the done ones are still there
    (spec and status), so is the queue, and the running ones finish with nothing doubled or
    overbooked (the cluster-schedulers' bookings come back from their changelogs)."""
    with outage_kit.Servers(tmp_path) as servers:
        run = outage_kit.Run(servers.nats.url, servers.redis.url, nodes=2, period=0.2)
        async with run.running():
            await run.submit(3, duration="1s")
            await run.until_done(timeout=60)
            assert (await run.audit()).completed == 3
            await run.submit(3, duration="8s", first=3)
            await run.until_running(6 * 2 + 4)
            await servers.wipe()
            await run.until_done(timeout=90)
            figures = await run.audit()
            hyperjobs = set(await run.store.list(records.HYPERJOB))
            queues = set(await run.store.list(records.QUEUE))
    assert figures.completed == 6 and figures.lost == 0, figures.phases
    assert hyperjobs == {f"hj{i}" for i in range(6)} and "outage" in queues
    assert (figures.started_twice, figures.over, figures.dlq, figures.evicted, figures.moved) == (0, 0, 0, 0, 0)


async def test_a_cluster_whose_connections_were_dropped_across_a_partition_comes_back_and_gives_its_nodes_back(
    tmp_path,
) -> None:
    """Issue 16's fault (a) as the containers showed it: c1's node-agent and cluster-scheduler are
    cut off from NATS and Redis while their pods finish. Across a partition that long the NATS
    server drops their connections (its write deadline), and nothing of it reaches them: once the
    network is back, only new connections get through. They must notice and connect again, so
    that c1's pods are reported, its HyperJobs complete and its nodes are given back (before: a
    client heard of a dead connection only from nats-py's ping every 2 minutes, so c1 stayed
    silent, its bookings held, for minutes after the partition healed)."""
    with outage_kit.Servers(tmp_path) as servers:
        run = outage_kit.Run(servers.nats.url, servers.redis.url, nodes=2, period=0.2, cut_cluster="c1")
        async with run.running():
            await run.submit(2, duration="3s")
            await run.until_running(2 * 2 * 2)
            nats_link, redis_link = run.partitions
            nats_link.cut()
            redis_link.cut()
            await asyncio.sleep(5)  # c1's pods finish meanwhile: their reports cannot go out
            nats_link.heal(resume=False)
            redis_link.heal()  # Redis keeps idle clients: their connections resume
            await run.until_done(timeout=60)
            figures = await run.audit()

            async def nodes_given_back() -> bool:
                return not any((await run.bookings_left()).values())

            with contextlib.suppress(AssertionError):
                await sh.until(nodes_given_back, what="c1's nodes given back", timeout=30, interval=0.2)
            left = await run.bookings_left()
    assert figures.completed == 2 and figures.lost == 0, figures.phases
    assert left == {"c1": 0, "c2": 0}
    assert (figures.started_twice, figures.over, figures.dlq) == (0, 0, 0)
