"""The node-agent on real NATS and Redis: telemetry (simulated fleet with faults, real readers),
and exec mode running pods as local processes."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

import events
import hwprobe
from events import subjects
from events.telemetry import FabricTelemetry, GpuTelemetry
from node_agent.app import build
from node_agent.config import Settings
from node_agent.execpods import log_path
from node_agent.handlers import NodeAgent
from node_agent.sensors import NoSensors, RealSensors
from servicekit import Runtime, load_settings

pytestmark = pytest.mark.service

FIXTURES = Path(__file__).parents[1] / "unit" / "hwprobe" / "fixtures"
QUIET = {"heartbeat_period": 3600.0, "telemetry_period": 3600.0, "tick_period": 0.1}


async def eventually(what: str, probe: Callable[[], Any], timeout: float = 20.0) -> Any:
    """Await ``probe()`` (sync or async) until truthy; fail naming ``what`` after ``timeout``."""
    deadline, last = time.monotonic() + timeout, None
    while time.monotonic() < deadline:
        last = probe()
        if asyncio.iscoroutine(last):
            last = await last
        if last:
            return last
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}; last saw {last!r}")


@pytest.fixture
async def agent_factory(bus, store) -> AsyncIterator[Callable[..., Any]]:
    runtimes: list[Runtime] = []

    async def make(**overrides: Any) -> NodeAgent:
        settings = load_settings(Settings, "NODE_AGENT", {"cluster": "c1", **QUIET, **overrides}, environ={})
        runtime = Runtime("node-agent", bus, store)
        runtimes.append(runtime)
        return await build(settings, runtime)

    yield make
    for runtime in runtimes:
        await runtime.stop()


async def latest(bus, pattern: str, type_: type) -> dict[str, Any]:
    return {d.subject.rsplit(".", 1)[-1]: msgspec.json.decode(d.data, type=type_)
            for d in (await bus.last_per_subject(pattern)).values()}


async def test_a_simulated_fleet_reports_every_node_with_its_shape_and_topology(bus, agent_factory):
    await agent_factory(nodes=4, allocatable={"cpu": "32", "nvidia.com/gpu": "4"},
                        fleet_shape={"gpu_model": "A100", "nodes_per_leaf": 2, "leaves_per_spine": 2})
    gpus = await latest(bus, "telemetry.gpu.c1.>", GpuTelemetry)
    fabric = await latest(bus, "telemetry.fabric.c1.>", FabricTelemetry)
    assert sorted(gpus) == sorted(fabric) == [f"c1-node-{i}" for i in range(4)]
    assert {g.model for t in gpus.values() for g in t.gpus} == {"NVIDIA A100"}
    assert all(len(t.gpus) == 4 and t.source == "simulated" for t in gpus.values())
    assert [fabric[f"c1-node-{i}"].position.leaf for i in range(4)] == ["c1-leaf0", "c1-leaf0", "c1-leaf1", "c1-leaf1"]
    beats = await latest(bus, "heartbeat.node.c1.>", events.NodeHeartbeat)
    assert beats["c1-node-3"].labels["topology.hyperjob.io/tier1"] == "c1-leaf1"
    assert beats["c1-node-3"].labels["topology.hyperjob.io/tier2"] == "c1-spine0"


async def test_injected_faults_show_in_telemetry_and_a_silent_node_stops_heartbeating(bus, agent_factory):
    agent = await agent_factory(nodes=3, faults=["ib-down@c1-node-1,device=mlx5_3"])
    for kind, extra in (("gpu-xid", {"gpu": 2, "xid": 79}), ("silent", {})):
        node = "c1-node-0" if kind == "gpu-xid" else "c1-node-2"
        fault = events.InjectNodeFault(event_id=f"f-{kind}", cluster="c1", node=node, kind=kind, **extra)
        await bus.publish(subjects.node_fault("c1"), events.encode(fault), msg_id=fault.event_id)
    await eventually("both faults to be applied", lambda: agent.sensors.silent("c1-node-2")
                     and agent.sensors.fleet["c1-node-0"].xids)
    silent_beat = (await latest(bus, "heartbeat.node.c1.>", events.NodeHeartbeat))["c1-node-2"].occurred_at
    await agent.telemetry()
    await agent.heartbeat()
    gpus = await latest(bus, "telemetry.gpu.c1.>", GpuTelemetry)
    health = {n: hwprobe.node_health(gpus.get(n), f) for n, f in (await latest(
        bus, "telemetry.fabric.c1.>", FabricTelemetry)).items()}
    assert health["c1-node-0"].sick_gpus == [2] and health["c1-node-0"].fabric_ok
    assert health["c1-node-1"].down_ports == ["mlx5_3/1"] and health["c1-node-1"].gpu_ok
    beats = await latest(bus, "heartbeat.node.c1.>", events.NodeHeartbeat)
    assert beats["c1-node-2"].occurred_at == silent_beat  # no newer heartbeat from the silent node
    assert beats["c1-node-0"].occurred_at > silent_beat


async def test_real_mode_reports_what_the_readers_find_and_no_devices_where_there_are_none(bus, agent_factory):
    agent = await agent_factory(nodes=1, mode="exec", infiniband_sysfs=str(FIXTURES / "dgx-h100/sys/class/infiniband"))
    assert isinstance(agent.sensors, RealSensors)
    gpu = (await latest(bus, "telemetry.gpu.c1.>", GpuTelemetry))["c1-node-0"]
    fabric = (await latest(bus, "telemetry.fabric.c1.>", FabricTelemetry))["c1-node-0"]
    assert (gpu.source, gpu.gpus) == ("none", [])  # no NVML on this machine: nothing invented
    assert fabric.infiniband_source == "sysfs" and [p.device for p in fabric.infiniband] == [
        "mlx5_0", "mlx5_1", "mlx5_2", "mlx5_bond_0"]


class Phases:
    """Every PodPhaseReported of cluster c1, in order."""

    def __init__(self) -> None:
        self.seen: list[events.PodPhaseReported] = []

    async def __call__(self, delivery: Any) -> None:
        self.seen.append(msgspec.json.decode(delivery.data, type=events.PodPhaseReported))

    def of(self, pod: str) -> list[tuple[str, int | None]]:
        return [(r.phase, r.exit_code) for r in self.seen if r.pod == pod]


@pytest.fixture
async def phases(bus) -> Phases:
    collected = Phases()
    await bus.consume("phases", subjects.pod_phase("c1"), collected)
    return collected


def start(pod: str, code: str, policy: str = "Never", **extra: Any) -> events.StartPod:
    return events.StartPod(event_id=f"start-{pod}", cluster="c1", node="c1-node-0", pod=pod, job="j", task="w",
                           job_version=1, pod_uid=f"uid-{pod}", command=[sys.executable, "-c"], args=[code],
                           restart_policy=policy, **extra)


async def send(bus, subject: str, message: events.Message) -> None:
    await bus.publish(subject, events.encode(message), msg_id=message.event_id)


async def test_exec_pods_run_with_their_env_and_files_and_report_their_exit(bus, agent_factory, phases, tmp_path):
    await agent_factory(nodes=1, mode="exec", telemetry="off", work_dir=str(tmp_path))
    code = ("import os, pathlib; print('addr', os.environ['MASTER_ADDR'], os.environ['RANK']);"
            "print(pathlib.Path(os.environ['HYPERJOB_FILES_ROOT'], 'etc/volcano/w.host').read_text())")
    await send(bus, subjects.start_pod("c1"), start("ok", code, env={"MASTER_ADDR": "j-w-0.j", "RANK": "3"},
                                                    files={"/etc/volcano/w.host": "j-w-0.j"}))
    await send(bus, subjects.start_pod("c1"), start("bad", "import sys; print('oops'); sys.exit(3)"))
    await eventually("both pods to finish", lambda: len(phases.of("ok")) == 2 and len(phases.of("bad")) == 2)
    assert phases.of("ok") == [("Running", None), ("Succeeded", 0)]
    assert phases.of("bad") == [("Running", None), ("Failed", 3)]
    log = log_path(str(tmp_path), "c1", "ok").read_text()
    assert "addr 127.0.0.1 3" in log and "j-w-0.j" in log
    assert "oops" in log_path(str(tmp_path), "c1", "bad").read_text()


async def test_an_exec_pod_is_killed_on_stop_and_a_failing_one_restarts_in_place(bus, agent_factory, phases, tmp_path):
    agent = await agent_factory(nodes=1, mode="exec", telemetry="off", work_dir=str(tmp_path), kill_grace=5.0)
    await send(bus, subjects.start_pod("c1"), start("sleeper", "import time; print('up', flush=True); time.sleep(600)"))
    await send(bus, subjects.start_pod("c1"), start("flaky", "import sys; sys.exit(1)", policy="OnFailure"))
    await eventually("the sleeper to start", lambda: "up" in log_path(str(tmp_path), "c1", "sleeper").read_text()
                     if log_path(str(tmp_path), "c1", "sleeper").exists() else False)
    process = agent.runner.procs["sleeper"]
    await send(bus, subjects.stop_pod("c1"), events.StopPod(event_id="stop-sleeper", cluster="c1", node="c1-node-0",
                                                            pod="sleeper"))
    await eventually("the sleeper to be deleted", lambda: ("Deleted", None) in phases.of("sleeper"))
    assert process.returncode is not None  # the process is gone, not just forgotten
    await eventually("the flaky pod to restart", lambda: [r.restarts for r in phases.seen if r.pod == "flaky"][-1:] == [1])
    assert [p for p, _ in phases.of("flaky")] == ["Running", "Running"]


async def test_a_command_that_does_not_exist_fails_with_127(bus, agent_factory, phases, tmp_path):
    await agent_factory(nodes=1, mode="exec", telemetry="off", work_dir=str(tmp_path))
    message = msgspec.structs.replace(start("missing", ""), command=["/no/such/binary"], args=[])
    await send(bus, subjects.start_pod("c1"), message)
    await eventually("the pod to fail", lambda: len(phases.of("missing")) == 2)
    assert phases.of("missing") == [("Running", None), ("Failed", 127)]


async def test_the_cluster_scheduler_taints_sick_nodes_and_drops_silent_ones(bus, store, agent_factory):
    from cluster_scheduler.config import Settings as SchedulerSettings  # noqa: PLC0415 - only this test
    from cluster_scheduler.handlers import ClusterScheduler  # noqa: PLC0415

    import records  # noqa: PLC0415

    agent = await agent_factory(nodes=4, faults=["gpu-ecc@c1-node-0,gpu=5", "ib-down@c1-node-1", "silent@c1-node-2"])
    await agent.telemetry()
    await agent.heartbeat()
    scheduler = ClusterScheduler(Runtime("cluster-scheduler", bus, store),
                                 SchedulerSettings(cluster="c1", node_timeout=0.5, health_period=0.0001))

    async def nodes() -> dict[str, records.NodeDoc]:
        await agent.heartbeat()
        await scheduler.cycle()
        return {n: d.decode(records.NodeDoc) for n, d in (await store.list(records.node_kind("c1"))).items()}

    seen = await eventually("node-2 to be NotReady", lambda: _when(nodes(), lambda n: not n["c1-node-2"].ready))
    assert [t["key"] for t in seen["c1-node-0"].taints] == ["hyperjob.io/gpu-unhealthy"]
    assert [t["key"] for t in seen["c1-node-1"].taints] == ["hyperjob.io/fabric-unhealthy"]
    assert seen["c1-node-3"].taints == [] and seen["c1-node-3"].ready
    capacity = (await store.get(records.CLUSTER, "c1")).decode(records.ClusterDoc)
    assert capacity.ready_nodes == 3 and capacity.free["nvidia.com/gpu"] == 16.0  # node-0's GPUs are not free

    fault = events.InjectNodeFault(event_id="clear-0", cluster="c1", node="c1-node-0", kind="clear")
    await send(bus, subjects.node_fault("c1"), fault)
    await eventually("the fault to be cleared", lambda: not agent.sensors.fleet["c1-node-0"].ecc_uncorrected)
    await agent.telemetry()
    recovered = await eventually("node-0 to recover", lambda: _when(nodes(), lambda n: not n["c1-node-0"].taints))
    assert recovered["c1-node-1"].taints  # the other fault stays until it is cleared


async def _when(value: Any, condition: Callable[[Any], bool]) -> Any:
    result = await value
    return result if condition(result) else None


async def test_simulated_pods_keep_their_flow_start_running_succeeded_and_stop_deleted(bus, agent_factory, phases):
    await agent_factory(nodes=2, telemetry="off")
    await send(bus, subjects.start_pod("c1"), msgspec.structs.replace(start("quick", ""), sim_duration=0.2))
    await send(bus, subjects.start_pod("c1"), msgspec.structs.replace(start("slow", ""), sim_duration=600.0))
    await eventually("the quick pod to succeed", lambda: len(phases.of("quick")) == 2)
    await send(bus, subjects.stop_pod("c1"), events.StopPod(event_id="stop-slow", cluster="c1", node="c1-node-0",
                                                            pod="slow"))
    await eventually("the slow pod to be deleted", lambda: len(phases.of("slow")) == 2)
    assert phases.of("quick") == [("Running", None), ("Succeeded", 0)]
    assert phases.of("slow") == [("Running", None), ("Deleted", None)]


async def test_a_redelivered_start_runs_one_process_and_reports_once(bus, agent_factory, phases, tmp_path):
    agent = await agent_factory(nodes=1, mode="exec", telemetry="off", work_dir=str(tmp_path))
    message = start("once", "import time; print('hi', flush=True); time.sleep(600)")
    first = await agent.on_start(message)
    process = agent.runner.procs["once"]
    again = await agent.on_start(message)  # the same message delivered again
    assert first.outputs == [] and again.outputs == []  # Running was committed (once) by the first
    await eventually("the pod to run", lambda: phases.of("once"))
    assert agent.runner.procs["once"] is process and len(agent.runner.procs) == 1
    await send(bus, subjects.stop_pod("c1"), events.StopPod(event_id="stop-once", cluster="c1", node="c1-node-0",
                                                            pod="once"))
    await eventually("the pod to be deleted", lambda: len(phases.of("once")) == 2)
    assert phases.of("once") == [("Running", None), ("Deleted", None)]


async def test_an_exec_agent_that_restarts_reports_its_lost_pods_failed(bus, store, agent_factory, phases, tmp_path):
    first = await agent_factory(nodes=1, mode="exec", telemetry="off", work_dir=str(tmp_path))
    await send(bus, subjects.start_pod("c1"), start("orphan", "import time; time.sleep(600)"))
    await eventually("the pod to run", lambda: "orphan" in first.runner.procs)
    process = first.runner.procs["orphan"]
    await first.close()  # the agent stops (its processes die with it); the store still lists the pod
    assert process.returncode is not None
    second = NodeAgent(Runtime("node-agent", bus, store), load_settings(
        Settings, "NODE_AGENT", {"cluster": "c1", "mode": "exec", "telemetry": "off", "work_dir": str(tmp_path)},
        environ={}), NoSensors())
    await second.load()
    await eventually("the lost pod to be reported", lambda: len(phases.of("orphan")) == 2)
    assert phases.of("orphan") == [("Running", None), ("Failed", 137)]
    assert await store.list("agentpod@c1") == {}


async def test_telemetry_too_old_to_trust_leaves_a_node_untainted(bus, store, agent_factory):
    from cluster_scheduler.config import Settings as SchedulerSettings  # noqa: PLC0415 - only this test
    from cluster_scheduler.handlers import ClusterScheduler  # noqa: PLC0415
    from events.telemetry import GpuDevice  # noqa: PLC0415

    import records  # noqa: PLC0415

    agent = await agent_factory(nodes=2, telemetry="off")
    await agent.heartbeat()
    now = time.time()
    for node, at in (("c1-node-0", now - 3600.0), ("c1-node-1", now)):  # the same fault, old and new
        message = GpuTelemetry(event_id=f"gpu-{node}", occurred_at=at, cluster="c1", node=node, source="nvml",
                               gpus=[GpuDevice(index=0, ecc_uncorrected=4)])
        await send(bus, subjects.gpu_telemetry("c1", node), message)
    scheduler = ClusterScheduler(Runtime("cluster-scheduler", bus, store),
                                 SchedulerSettings(cluster="c1", telemetry_max_age=120.0))
    await scheduler.cycle()
    nodes = {n: d.decode(records.NodeDoc) for n, d in (await store.list(records.node_kind("c1"))).items()}
    assert nodes["c1-node-0"].taints == []
    assert [t["key"] for t in nodes["c1-node-1"].taints] == ["hyperjob.io/gpu-unhealthy"]


async def test_agents_of_named_nodes_each_run_only_their_own_pods(bus, agent_factory, phases, tmp_path):
    left = await agent_factory(node_names=["left"], mode="exec", telemetry="off", work_dir=str(tmp_path))
    right = await agent_factory(node_names=["right"], mode="exec", telemetry="off", work_dir=str(tmp_path))
    for node in ("left", "right"):
        message = msgspec.structs.replace(start(f"on-{node}", "print('hi')"), node=node)
        await send(bus, subjects.start_pod("c1"), message)
    await eventually("both pods to finish", lambda: len(phases.of("on-left")) == 2 and len(phases.of("on-right")) == 2)
    assert phases.of("on-left") == phases.of("on-right") == [("Running", None), ("Succeeded", 0)]
    assert {r.node for r in phases.seen if r.pod == "on-left"} == {"left"}
    assert (left.pods, right.pods) == ({}, {})  # each forgot its own pod once it finished, and saw no other


async def test_an_exit_whose_report_failed_to_commit_is_reported_once_when_the_store_is_back(bus, store, phases,
                                                                                             tmp_path):
    sys.path.insert(0, str(Path(__file__).parent))
    from service_helpers import FlakyStore  # noqa: PLC0415 - a sibling helper module, not a package

    flaky = FlakyStore(store, failures=0)
    runtime = Runtime("node-agent", bus, flaky)
    agent = await build(load_settings(Settings, "NODE_AGENT", {"cluster": "c1", "nodes": 1, "mode": "exec",
                                                              "telemetry": "off", "work_dir": str(tmp_path), **QUIET},
                                      environ={}), runtime)
    try:
        release = tmp_path / "go"
        code = f"import pathlib, sys, time\nwhile not pathlib.Path({str(release)!r}).exists(): time.sleep(0.05)\nsys.exit(4)"
        await send(bus, subjects.start_pod("c1"), start("late", code))
        await eventually("the pod to run", lambda: phases.of("late"))
        flaky.failures = 2  # the store is down when the process ends
        release.touch()
        await eventually("the exit to be reported", lambda: len(phases.of("late")) == 2)
        assert phases.of("late") == [("Running", None), ("Failed", 4)]
        assert flaky.failures == 0 and agent.pods == {}
    finally:
        await runtime.stop()
