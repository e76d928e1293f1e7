"""State across ``down``/``up`` (issue 32, item 5): a new fleet's ``up`` forgets the nodes and
clusters of the old one (their latest status, telemetry, heartbeats, capacity), over a real
JetStream of its own, so no node of the old fleet is shown or taken for Ready."""

from __future__ import annotations

from pathlib import Path

import pytest

from hyperjob import events
from hyperjob.bus.natsbus import NatsBus
from hyperjob.cli import fleet_state
from hyperjob.cli.config import ClusterConfig, UpConfig
from hyperjob.client import Client
from hyperjob.events import subjects
from hyperjob.testkit.servers import NatsServer, RedisServer

pytestmark = pytest.mark.service


async def publish(bus: NatsBus, subject: str, message: events.Message) -> None:
    await bus.publish(subject, events.encode(message), msg_id=message.event_id)


async def old_fleet(bus: NatsBus) -> None:
    """cluster-a of six nodes and cluster-old of one, as an earlier ``up`` left them."""
    for cluster, count in (("cluster-a", 6), ("cluster-old", 1)):
        for i in range(count):
            node = f"{cluster}-node-{i}"
            status = events.NodeStatus(event_id=f"s-{node}", cluster=cluster, node=node, allocatable={"cpu": 8.0})
            await publish(bus, subjects.node_status(cluster, node), status)
        summary = events.ClusterCapacityReported(
            event_id=f"c-{cluster}", cluster=cluster, allocatable={}, free={}, nodes=count, ready_nodes=count
        )
        await publish(bus, subjects.capacity(cluster), summary)
        beat = events.AgentHeartbeat(event_id=f"h-{cluster}", cluster=cluster, agent=f"agent-{cluster}", nodes=count)
        await publish(bus, subjects.heartbeat(cluster, f"agent-{cluster}"), beat)


async def test_a_new_fleet_forgets_the_nodes_and_clusters_it_no_longer_has(tmp_path: Path) -> None:
    with NatsServer(tmp_path / "nats") as nats, RedisServer(tmp_path / "redis") as redis:
        bus = await NatsBus.connect(nats.url, subjects.STREAMS, name="old-fleet")
        await old_fleet(bus)
        await bus.close()
        fleet = fleet_state.fleet_nodes(UpConfig(clusters=[ClusterConfig(name="cluster-a", nodes=4)]))

        forgotten = await fleet_state.forget_removed_nodes(nats.url, fleet)
        again = await fleet_state.forget_removed_nodes(nats.url, fleet)

        async with await Client.connect(nats.url, redis.url) as client:
            kept = set(await client.node_statuses("cluster-a"))
            old = await client.node_statuses("cluster-old")
            clusters = await client.cluster_names()
            beats = await client.bus.last_per_subject(subjects.heartbeats("cluster-old"))
    assert forgotten == [
        "cluster-a/cluster-a-node-4",
        "cluster-a/cluster-a-node-5",
        "cluster-old/cluster-old-node-0",
        "cluster-old",
    ]
    assert again == []  # forgetting twice changes nothing more
    assert kept == {f"cluster-a-node-{i}" for i in range(4)}
    assert old == {} and clusters == ["cluster-a"] and beats == {}
