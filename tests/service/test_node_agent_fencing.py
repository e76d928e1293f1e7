"""Self-fencing (issue 33) on real NATS and Redis: a node-agent cut off from the bus (a TCP
``Partition`` between it and NATS, as when its whole cluster is, or the bus is down) longer than
the fleet lease freezes its pods itself (the process stopped, never restarted in place); once the
bus is back, it asks its job-controller about them (``PodsFrozen``); a pod it confirms resumes
where it stood and completes, one it stops is killed at once, and one nobody confirms is killed
and reported Failed with reason ``Fenced`` (once); the agent starts nothing again by itself."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import msgspec
import pytest

from hyperjob import events
from hyperjob.bus.natsbus import NatsBus
from hyperjob.events import subjects
from hyperjob.services.node_agent import fencing
from hyperjob.services.node_agent.app import agent_name, build
from hyperjob.services.node_agent.handlers import NodeAgent
from tests.service import service_helpers as sh
from tests.service import test_node_agent as simulated
from tests.service.outage_kit import Partition
from tests.service.test_node_agent_exec import C, phases, phases_reach, settings, start

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


def stands_still(process: asyncio.subprocess.Process) -> bool:
    """Whether the process is stopped (SIGSTOP): state ``T`` in /proc/<pid>/stat."""
    stat = Path(f"/proc/{process.pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] == "T"


async def frozen_by_the_cut(cut: Partition, agent: NodeAgent, probe: sh.Probe, pod: str) -> asyncio.subprocess.Process:
    """Cut the agent off past its lease: ``pod``'s process stands still, and nothing got through."""
    process = agent.runner.procs[pod]
    cut.cut()
    await sh.until(lambda: agent.frozen.pods, timeout=LEASE + 20, what="the pod frozen")
    await sh.until(lambda: stands_still(process), what="the process stopped")
    assert process.returncode is None and pod in agent.runner.procs and pod in agent.pods.rows
    assert await phases(probe, pod) == [("Running", None)]
    return process


async def test_a_pod_frozen_while_cut_off_resumes_where_it_stood_once_its_job_controller_confirms_it(
    bus, partition, store, probe, tmp_path: Path
) -> None:
    """A whole-bus outage as the node sees it: frozen at the lease, the pod is resumed by the
    job-controller's confirmation once the bus is back, and completes (no Fenced, no restart)."""
    cut, cut_off_bus = partition
    s = settings(tmp_path, heartbeat_period=0.5, fleet_lease=LEASE, self_fence=True)
    work = "import time\nfor _ in range(80): time.sleep(0.1)"  # 8 s of running time
    async with sh.running("node-agent", build, s, cut_off_bus, store, instance=agent_name(s)) as (_, agent):
        await sh.send(bus, subjects.start_pods(C), start("trainer", work))
        assert await sh.until(lambda: phases(probe, "trainer"), what="Running") == [("Running", None)]
        process = await frozen_by_the_cut(cut, agent, probe, "trainer")

        cut.heal()
        [asked] = await probe.wait(subjects.pods_frozen(C), events.PodsFrozen)  # once back, once
        assert [(p.pod, p.uid) for p in asked.pods] == [("trainer", "trainer-uid")]
        confirmation = msgspec.structs.replace(start("trainer", work), resume_only=True)
        await sh.send(bus, subjects.start_pods(C), confirmation)
        await sh.until(lambda: not agent.frozen.pods, what="the pod resumed")
        assert await phases_reach(probe, "trainer", 2, timeout=30) == [("Running", None), ("Succeeded", 0)]
        assert process.returncode == 0 and not agent.fencing
        assert await fenced_reports(probe, "trainer") == []
        assert len(await probe.decoded(subjects.pods_frozen(C), events.PodsFrozen)) == 1
    assert await store.list(f"agentpod@{agent_name(s)}") == {}


async def test_a_frozen_pod_nobody_confirms_is_killed_and_reported_fenced_once_back(
    bus, partition, store, probe, tmp_path: Path
) -> None:
    """Moved while the agent was cut off (its job-controller never confirms it): frozen at the
    lease, killed once the agent has been back a lease long, reported Failed (Fenced) once; its own
    60 s grace does not apply (a stopped process cannot act on SIGTERM), and nothing starts again."""
    cut, cut_off_bus = partition
    s = settings(tmp_path, heartbeat_period=0.5, fleet_lease=LEASE, self_fence=True, kill_grace=60.0)
    sleeper = "import time; time.sleep(600)"
    async with sh.running("node-agent", build, s, cut_off_bus, store, instance=agent_name(s)) as (_, agent):
        await sh.send(bus, subjects.start_pods(C), start("trainer", sleeper, policy="OnFailure"))
        assert await sh.until(lambda: phases(probe, "trainer"), what="Running") == [("Running", None)]
        process = await frozen_by_the_cut(cut, agent, probe, "trainer")

        healed = time.time()
        cut.heal()
        [report] = await sh.until(lambda: fenced_reports(probe, "trainer"), timeout=30, what="the fenced report")
        assert (report.phase, report.exit_code, report.uid) == ("Failed", fencing.FENCE_EXIT_CODE, "trainer-uid")
        assert process.returncode is not None and "trainer" not in agent.runner.procs
        # Back on the bus (a beat went through since): nothing started again by the agent itself.
        await sh.until(lambda: beat_since(probe, healed), timeout=30, what="a beat after the heal")
        assert await phases(probe, "trainer") == [("Running", None), ("Failed", fencing.FENCE_EXIT_CODE)]
        assert "trainer" not in agent.runner.procs and not agent.pods.rows and not agent.fencing
    assert await store.list(f"agentpod@{agent_name(s)}") == {}


async def test_a_frozen_pod_its_job_controller_stops_is_killed_at_once_and_reported_deleted(
    bus, partition, store, probe, tmp_path: Path
) -> None:
    """The fleet moved it, and the job-controller, reading the removal, stops it: killed where it
    stands (not after its 60 s grace), reported Deleted as any stop, never Fenced."""
    cut, cut_off_bus = partition
    s = settings(tmp_path, heartbeat_period=0.5, fleet_lease=LEASE, self_fence=True, kill_grace=60.0)
    async with sh.running("node-agent", build, s, cut_off_bus, store, instance=agent_name(s)) as (_, agent):
        await sh.send(bus, subjects.start_pods(C), start("trainer", "import time; time.sleep(600)"))
        assert await sh.until(lambda: phases(probe, "trainer"), what="Running") == [("Running", None)]
        process = await frozen_by_the_cut(cut, agent, probe, "trainer")

        cut.heal()
        stop = sh.message(
            events.StopPods,
            cluster=C,
            pods=[events.PodStop(pod="trainer", node=f"{C}-node-0", uid="trainer-uid", job="j")],
        )
        await sh.send(bus, subjects.stop_pods(C), stop)
        assert await phases_reach(probe, "trainer", 2, timeout=30) == [("Running", None), ("Deleted", None)]
        assert process.returncode is not None and not agent.frozen.pods and not agent.fencing
        assert await fenced_reports(probe, "trainer") == []


async def test_a_simulated_pod_frozen_while_cut_off_and_never_confirmed_is_reported_fenced_not_finished(
    bus, partition, store, probe
) -> None:
    """Its end comes while the agent is cut off and it stands frozen; nobody confirms it once the
    bus is back: it is reported Failed (Fenced), never Succeeded, and not restarted in place
    (policy Always)."""
    cut, cut_off_bus = partition
    s = simulated.settings(heartbeat_period=0.5, fleet_lease=LEASE, self_fence=True)
    async with sh.running("node-agent", build, s, cut_off_bus, store, instance=simulated.AGENT) as (_, agent):
        await sh.send(bus, subjects.start_pods(C), simulated.start(duration=LEASE + 4.0, restart_policy="Always"))
        await simulated.reported(probe, "Running")
        cut.cut()
        await sh.until(lambda: agent.frozen.pods, timeout=LEASE + 20, what="the pod frozen")
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


async def test_without_self_fence_a_pod_runs_on_through_a_cut_off_longer_than_the_lease(
    bus, partition, store, probe, tmp_path: Path
) -> None:
    """``selfFence`` off: neither the fence round nor the first beat after the cut-off touches the
    pod (the beat's own check froze it, and before that fenced it, whatever the setting)."""
    cut, cut_off_bus = partition
    s = settings(tmp_path, heartbeat_period=0.5, fleet_lease=LEASE, self_fence=False)
    async with sh.running("node-agent", build, s, cut_off_bus, store, instance=agent_name(s)) as (_, agent):
        await sh.send(bus, subjects.start_pods(C), start("trainer", "import time; time.sleep(600)"))
        assert await sh.until(lambda: phases(probe, "trainer"), what="Running") == [("Running", None)]
        process = agent.runner.procs["trainer"]
        cut.cut()
        await sh.until(lambda: agent.contact.lost(), timeout=LEASE + 20, what="cut off past the lease")
        healed = time.time()
        cut.heal()
        await sh.until(lambda: beat_since(probe, healed), timeout=30, what="a beat after the heal")
        assert not agent.frozen.pods and not agent.fencing and not stands_still(process)
        assert process.returncode is None and await phases(probe, "trainer") == [("Running", None)]
