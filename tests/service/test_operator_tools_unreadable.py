"""The operators' tools read logs that anyone allowed to publish on a subject has written to: a
message nested 100,000 levels deep (msgspec gives up with ``RecursionError``) on an event-log
subject or a node's status subject is skipped, said once, and the rest is shown; ``get events``,
``describe``, ``trace``, ``get nodes`` and the dashboard's snapshot no longer fail for as long as
the stream keeps it."""

from __future__ import annotations

import pytest

from hyperjob import events
from hyperjob.cli import journey, views
from hyperjob.client import Client, eventlog
from hyperjob.dashboard.app import snapshot
from hyperjob.events import subjects
from tests.service import service_helpers as sh

pytestmark = pytest.mark.service


def deep(tag: str) -> bytes:
    """A message of ``tag`` with a field nested 100,000 levels deep (an unknown one: msgspec
    skips it, recursively)."""
    return b'{"type":"' + tag.encode() + b'","x":' + b"[" * 100_000 + b"]" * 100_000 + b"}"


async def test_a_deeply_nested_message_is_skipped_by_every_operator_tool(bus, store, capsys, monkeypatch) -> None:
    monkeypatch.setattr(events, "_skipped", 0, raising=False)  # said once per process: as if this one were new
    status = sh.message(events.HyperJobStatusChanged, name="x", phase="Running", status={})
    await bus.publish(subjects.HYPERJOB_STATUS, deep("hj.hyperjob.status.v1"), msg_id="deep-1")
    await sh.send(bus, subjects.HYPERJOB_STATUS, status)
    capacity = sh.message(
        events.ClusterCapacityReported,
        cluster="c1",
        allocatable={"cpu": 8.0},
        free={"cpu": 8.0},
        nodes=1,
        ready_nodes=1,
    )
    await sh.send(bus, subjects.capacity("c1"), capacity)
    await bus.publish(subjects.capacity("c2"), deep("sched.cluster.capacity.v2"), msg_id="deep-2")
    node = sh.message(events.NodeStatus, cluster="c1", node="c1-node-1", allocatable={"cpu": 8.0})
    await sh.send(bus, subjects.node_status("c1", "c1-node-1"), node)
    await bus.publish(
        subjects.node_status("c1", "c1-node-2"),
        deep("node.status.v1"),
        msg_id="deep-3",
    )

    client = Client(bus, store)
    logged = await eventlog.load(bus)  # get events, describe
    assert [e.name for e in logged if e.kind == "HyperJob"] == ["x"]
    await journey.load(bus, "x")  # trace
    assert [n["name"] for n in await views.nodes(client, None)] == ["c1-node-1"]  # get nodes
    shown = await snapshot(client)  # the dashboard
    assert [c["name"] for c in shown["clusters"]] == ["c1"] and len(shown["nodes"]) == 1
    said = capsys.readouterr().err
    assert said.count("warning: skipped a message that cannot be read (nested too deep)") == 1, said
