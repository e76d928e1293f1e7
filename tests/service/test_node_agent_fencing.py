"""Self-fencing (issue 33) on real NATS and Redis: a node-agent cut off from the bus (a TCP
``Partition`` between it and NATS, as when its whole cluster is) longer than the fleet lease stops
its pods itself, the process killed and never restarted in place; once the bus is back it reports
them Failed with reason ``Fenced`` (once), and starts nothing again by itself."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from hyperjob import events
from hyperjob.bus.natsbus import NatsBus
from hyperjob.events import subjects
from hyperjob.services.node_agent import fencing
from hyperjob.services.node_agent.app import agent_name, build
from tests.service import service_helpers as sh
from tests.service import test_node_agent as simulated
from tests.service.outage_kit import Partition
from tests.service.test_node_agent_exec import C, phases, settings, start

pytestmark = pytest.mark.service

LEASE = 3.0


@pytest.fixture
async def partition(nats_url: str, namespace: str) -> AsyncIterator[tuple[Partition, NatsBus]]:
    """A partition between the agent and NATS, and the agent's connection through it (its
    publishes give up after 1 s)."""
    proxy = Partition(nats_url)
    url = await proxy.start()
    bus = await NatsBus.connect(url, subjects.STREAMS, namespace=namespace, timeout=1.0)
    yield proxy, bus
    proxy.heal()
    await bus.close()
    await proxy.close()


async def fenced_reports(probe: sh.Probe, pod: str) -> list[events.PodReport]:
    return [
        r
        for m in await probe.decoded(subjects.pod_phases(C), events.PodPhasesReported)
        for r in m.reports
        if r.pod == pod and r.reason == fencing.FENCE_REASON
    ]


async def beat_since(probe: sh.Probe, since: float) -> bool:
    """Whether the agent's latest heartbeat (a latest-only subject) was sent after ``since``."""
    found = await probe.decoded(subjects.heartbeat(C, "*"), events.AgentHeartbeat)
    return bool(found) and found[-1].occurred_at > since


async def test_an_agent_cut_off_longer_than_the_lease_stops_its_pods_and_reports_them_once_back(
    bus, partition, store, probe, tmp_path: Path
) -> None:
    cut, cut_off_bus = partition
    s = settings(tmp_path, heartbeat_period=0.5, fleet_lease=LEASE, self_fence=True, kill_grace=60.0)
    sleeper = "import time; time.sleep(600)"
    async with sh.running("node-agent", build, s, cut_off_bus, store, instance=agent_name(s)) as (_, agent):
        await sh.send(bus, subjects.start_pods(C), start("trainer", sleeper, policy="OnFailure"))
        await sh.until(lambda: "trainer" in agent.runner.procs, what="the pod's process")
        process = agent.runner.procs["trainer"]
        assert await sh.until(lambda: phases(probe, "trainer"), what="Running") == [("Running", None)]

        cut.cut()
        # Killed by the fence (its own 60 s grace is cut short), the pod leaves the agent's table.
        await sh.until(lambda: process.returncode is not None, timeout=LEASE + 20, what="the process fenced")
        await sh.until(lambda: not agent.pods.rows, what="the fenced pod recorded")
        assert "trainer" not in agent.runner.procs
        assert await phases(probe, "trainer") == [("Running", None)]  # nothing got through meanwhile

        healed = time.time()
        cut.heal()
        [report] = await sh.until(lambda: fenced_reports(probe, "trainer"), timeout=30, what="the fenced report")
        assert (report.phase, report.exit_code, report.uid) == ("Failed", fencing.FENCE_EXIT_CODE, "trainer-uid")
        # Back on the bus (a beat went through since): nothing started again by the agent itself.
        await sh.until(lambda: beat_since(probe, healed), timeout=30, what="a beat after the heal")
        assert await phases(probe, "trainer") == [("Running", None), ("Failed", fencing.FENCE_EXIT_CODE)]
        assert "trainer" not in agent.runner.procs and not agent.pods.rows and not agent.fencing
    assert await store.list(f"agentpod@{agent_name(s)}") == {}


async def test_a_simulated_pod_fenced_while_cut_off_is_reported_fenced_not_finished(
    bus, partition, store, probe
) -> None:
    """Its end comes while the agent is cut off and fenced: it is reported Failed (Fenced), never
    Succeeded, and not restarted in place (policy Always)."""
    cut, cut_off_bus = partition
    s = simulated.settings(heartbeat_period=0.5, fleet_lease=LEASE, self_fence=True)
    async with sh.running("node-agent", build, s, cut_off_bus, store, instance=simulated.AGENT) as (_, agent):
        await sh.send(bus, subjects.start_pods(C), simulated.start(duration=LEASE + 4.0, restart_policy="Always"))
        await simulated.reported(probe, "Running")
        cut.cut()
        await sh.until(lambda: not agent.pods.rows, timeout=LEASE + 20, what="the fenced pod recorded")
        cut.heal()
        report = await sh.until(lambda: fenced_reports(probe, "j1-worker-0"), timeout=30, what="the fenced report")
        assert [(r.phase, r.exit_code) for r in report] == [("Failed", fencing.FENCE_EXIT_CODE)]
        assert await simulated.phases(probe) == ["Running", "Failed"]


async def test_a_pod_fenced_between_its_starts_commit_and_its_launch_is_not_launched(
    bus, store, tmp_path: Path
) -> None:
    s = settings(tmp_path)
    async with sh.running("node-agent", build, s, bus, store, instance=agent_name(s)) as (_, agent):
        [pod] = start("late", "import time; time.sleep(600)").pods
        agent.fencing["late"] = pod.uid  # the fence ran while the start was being committed
        await agent._launch(agent.runner, [(pod, None)])
        assert "late" not in agent.runner.procs and "late" not in agent.starts


async def test_a_standby_that_takes_over_after_longer_than_the_lease_fences_nothing(bus, store, probe) -> None:
    """A replica that waited as a standby longer than the lease was not cut off: it never ran the
    pods meanwhile, and the one that did beat for them. Its contact starts when it becomes active."""
    s = simulated.settings(heartbeat_period=0.2, fleet_lease=0.8, self_fence=True)
    async with sh.running("node-agent", build, s, bus, store, instance=simulated.AGENT, lease_ttl=0.4):
        await sh.send(bus, subjects.start_pods(C), simulated.start(duration=None))
        await simulated.reported(probe, "Running")
    assert await store.take_lease(simulated.AGENT, "killed", 2.0)  # the killed holder's, never given back
    async with sh.running("node-agent", build, s, bus, store, instance=simulated.AGENT, lease_ttl=0.4) as (rt, agent):
        assert not rt.active
        await sh.until(lambda: rt.active, what="the take-over")
        took_over = time.time()
        await sh.until(lambda: beat_since(probe, took_over), what="a beat of the new runner")
        assert not agent.fencing and list(agent.pods.rows) == ["j1-worker-0"]
    assert await simulated.phases(probe) == ["Running"]
