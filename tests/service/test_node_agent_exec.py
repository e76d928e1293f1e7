"""A node-agent in exec mode (its own ``build`` on a runtime over real JetStream and Redis): each pod
runs its command as a local process with its whole environment and files, its output in a log; it
is reported Running, then Succeeded or Failed with its exit code; a stopped pod's process is killed;
a failing container restarts in place by its policy; a redelivered start runs one process; an agent
that restarts reports the pods it can no longer watch Failed (137); an exit is reported even when
the store was down at the moment it happened; agents of named nodes run only their own pods; a
pod's peers' hostnames resolve to their nodes' addresses, and a peer that already ended is not
waited for."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from hyperjob import events
from hyperjob.events import subjects
from hyperjob.services.node_agent.app import agent_name, build
from hyperjob.services.node_agent.config import Settings
from hyperjob.services.node_agent.execpods import log_path
from hyperjob.services.node_agent.handlers import NodeAgent
from tests.service import service_helpers as sh

pytestmark = pytest.mark.service

C = "c1"


def settings(tmp_path: Path, **overrides: Any) -> Settings:
    fields: dict[str, Any] = {
        "cluster": C,
        "nodes": 1,
        "mode": "exec",
        "telemetry": "off",
        "heartbeat_period": 1.0,
        "work_dir": str(tmp_path),
        "kill_grace": 5.0,
        **overrides,
    }
    return Settings(**fields)


@pytest.fixture
async def agent(bus, store, tmp_path) -> AsyncIterator[NodeAgent]:
    s = settings(tmp_path)
    async with sh.running("node-agent", build, s, bus, store, instance=agent_name(s)) as (_, built):
        yield built


def start(
    pod: str,
    code: str,
    *,
    node: str = f"{C}-node-0",
    uid: str = "",
    policy: str = "Never",
    env: dict[str, str] | None = None,
    files: dict[str, str] | None = None,
) -> events.StartPods:
    return sh.message(
        events.StartPods,
        cluster=C,
        job="j",
        job_version=0,
        pods=[
            events.PodStart(
                pod=pod,
                uid=uid or f"{pod}-uid",
                node=node,
                task="worker",
                command=[sys.executable, "-c", code],
                env=env or {},
                files=files or {},
                restart_policy=policy,
            )
        ],
    )


async def phases(probe: sh.Probe, pod: str) -> list[tuple[str, int | None]]:
    return [
        (r.phase, r.exit_code)
        for m in await probe.decoded(subjects.pod_phases(C), events.PodPhasesReported)
        for r in m.reports
        if r.pod == pod
    ]


async def phases_reach(
    probe: sh.Probe, pod: str, count: int, timeout: float = sh.DEADLINE
) -> list[tuple[str, int | None]]:
    async def enough() -> list[tuple[str, int | None]]:
        found = await phases(probe, pod)
        return found if len(found) >= count else []

    return await sh.until(enough, timeout=timeout, what=f"{count} reports of {pod}")


def log_says(tmp_path: Path, pod: str, text: str) -> Callable[[], bool]:
    path = log_path(str(tmp_path), C, pod)
    return lambda: path.exists() and text in path.read_text()


async def test_pods_run_with_their_env_and_files_and_report_their_exit(agent, bus, probe, tmp_path) -> None:
    code = (
        "import os, pathlib; print('addr', os.environ['MASTER_ADDR'], os.environ['RANK']);"
        "print(pathlib.Path(os.environ['HYPERJOB_FILES_ROOT'], 'etc/volcano/w.host').read_text())"
    )
    await sh.send(
        bus,
        subjects.start_pods(C),
        start("ok", code, env={"MASTER_ADDR": "ok.j", "RANK": "3"}, files={"/etc/volcano/w.host": "j-w-0.j"}),
    )
    await sh.send(bus, subjects.start_pods(C), start("bad", "import sys; print('oops'); sys.exit(3)"))
    assert await phases_reach(probe, "ok", 2) == [("Running", None), ("Succeeded", 0)]
    assert await phases_reach(probe, "bad", 2) == [("Running", None), ("Failed", 3)]
    log = log_path(str(tmp_path), C, "ok").read_text()
    assert "addr 127.0.0.1 3" in log and "j-w-0.j" in log  # a pod of this machine's hostname: loopback
    assert "oops" in log_path(str(tmp_path), C, "bad").read_text()
    assert agent.pods.rows == {}


async def test_a_stopped_pods_process_is_killed_and_a_failing_one_restarts_in_place(
    agent, bus, probe, tmp_path
) -> None:
    await sh.send(
        bus, subjects.start_pods(C), start("sleeper", "import time; print('up', flush=True); time.sleep(600)")
    )
    await sh.send(bus, subjects.start_pods(C), start("flaky", "import sys; sys.exit(1)", policy="OnFailure"))
    await sh.until(log_says(tmp_path, "sleeper", "up"), what="the sleeper up")
    process = agent.runner.procs["sleeper"]
    await sh.send(
        bus,
        subjects.stop_pods(C),
        sh.message(
            events.StopPods,
            cluster=C,
            pods=[events.PodStop(pod="sleeper", node=f"{C}-node-0", uid="sleeper-uid", job="j")],
        ),
    )
    assert await phases_reach(probe, "sleeper", 2) == [("Running", None), ("Deleted", None)]
    assert process.returncode is not None  # the process is gone, not just forgotten
    await sh.until(lambda: _restarts(probe, "flaky"), what="a restart in place")
    assert {phase for phase, _ in await phases(probe, "flaky")} == {"Running"}


async def test_a_command_that_does_not_exist_fails_with_127(agent, bus, probe) -> None:
    msg = start("missing", "")
    pod = msg.pods[0]
    missing = sh.message(
        events.StartPods,
        cluster=C,
        job="j",
        job_version=0,
        pods=[
            events.PodStart(
                pod=pod.pod,
                uid=pod.uid,
                node=pod.node,
                task="worker",
                command=["/no/such/binary"],
                restart_policy="Never",
            )
        ],
    )
    await sh.send(bus, subjects.start_pods(C), missing)
    assert await phases_reach(probe, "missing", 2) == [("Running", None), ("Failed", 127)]


async def test_a_redelivered_start_runs_one_process_and_reports_once(agent, bus, probe, tmp_path) -> None:
    msg = start("once", "import time; print('hi', flush=True); time.sleep(600)")
    await sh.send(bus, subjects.start_pods(C), msg)
    await probe.settled(agent.agent, subjects.start_pods(C))
    await sh.until(lambda: "once" in agent.runner.procs, what="the process")
    process = agent.runner.procs["once"]
    await sh.send(bus, subjects.start_pods(C), msg, copy=1)
    await probe.settled(agent.agent, subjects.start_pods(C))
    assert agent.runner.procs["once"] is process and len(agent.runner.procs) == 1
    assert await phases(probe, "once") == [("Running", None)]


async def test_an_agent_that_restarts_reports_the_pods_it_lost_failed(bus, store, probe, tmp_path) -> None:
    s = settings(tmp_path)
    async with sh.running("node-agent", build, s, bus, store, instance=agent_name(s)) as (_, first):
        await sh.send(bus, subjects.start_pods(C), start("orphan", "import time; time.sleep(600)"))
        await sh.until(lambda: "orphan" in first.runner.procs, what="the process")
        process = first.runner.procs["orphan"]
    assert process.returncode is not None  # its processes die with it; the store still lists the pod
    async with sh.running("node-agent", build, s, bus, store, instance=agent_name(s)) as (_, second):
        assert await phases_reach(probe, "orphan", 2) == [("Running", None), ("Failed", 137)]
        await sh.until(lambda: not second.pods.rows, what="the lost pod forgotten")
    assert await store.list(f"agentpod@{agent_name(s)}") == {}


async def test_an_exit_while_the_store_is_down_is_reported_once_it_is_back(bus, store, probe, tmp_path) -> None:
    s = settings(tmp_path)
    flaky = sh.StoreDownForAWhile(store, refusals=2)
    release = tmp_path / "go"
    code = (
        f"import pathlib, sys, time\nwhile not pathlib.Path({str(release)!r}).exists(): time.sleep(0.05)\nsys.exit(4)"
    )
    async with sh.running("node-agent", build, s, bus, flaky, instance=agent_name(s)) as (_, agent):
        await sh.send(bus, subjects.start_pods(C), start("late", code))
        await phases_reach(probe, "late", 1)
        flaky.down = True  # the store is down when the process ends
        release.touch()
        assert await phases_reach(probe, "late", 2, timeout=20) == [("Running", None), ("Failed", 4)]
        assert flaky.refused == 2 and agent.pods.rows == {}


async def test_agents_of_named_nodes_each_run_only_their_own_pods(bus, store, probe, tmp_path) -> None:
    left, right = settings(tmp_path, node_names=["left"]), settings(tmp_path, node_names=["right"])
    assert agent_name(left) != agent_name(right)
    async with (
        sh.running("node-agent", build, left, bus, store, instance=agent_name(left)) as (_, a),
        sh.running("node-agent", build, right, bus, store, instance=agent_name(right)) as (_, b),
    ):
        for node in ("left", "right"):
            await sh.send(bus, subjects.start_pods(C), start(f"on-{node}", "print('hi')", node=node))
        assert (
            await phases_reach(probe, "on-left", 2)
            == await phases_reach(probe, "on-right", 2)
            == [("Running", None), ("Succeeded", 0)]
        )
        reports = [m for m in await probe.decoded(subjects.pod_phases(C), events.PodPhasesReported)]
        assert {(m.agent, r.pod) for m in reports for r in m.reports} == {
            (agent_name(left), "on-left"),
            (agent_name(right), "on-right"),
        }
        assert (a.pods.rows, b.pods.rows) == ({}, {})


async def _restarts(probe: sh.Probe, pod: str) -> bool:
    return any(
        r.restarts >= 1
        for m in await probe.decoded(subjects.pod_phases(C), events.PodPhasesReported)
        for r in m.reports
        if r.pod == pod
    )


async def test_a_pod_hostname_resolves_to_the_address_of_the_node_its_pod_runs_on_in_another_cluster(
    bus, store, tmp_path
) -> None:
    """Two hosts: c1's agent at 10.9.0.1, c2's at 10.9.0.2 (each its node's address in its status).
    A pod on c1 naming ``m-0.j`` waits until c2's agent launches m-0, then starts with its address."""
    here, there = (
        settings(tmp_path / "c1", node_address="10.9.0.1"),
        settings(tmp_path / "c2", cluster="c2", node_address="10.9.0.2"),
    )
    code = "import os; print('addr', os.environ['MASTER_ADDR'], os.environ['VC_W_HOSTS'])"
    env = {"MASTER_ADDR": "m-0.j", "VC_W_HOSTS": "m-0.j,w-1.j"}
    async with (
        sh.running("node-agent", build, here, bus, store, instance=agent_name(here)),
        sh.running("node-agent", build, there, bus, store, instance=agent_name(there)),
    ):
        await sh.send(bus, subjects.start_pods(C), start("w-1", code, env=env))
        master = start("m-0", "import time; time.sleep(5)", node="c2-node-0")
        await sh.send(bus, subjects.start_pods("c2"), msgspec.structs.replace(master, cluster="c2"))
        await sh.until(log_says(tmp_path / "c1", "w-1", "addr "), what="w-1 to start")
        status = await bus.last(subjects.node_status("c2", "c2-node-0"))
    assert "addr 10.9.0.2 10.9.0.2,127.0.0.1" in log_path(str(tmp_path / "c1"), C, "w-1").read_text()
    assert status is not None and events.decoder(events.NodeStatus).decode(status.data).address == "10.9.0.2"


async def test_a_peer_that_ended_before_a_pod_started_is_not_waited_for_but_a_former_jobs_is(
    bus, store, tmp_path
) -> None:
    """m-0 (on c2) runs and ends before w-1 (on c1), whose env names it, is started. For a w-1 of
    the same job (created before m-0 ended) it is a peer that finished first: w-1 starts at once,
    not after ``resolve_wait``. For a w-1 of a job created after that end (the same names run
    again), it is a former job's pod: w-1 waits for the new m-0 and takes its address."""
    here, there = (
        settings(tmp_path / "c1", node_address="10.9.0.1", resolve_wait=600.0),
        settings(tmp_path / "c2", cluster="c2", node_address="10.9.0.2"),
    )
    code = "import os; print('addr', os.environ['MASTER_ADDR'], flush=True)"
    env = {"MASTER_ADDR": "m-0.j"}

    def peer(uid: str, code: str) -> events.StartPods:
        return msgspec.structs.replace(start("m-0", code, node="c2-node-0", uid=uid), cluster="c2")

    def worker(uid: str, world_since: float) -> events.StartPods:
        message = start("w-1", code, env=env, uid=uid)
        pods = [msgspec.structs.replace(p, world_since=world_since) for p in message.pods]
        return msgspec.structs.replace(message, pods=pods)

    async def blanked() -> bool:
        last = await bus.last(subjects.pod_address("m-0"))
        return last is not None and events.decoder(events.PodAddress).decode(last.data).address == ""

    async with (
        sh.running("node-agent", build, here, bus, store, instance=agent_name(here)),
        sh.running("node-agent", build, there, bus, store, instance=agent_name(there)),
    ):
        created = time.time()
        await sh.send(bus, subjects.start_pods("c2"), peer("m-0-a", "pass"))
        await sh.until(blanked, what="m-0 to end and its address to be blanked")
        await sh.send(bus, subjects.start_pods(C), worker("w-1-a", created))
        await sh.until(log_says(tmp_path / "c1", "w-1", "addr "), what="w-1 to start without waiting for m-0")
        assert "addr 127.0.0.1" in log_path(str(tmp_path / "c1"), C, "w-1").read_text()

        await sh.send(bus, subjects.start_pods(C), worker("w-1-b", time.time()))
        await asyncio.sleep(2)  # w-1-b waits: the blank m-0 is a former job's
        assert log_path(str(tmp_path / "c1"), C, "w-1").read_text().count("addr ") == 1
        await sh.send(bus, subjects.start_pods("c2"), peer("m-0-b", "import time; time.sleep(5)"))
        await sh.until(log_says(tmp_path / "c1", "w-1", "addr 10.9.0.2"), what="w-1 to take the new m-0's address")


async def test_a_job_of_many_pods_naming_each_other_looks_each_remote_peer_up_once(bus, store, tmp_path) -> None:
    """Eight pods of one job on c1 name each other and m-0 on c2: c1's agent finds its own pods in
    its table and reads m-0's address once for the batch, not once per pod (a world of N pods
    would cost N² reads)."""
    here, there = (
        settings(tmp_path / "c1", node_address="10.9.0.1"),
        settings(tmp_path / "c2", cluster="c2", node_address="10.9.0.2"),
    )
    names = [f"w-{i}" for i in range(8)]
    env = {"MASTER_ADDR": "m-0.j", "VC_W_HOSTS": ",".join(f"{n}.j" for n in names)}
    code = "import os, time; print('addr', os.environ['MASTER_ADDR'], os.environ['VC_W_HOSTS'], flush=True)"
    code += "; time.sleep(10)"  # none ends during the test (an end reads its own address to blank it)
    async with (
        sh.running("node-agent", build, here, bus, store, instance=agent_name(here)) as (runtime, _),
        sh.running("node-agent", build, there, bus, store, instance=agent_name(there)),
    ):
        master = start("m-0", "import time; time.sleep(10)", node="c2-node-0")
        await sh.send(bus, subjects.start_pods("c2"), msgspec.structs.replace(master, cluster="c2"))
        await sh.until(lambda: bus.last(subjects.pod_address("m-0")), what="m-0's address")
        looked_up: list[str] = []
        last = runtime.bus.last

        async def counted(subject: str) -> Any:
            looked_up.append(subject)
            return await last(subject)

        runtime.bus.last = counted
        workers = start("w-0", code, env=env)
        pods = [msgspec.structs.replace(workers.pods[0], pod=n, uid=f"{n}-uid") for n in names]
        await sh.send(bus, subjects.start_pods(C), msgspec.structs.replace(workers, pods=pods))
        for name in names:
            await sh.until(log_says(tmp_path / "c1", name, "addr "), what=f"{name} to start")
    assert [s for s in looked_up if s.startswith("podaddr.")] == [subjects.pod_address("m-0")]
    expected = "addr 10.9.0.2 " + ",".join(["127.0.0.1"] * 8)
    assert all(expected in log_path(str(tmp_path / "c1"), C, n).read_text() for n in names)
