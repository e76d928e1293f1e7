"""A simulating node-agent in-process on real JetStream and Redis: it heartbeats its nodes; a started
pod is reported Running, then Succeeded (or Failed) after its sim duration; a stopped pod is
reported Deleted; a repeated or redelivered start reports nothing more; a start whose write
failed is redelivered and reported Running exactly once."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import events
from events import subjects
from node_agent.app import build
from node_agent.config import Settings
from servicekit import Runtime

sys.path.insert(0, str(Path(__file__).parent))
import service_helpers as sh  # noqa: E402

pytestmark = pytest.mark.service

C = "cluster-a"
DURABLE = f"node-agent-{C}"
KIND = f"agentpod@{C}"


def settings() -> Settings:
    return Settings(cluster=C, nodes=2, heartbeat_period=0.2, tick_period=0.05, telemetry="off", pod_duration="30s")


@pytest.fixture
async def agent(bus, store) -> AsyncIterator[Runtime]:
    runtime = Runtime("node-agent", bus, store)
    await build(settings(), runtime)
    yield runtime
    await runtime.stop()


def start(pod: str = "j1-worker-0", *, duration: float | None = 30.0, exit_code: int = 0, node: str = f"{C}-node-1",
          uid: str = "uid-1", restart_policy: str = "Never") -> events.StartPod:
    return sh.message(events.StartPod, cluster=C, node=node, pod=pod, job="j1", task="worker", job_version=0,
                      pod_uid=uid, env={"RANK": "0"}, restart_policy=restart_policy, sim_duration=duration,
                      sim_exit_code=exit_code)


async def send(bus: Any, subject: str, msg: events.Message, *, twice: bool = False) -> None:
    await sh.send(bus, subject, msg)
    if twice:
        await sh.send(bus, subject, msg, copy=1)


async def reports(probe: sh.Probe, pod: str = "j1-worker-0") -> list[str]:
    return [r.phase for r in await probe.decoded(subjects.pod_phase(C), events.PodPhaseReported) if r.pod == pod]


async def wait_report(probe: sh.Probe, phase: str, pod: str = "j1-worker-0") -> events.PodPhaseReported:
    found = await probe.wait(subjects.pod_phase(C), events.PodPhaseReported,
                             where=lambda r: r.pod == pod and r.phase == phase)
    return found[0]


async def test_heartbeats_describe_every_node(agent, bus, probe) -> None:
    beats = await sh.until(lambda: bus.last_per_subject(f"heartbeat.node.{C}.>"), what="heartbeats")
    assert sorted(beats) == [subjects.heartbeat(C, f"{C}-node-{i}") for i in range(2)]
    beat = sh.ALL_TYPES.decode(next(iter(beats.values())).data)
    assert isinstance(beat, events.NodeHeartbeat) and beat.allocatable["nvidia.com/gpu"] == 8.0


async def test_started_pod_reports_running_then_succeeded_after_its_duration(agent, bus, store, probe) -> None:
    msg = start(duration=0.3)
    await send(bus, subjects.start_pod(C), msg, twice=True)
    running = await wait_report(probe, "Running")
    assert (running.node, running.job, running.pod_uid, running.job_version) == (f"{C}-node-1", "j1", "uid-1", 0)
    assert running.causation_id == msg.event_id
    done = await wait_report(probe, "Succeeded")
    assert done.exit_code == 0
    await probe.settled(DURABLE, subjects.start_pod(C))
    assert await reports(probe) == ["Running", "Succeeded"]
    assert await store.get(KIND, "j1-worker-0") is None


async def test_failing_pod_reports_failed_with_its_exit_code(agent, bus, store, probe) -> None:
    await send(bus, subjects.start_pod(C), start(duration=0.2, exit_code=3))
    failed = await wait_report(probe, "Failed")
    assert failed.exit_code == 3 and await reports(probe) == ["Running", "Failed"]


async def test_stopped_pod_reports_deleted_once(agent, bus, store, probe) -> None:
    await send(bus, subjects.start_pod(C), start())
    await wait_report(probe, "Running")
    assert await store.get(KIND, "j1-worker-0") is not None
    stop = sh.message(events.StopPod, cluster=C, node=f"{C}-node-1", pod="j1-worker-0", reason="test")
    await send(bus, subjects.stop_pod(C), stop, twice=True)
    await wait_report(probe, "Deleted")
    # Stopping it again (a new command) finds nothing to stop.
    await send(bus, subjects.stop_pod(C), sh.message(events.StopPod, cluster=C, node=f"{C}-node-1", pod="j1-worker-0"))
    await probe.settled(DURABLE, subjects.stop_pod(C))
    assert await reports(probe) == ["Running", "Deleted"]
    assert await store.get(KIND, "j1-worker-0") is None


async def test_repeated_start_of_the_same_pod_reports_running_once(agent, bus, store, probe) -> None:
    await send(bus, subjects.start_pod(C), start(), twice=True)
    await wait_report(probe, "Running")
    await send(bus, subjects.start_pod(C), start())  # the same pod incarnation, a new command
    await probe.settled(DURABLE, subjects.start_pod(C))
    assert await reports(probe) == ["Running"]
    # A new incarnation of the pod (another uid) is a new start.
    await send(bus, subjects.start_pod(C), start(uid="uid-2"))
    await probe.wait(subjects.pod_phase(C), events.PodPhaseReported, where=lambda r: r.pod_uid == "uid-2")
    assert await reports(probe) == ["Running", "Running"]


async def test_start_for_another_agents_node_is_ignored(agent, bus, store, probe) -> None:
    await send(bus, subjects.start_pod(C), start(node="elsewhere-node-9"))
    await probe.settled(DURABLE, subjects.start_pod(C))
    assert await reports(probe) == [] and await store.list(KIND) == {}


async def test_start_whose_write_failed_is_redelivered_and_reported_running_once(bus, store, probe) -> None:
    runtime = Runtime("node-agent", bus, sh.FlakyStore(store))
    await build(settings(), runtime)
    try:
        await send(bus, subjects.start_pod(C), start())
        await wait_report(probe, "Running")
        await probe.settled(DURABLE, subjects.start_pod(C), timeout=10.0)
        assert await reports(probe) == ["Running"]
        assert await store.get(KIND, "j1-worker-0") is not None
    finally:
        await runtime.stop()
