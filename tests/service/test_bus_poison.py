"""Poison messages and dependency outages on real NATS and Redis (issue 14, item 3 and the
``max_deliver`` part of item 1): a message never hurts more than itself.

- a value on a latest-value subject that cannot be read (the cluster-scheduler's heartbeat
  watch) is dead-lettered with its reason, and the scheduler goes on binding;
- a message just under NATS's ``max_payload`` that cannot be handled is dead-lettered **by
  reference** (its copy with the dead-letter headers would not fit) and the node-agent keeps its
  connection and goes on handling faults;
- a server protocol error (``-ERR``) no longer closes the connection for good: the bus reconnects,
  as it does after nats-server restarts;
- Redis down for longer than ``max_deliver`` × back-off: the apply waits, is not dead-lettered,
  and takes effect once Redis is back.
"""

from __future__ import annotations

import asyncio

import pytest

from hyperjob import events, records
from hyperjob.bus import H_BY_REFERENCE, H_DLQ_REASON, H_ORIGINAL_SEQ, H_ORIGINAL_STREAM, H_WATCH
from hyperjob.events import subjects
from hyperjob.services.cluster_scheduler.app import build as build_cluster_scheduler
from hyperjob.services.cluster_scheduler.config import Settings as ClusterSchedulerSettings
from hyperjob.services.node_agent.app import build as build_agent
from hyperjob.services.node_agent.config import Settings as AgentSettings
from hyperjob.services.splitter.app import build as build_splitter
from hyperjob.services.splitter.config import Settings as SplitterSettings
from hyperjob.testkit.isolation import open_nats_bus, open_redis_store
from hyperjob.testkit.servers import NatsServer, RedisServer, free_port
from tests.service import service_helpers as sh

pytestmark = pytest.mark.service

C = "c1"
MIB = 1024 * 1024


async def letters(probe: sh.Probe, durable: str, *, timeout: float = sh.DEADLINE) -> list[sh.Stored]:
    """The dead letters of ``durable`` once there is at least one (raw: a letter may not decode)."""

    async def found() -> list[sh.Stored]:
        return await probe.messages(subjects.dlq(durable))

    return await sh.until(found, timeout=timeout, what=f"a dead letter of {durable}")


async def test_an_unreadable_heartbeat_is_dead_lettered_and_the_cluster_keeps_scheduling(bus, store, probe) -> None:
    for node in ("n1", "n2"):
        await sh.send(
            bus,
            subjects.node_status(C, node),
            sh.message(events.NodeStatus, cluster=C, node=node, agent="agent-1", allocatable=sh.NODE_ALLOCATABLE),
        )
    poison = b'{"type":"node.hear'  # 20 bytes: cut short
    await bus.publish(subjects.heartbeat(C, "ghost"), poison, msg_id="poison-beat")
    instance = f"cluster-scheduler-{C}"
    settings = ClusterSchedulerSettings(cluster=C, schedule_period="0.1s")
    for _life in range(2):  # also after a restart: the poison is still the subject's latest value
        async with sh.running("cluster-scheduler", build_cluster_scheduler, settings, bus, store) as (_, scheduler):
            [letter] = await letters(probe, instance)
            assert letter.headers[H_DLQ_REASON] == "undecodable"
            assert letter.headers[H_WATCH] == subjects.heartbeats(C) and letter.data == poison
            await sh.until(lambda s=scheduler: s.nodes and not any(n.stale for n in s.nodes.values()))
    assert len(await probe.messages(subjects.dlq(instance))) == 1  # once, not at every start


async def test_a_message_too_large_to_copy_is_dead_lettered_by_reference_and_the_agent_stays_connected(
    bus, store, probe
) -> None:
    settings = AgentSettings(cluster=C, nodes=2, heartbeat_period=0.2, telemetry="off", pod_duration="never")
    agent = f"node-agent-{C}"
    async with sh.running("node-agent", build_agent, settings, bus, store, instance=agent):
        # Fits the server's limit with the publisher's headers, not with the dead-letter headers.
        huge = b"x" * (MIB - 300)
        ack = await bus.publish(subjects.node_fault(C), huge, msg_id="huge")
        [letter] = await letters(probe, f"{agent}-faults", timeout=15)
        assert letter.headers[H_BY_REFERENCE] == "1" and letter.data == b""
        assert (letter.headers[H_ORIGINAL_STREAM], letter.headers[H_ORIGINAL_SEQ]) == (ack.stream, str(ack.seq))
        # Still connected and consuming: the next fault takes effect.
        node = f"{C}-node-1"
        fault = sh.message(events.InjectNodeFault, cluster=C, node=node, kind="node-down")
        await sh.send(bus, subjects.node_fault(C), fault)
        await probe.wait(subjects.node_status(C, node), events.NodeStatus, where=lambda s: not s.ready, timeout=15)


async def test_a_server_protocol_error_reconnects_instead_of_closing_the_bus(bus, probe) -> None:
    # nats-py checks the payload alone against max_payload; payload and headers together pass it,
    # the server answers -ERR 'Maximum Payload Violation' and drops the connection.
    raw = bus._nc  # noqa: SLF001 - reaching under the bus is the point: a message it would refuse
    with pytest.raises(Exception):  # noqa: B017,PT011 - whatever nats-py makes of the dropped connection
        await raw.publish(f"{bus._ns}.node.fault.{C}", b"x" * (MIB - 10), headers={"X-Pad": "y" * 200})  # noqa: SLF001
        await raw.flush(timeout=2)
        await asyncio.sleep(1.0)
        raise RuntimeError("still connected")  # the server must have refused it: then nothing raised
    await sh.until(lambda: bus.connected, timeout=10, what="bus reconnected")
    ack = await bus.publish(subjects.node_fault(C), b"{}", msg_id="after-the-error")
    assert ack.seq > 0


async def test_consumers_and_watches_go_on_after_nats_server_restarts(tmp_path) -> None:
    server = NatsServer(tmp_path / "nats", port=free_port())
    server.start()
    try:
        from hyperjob.events.subjects import STREAMS  # noqa: PLC0415

        async with open_nats_bus(server.url, "restart", STREAMS, cleanup=False) as bus:
            got: list[bytes] = []
            seen: list[bytes] = []

            async def on_message(d) -> None:  # noqa: ANN001
                got.append(d.data)

            async def on_value(d) -> None:  # noqa: ANN001
                seen.append(d.data)

            await bus.consume("restart-test", subjects.node_fault(C), on_message, ack_wait=2.0)
            await bus.watch(subjects.heartbeats(C), on_value)
            await bus.publish(subjects.node_fault(C), b"1", msg_id="m1")
            await sh.until(lambda: got == [b"1"])
            server.stop()
            await sh.until(lambda: not bus.connected, what="disconnected")
            server.start()
            await sh.until(lambda: bus.connected, timeout=15, what="reconnected")

            async def published() -> bool:
                try:
                    await bus.publish(subjects.node_fault(C), b"2", msg_id="m2")
                    await bus.publish(subjects.heartbeat(C, "a"), b"beat", msg_id="b1")
                except Exception:  # noqa: BLE001 - JetStream may need a moment after a restart
                    return False
                return True

            await sh.until(published, timeout=15, what="publish after restart")
            await sh.until(lambda: got == [b"1", b"2"], timeout=15, what="consumed after restart")
            await sh.until(lambda: b"beat" in seen, timeout=15, what="watched after restart")
    finally:
        server.stop()


async def test_redis_down_longer_than_max_deliver_times_backoff_holds_the_apply_without_dead_lettering(
    tmp_path, bus, probe, key_prefix
) -> None:
    redis = RedisServer(tmp_path / "redis", port=free_port(), appendonly=True)
    redis.start()
    try:
        async with open_redis_store(redis.url, key_prefix) as store:
            await sh.report_capacity(bus, sh.capacity("c1"))
            settings = SplitterSettings(replan_period=0.2)
            async with sh.running("splitter", build_splitter, settings, bus, store):
                redis.stop()
                apply = sh.apply(sh.queue_manifest("during-outage"))
                await sh.send(bus, subjects.APPLY, apply)
                # TestRuntime: max_deliver 5, back-off 0.1, 0.5, 1 s: dead-lettered within ~3 s on main.
                await asyncio.sleep(8.0)
                redis.start()
                [answer] = await probe.wait(subjects.result(apply.event_id), timeout=20)
                assert isinstance(answer, events.RequestAccepted), answer
                await sh.doc(store, records.QUEUE, "during-outage", records.QueueDoc)
            assert await probe.messages(subjects.dlq("splitter")) == []
    finally:
        redis.stop()


async def test_an_overflowing_quantity_is_rejected_naming_the_field_not_dead_lettered(bus, store, probe) -> None:
    await sh.report_capacity(bus, sh.capacity("cluster-a"), sh.capacity("cluster-b"))
    [*_, hyperjob] = sh.example_documents()
    container = hyperjob["spec"]["template"]["spec"]["tasks"][0]["template"]["spec"]["containers"][0]
    container["resources"]["requests"]["cpu"] = 1e308
    async with sh.running("splitter", build_splitter, SplitterSettings(replan_period=0.2), bus, store):
        queue = sh.apply(sh.queue_manifest(hyperjob["spec"]["template"]["spec"]["queue"]))
        await sh.send(bus, subjects.APPLY, queue)
        await probe.wait(subjects.result(queue.event_id))
        apply = sh.apply(hyperjob)
        await sh.send(bus, subjects.APPLY, apply)
        [answer] = await probe.wait(subjects.result(apply.event_id))
    assert isinstance(answer, events.RequestRejected), answer
    assert ".cpu:" in answer.reason and "too large" in answer.reason
    assert await probe.messages(subjects.dlq("splitter")) == []
    assert await store.get(records.HYPERJOB, hyperjob["metadata"]["name"]) is None
