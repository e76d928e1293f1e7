"""A simulating node-agent (its own ``build`` on a runtime over real JetStream and Redis): it says
what its nodes are (``NodeStatus`` on change, one ``AgentHeartbeat`` per period); a started pod is
reported Running, then Succeeded or Failed after its simulated duration; a stopped pod is reported
Deleted; a node that goes down stops its pods' clocks; a restarted agent finishes its pods on time.
Telemetry and injected hardware faults become the health verdict its ``NodeStatus`` carries, which
the cluster-scheduler follows. Every handler given the same message twice has one effect, and so
has a message whose handling crashed after its commit."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from hyperjob import events
from hyperjob.events import subjects
from hyperjob.servicekit import Runtime
from hyperjob.services.cluster_scheduler.app import build as build_cluster_scheduler
from hyperjob.services.cluster_scheduler.config import Settings as ClusterSchedulerSettings
from hyperjob.services.node_agent import domain
from hyperjob.services.node_agent.app import build
from hyperjob.services.node_agent.config import Settings
from tests.service import service_helpers as sh

pytestmark = pytest.mark.service

C = "c1"
AGENT = f"node-agent-{C}"
KIND = f"agentpod@{AGENT}"
NODE = f"{C}-node-1"


def settings(**overrides: Any) -> Settings:
    fields: dict[str, Any] = {
        "cluster": C,
        "nodes": 2,
        "heartbeat_period": 0.2,
        "telemetry": "off",
        "pod_duration": "never",
        **overrides,
    }
    return Settings(**fields)


@pytest.fixture
async def agent(bus, store) -> AsyncIterator[Runtime]:
    async with sh.running("node-agent", build, settings(), bus, store, instance=AGENT) as (runtime, _):
        yield runtime


def start(
    pod: str = "j1-worker-0",
    *,
    duration: float | None = 30.0,
    exit_code: int = 0,
    node: str = NODE,
    uid: str = "uid-1",
    restart_policy: str = "Never",
) -> events.StartPods:
    return sh.message(
        events.StartPods,
        cluster=C,
        job="j1",
        job_version=0,
        pods=[
            events.PodStart(
                pod=pod,
                uid=uid,
                node=node,
                task="worker",
                env={"RANK": "0"},
                restart_policy=restart_policy,
                sim_duration=duration,
                sim_exit_code=exit_code,
            )
        ],
    )


def stop(pod: str = "j1-worker-0", uid: str = "uid-1", node: str = NODE) -> events.StopPods:
    return sh.message(events.StopPods, cluster=C, pods=[events.PodStop(pod=pod, node=node, uid=uid, job="j1")])


async def send(
    bus: Any, probe: sh.Probe, subject: str, msg: events.Message, *, again: bool = False, durable: str = AGENT
) -> None:
    await sh.send(bus, subject, msg)
    await probe.settled(durable, subject)
    if again:
        await sh.send(bus, subject, msg, copy=1)
        await probe.settled(durable, subject)


async def reports(probe: sh.Probe, pod: str = "j1-worker-0") -> list[events.PodReport]:
    return [
        r
        for m in await probe.decoded(subjects.pod_phases(C), events.PodPhasesReported)
        for r in m.reports
        if r.pod == pod
    ]


async def phases(probe: sh.Probe, pod: str = "j1-worker-0") -> list[str]:
    return [r.phase for r in await reports(probe, pod)]


async def reported(probe: sh.Probe, phase: str, pod: str = "j1-worker-0") -> events.PodReport:
    [found] = await sh.until(lambda: _reports_in(probe, pod, phase), what=f"{pod} {phase}")
    return found


async def _reports_in(probe: sh.Probe, pod: str, phase: str) -> list[events.PodReport]:
    return [r for r in await reports(probe, pod) if r.phase == phase]


async def statuses(bus: Any) -> dict[str, events.NodeStatus]:
    return {
        s.rsplit(".", 1)[-1]: sh.ALL_TYPES.decode(d.data)
        for s, d in (await bus.last_per_subject(subjects.node_statuses(C))).items()
    }


async def status_when(bus: Any, node: str, condition: Any) -> events.NodeStatus:
    async def probe() -> events.NodeStatus | None:
        found = (await statuses(bus)).get(node)
        return found if found is not None and condition(found) else None

    return await sh.until(probe, what=f"status of {node}")


# -- what the agent says of its nodes ---------------------------------------------------------------


async def test_each_node_has_its_status_and_the_agent_beats(agent, bus, probe) -> None:
    found = await sh.until(lambda: _all_statuses(bus, 2), what="node statuses")
    assert sorted(found) == [f"{C}-node-0", f"{C}-node-1"]
    status = found[NODE]
    assert (status.cluster, status.agent, status.ready, status.gpu_ok, status.fabric_ok) == (C, AGENT, True, True, True)
    assert status.allocatable == {"cpu": 96.0, "memory": float(1 << 40), "nvidia.com/gpu": 8.0, "pods": 110.0}
    beats = await probe.wait(subjects.heartbeats(C), events.AgentHeartbeat)
    assert (beats[-1].agent, beats[-1].nodes, beats[-1].silent) == (AGENT, 2, [])


async def test_a_node_that_goes_down_is_reported_not_ready_and_its_pods_wait_for_it(agent, bus, store, probe) -> None:
    await send(bus, probe, subjects.start_pods(C), start(duration=0.5))
    await reported(probe, "Running")
    down = sh.message(events.InjectNodeFault, cluster=C, node=NODE, kind="node-down")
    await send(bus, probe, subjects.node_fault(C), down, durable=f"{AGENT}-faults")
    status = await status_when(bus, NODE, lambda s: not s.ready)
    assert status.reason == "NodeDown" and (await statuses(bus))[f"{C}-node-0"].ready
    # A pod started later on the other node, that ends later: once it is done, the first one's
    # time is up too, but its node is cut off: it neither finishes nor reports.
    await send(bus, probe, subjects.start_pods(C), start("other", node=f"{C}-node-0", duration=0.6))
    await reported(probe, "Succeeded", pod="other")
    assert await phases(probe) == ["Running"]
    await sh.send(bus, subjects.node_fault(C), sh.message(events.InjectNodeFault, cluster=C, node=NODE, kind="node-up"))
    await status_when(bus, NODE, lambda s: s.ready)
    await reported(probe, "Succeeded")


async def test_a_node_taken_down_stays_down_when_the_agent_restarts(bus, store, probe) -> None:
    # The simulated node is down until its node-up, whatever happens to the agent simulating it.
    down = sh.message(events.InjectNodeFault, cluster=C, node=NODE, kind="node-down")
    async with sh.running("node-agent", build, settings(), bus, store, instance=AGENT):
        await send(bus, probe, subjects.node_fault(C), down, durable=f"{AGENT}-faults")
        await status_when(bus, NODE, lambda s: not s.ready)
    before = (await statuses(bus))[NODE].event_id
    async with sh.running("node-agent", build, settings(), bus, store, instance=AGENT):
        status = await status_when(bus, NODE, lambda s: s.event_id != before)  # the new agent's word
    assert (status.ready, status.reason) == (False, "NodeDown")


# -- pods ---------------------------------------------------------------------------------------------


async def test_a_started_pod_runs_once_then_succeeds_after_its_duration(agent, bus, store, probe) -> None:
    msg = start(duration=0.4)
    await send(bus, probe, subjects.start_pods(C), msg, again=True)
    running = await reported(probe, "Running")
    assert (running.node, running.job, running.uid, running.restarts) == (NODE, "j1", "uid-1", 0)
    [report] = await probe.decoded(subjects.pod_phases(C), events.PodPhasesReported)
    assert (report.agent, report.causation_id) == (AGENT, msg.event_id)
    assert (await store.get(KIND, "j1-worker-0")).decode(domain.RunningPod).uid == "uid-1"
    done = await reported(probe, "Succeeded")
    assert done.exit_code == 0 and await phases(probe) == ["Running", "Succeeded"]
    await sh.until(lambda: _absent(store, KIND, "j1-worker-0"), what="the pod forgotten")


async def test_a_failing_pod_reports_its_exit_code_and_one_that_always_restarts_runs_again(agent, bus, probe) -> None:
    await send(bus, probe, subjects.start_pods(C), start(duration=0.2, exit_code=3))
    assert (await reported(probe, "Failed")).exit_code == 3
    await send(bus, probe, subjects.start_pods(C), start("j1-worker-1", duration=0.2, restart_policy="Always"))
    await sh.until(lambda: _restarted(probe, "j1-worker-1"), what="a restart in place")
    assert set(await phases(probe, "j1-worker-1")) == {"Running"}


async def test_a_stopped_pod_is_reported_deleted_once(agent, bus, store, probe) -> None:
    await send(bus, probe, subjects.start_pods(C), start())
    await reported(probe, "Running")
    await send(bus, probe, subjects.stop_pods(C), stop(), again=True)
    await reported(probe, "Deleted")
    assert await phases(probe) == ["Running", "Deleted"] and await store.get(KIND, "j1-worker-0") is None
    await send(bus, probe, subjects.stop_pods(C), stop(uid="uid-0"))  # another incarnation, already gone: said so
    assert await phases(probe) == ["Running", "Deleted", "Deleted"]


async def test_a_new_incarnation_is_a_new_start_and_another_agents_node_is_not_ours(agent, bus, store, probe) -> None:
    await send(bus, probe, subjects.start_pods(C), start())
    await send(bus, probe, subjects.start_pods(C), start())  # the same incarnation, another command
    await reported(probe, "Running")
    assert await phases(probe) == ["Running"]
    await send(bus, probe, subjects.start_pods(C), start(uid="uid-2"))
    await sh.until(lambda: _reports_in(probe, "j1-worker-0", "Running"), what="two starts")
    assert [r.uid for r in await reports(probe)] == ["uid-1", "uid-2"]
    await send(bus, probe, subjects.start_pods(C), start("elsewhere", node="c9-node-0"))
    assert await reports(probe, "elsewhere") == [] and await store.get(KIND, "elsewhere") is None


async def test_a_restarted_agent_finishes_its_pods_on_time(bus, store, probe) -> None:
    async with sh.running("node-agent", build, settings(), bus, store, instance=AGENT):
        await send(bus, probe, subjects.start_pods(C), start(duration=1.0))
        await reported(probe, "Running")
    assert await phases(probe) == ["Running"]  # it stopped before the pod's end
    async with sh.running("node-agent", build, settings(), bus, store, instance=AGENT):
        await reported(probe, "Succeeded")
    assert await phases(probe) == ["Running", "Succeeded"]


async def test_an_agent_killed_while_its_pod_runs_reports_it_finished_once_restarted_past_its_end(
    bus, store, probe
) -> None:
    """``kill -9`` of the agent (its lease is left to lapse) while a pod runs; the pod's end passes
    before the restarted agent takes over: it reports the pod Succeeded on its own, with no other
    message arriving (the pod's timer is due when the agent activates: it ran before the agent was
    active and was dropped, so the pod never finished)."""
    lease = 0.4
    async with sh.running("node-agent", build, settings(), bus, store, instance=AGENT, lease_ttl=lease):
        await send(bus, probe, subjects.start_pods(C), start(duration=0.3))
        await reported(probe, "Running")
    assert await store.take_lease(AGENT, "killed", 1.5)  # the killed holder's, never given back
    async with sh.running("node-agent", build, settings(), bus, store, instance=AGENT, lease_ttl=lease) as (rt, _):
        assert not rt.active  # a standby while the killed agent's lease lasts, past the pod's end
        await reported(probe, "Succeeded")
    assert await phases(probe) == ["Running", "Succeeded"]


@pytest.mark.parametrize("point", ["after-commit", "after-publish"])
async def test_a_crash_after_the_commit_reports_running_once(bus, store, probe, point) -> None:
    crash = sh.Crash(point)
    async with sh.running("node-agent", build, settings(), bus, store, instance=AGENT, fault=crash):
        await send(bus, probe, subjects.start_pods(C), start())
        await reported(probe, "Running")
        assert crash.fired == 1
    assert await phases(probe) == ["Running"]


# -- telemetry and health ---------------------------------------------------------------------------


async def test_telemetry_faults_become_the_verdict_the_cluster_scheduler_follows(bus, store, probe) -> None:
    faults = ["gpu-ecc@c1-node-0,gpu=5", "ib-down@c1-node-1", "silent@c1-node-2"]
    agent_settings = settings(nodes=4, telemetry="simulated", telemetry_period=0.2, faults=faults)
    scheduler = ClusterSchedulerSettings(cluster=C, schedule_period="0.1s", node_timeout=0.6)
    async with (
        sh.running("node-agent", build, agent_settings, bus, store, instance=AGENT) as (_, agent),
        sh.running("cluster-scheduler", build_cluster_scheduler, scheduler, bus, store),
    ):
        sick = await status_when(bus, f"{C}-node-0", lambda s: not s.gpu_ok)
        assert sick.sick_gpus == [5] and sick.fabric_ok and sick.health_reasons
        cut = await status_when(bus, f"{C}-node-1", lambda s: not s.fabric_ok)
        assert cut.down_ports and cut.gpu_ok
        gpus = await bus.last_per_subject(f"telemetry.gpu.{C}.*")
        assert sorted(s.rsplit(".", 1)[-1] for s in gpus) == [f"{C}-node-{i}" for i in (0, 1, 3)]  # node-2 is silent
        beat = (await probe.wait(subjects.heartbeats(C), events.AgentHeartbeat))[-1]
        assert beat.silent == [f"{C}-node-2"]
        summary = await probe.wait(
            subjects.capacity(C),
            events.ClusterCapacityReported,
            timeout=15,
            where=lambda m: m.ready_nodes == 3 and m.gpu_healthy_nodes == 2 and m.fabric_healthy_nodes == 2,
        )
        assert summary[-1].free["nvidia.com/gpu"] == 16.0  # node-0's GPUs are not free, node-2 is gone
        await sh.send(
            bus, subjects.node_fault(C), sh.message(events.InjectNodeFault, cluster=C, node=f"{C}-node-0", kind="clear")
        )
        await status_when(bus, f"{C}-node-0", lambda s: s.gpu_ok)
        await probe.wait(
            subjects.capacity(C),
            events.ClusterCapacityReported,
            timeout=15,
            where=lambda m: m.gpu_healthy_nodes == 3 and m.free["nvidia.com/gpu"] == 24.0,
        )
        assert not (await statuses(bus))[f"{C}-node-1"].fabric_ok  # the other fault stays until it is cleared
        assert agent.health[f"{C}-node-0"].gpu_ok


async def _all_statuses(bus: Any, count: int) -> dict[str, events.NodeStatus]:
    found = await statuses(bus)
    return found if len(found) == count else {}


async def _restarted(probe: sh.Probe, pod: str) -> bool:
    return any(r.restarts >= 1 for r in await reports(probe, pod))


async def _absent(store: Any, kind: str, name: str) -> bool:
    return await store.get(kind, name) is None


async def test_a_pod_that_came_due_while_the_store_was_away_is_reported_ended_at_its_due_time(
    bus, store, probe
) -> None:
    """A simulated pod comes due while its agent cannot record it (the store away, as in a
    partition). Once the store is back it is reported Succeeded dated at its due time: it did not
    run on until then."""
    flaky = sh.StoreDownForAWhile(store)
    async with sh.running("node-agent", build, settings(), bus, flaky, instance=AGENT):
        await send(bus, probe, subjects.start_pods(C), start(duration=1.0))
        running = await reported(probe, "Running")
        flaky.down = True
        await sh.until(lambda: flaky.refused >= 2, what="the agent to fail to record the pod's end")
        back = time.time()
        flaky.down = False
        succeeded = await reported(probe, "Succeeded")
    assert running.at + 0.9 <= succeeded.at < back


async def test_a_stop_that_comes_before_a_due_pods_end_is_recorded_finds_it_ended_at_its_due_time(
    bus, store, probe
) -> None:
    """The stop of a pod that came due before the agent recorded its end (the finish timer held
    back here, as a store that was away holds it back): the pod ended by itself at its due time,
    and is reported so, then Deleted for the stop; not Deleted alone, as if it ran until the stop."""
    async with sh.running("node-agent", build, settings(), bus, store, instance=AGENT) as (_, agent):

        async def held_back() -> None:
            pass

        agent.finish_due = held_back
        await send(bus, probe, subjects.start_pods(C), start(duration=0.5))
        running = await reported(probe, "Running")
        await asyncio.sleep(1.0)
        stopped = time.time()
        await send(bus, probe, subjects.stop_pods(C), stop())
        deleted = await reported(probe, "Deleted")
    [succeeded] = await _reports_in(probe, "j1-worker-0", "Succeeded")
    assert await phases(probe) == ["Running", "Succeeded", "Deleted"]
    assert running.at + 0.4 <= succeeded.at < stopped <= deleted.at
