"""The node-agent's container runtime (``containerpods.PodmanRunner``) running real pods under
podman, as an agent in ``mode: container`` runs them: a pod ends with its own exit code and its
output in its log; its ``resources.limits`` are the cgroup limits read inside it, its ``requests``
its CPU shares and memory soft limit; a container over its memory is reported ``OOMKilled``;
``kill -9`` of a container is Failed with 137; an agent that restarts adopts the container it left
running (the same container, not a second one), removes one that belongs to no pod of its, and a
deleted pod leaves no container behind; a frozen pod (``podman pause``) stands still and a thawed
one runs on where it stood; the image is pulled as ``imagePullPolicy`` says, a failed pull named
``ErrImagePull``; a ``hostPath`` volume is read read-only and an
``emptyDir`` goes with its pod.

Only the local base image is needed (``podman_kit.ensure_base_image``), not the compose deployment.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import uvloop

from hyperjob import events
from hyperjob.client.podlogs import k8s_log_text
from hyperjob.services.node_agent import domain
from hyperjob.services.node_agent.containerpods import LABEL_AGENT, PodmanRunner
from tests.containers import podman_kit
from tests.containers.observe import FIGURES

pytestmark = [pytest.mark.containers, pytest.mark.timeout(600)]  # a cold machine builds the base first

CLUSTER = "hj27"
Exits = asyncio.Queue[tuple[str, str, int, str]]


@pytest.fixture(scope="module")
def base_image() -> str:
    return podman_kit.ensure_base_image()


@pytest.fixture
def agent_name() -> str:
    return f"hj27-agent-{os.getpid()}"


@pytest.fixture
async def exits(monkeypatch: pytest.MonkeyPatch, agent_name: str) -> AsyncIterator[Exits]:
    """What the runners report; every container of the test's agent is removed at the end."""
    monkeypatch.setenv("CONTAINERS_CONF", str(podman_kit.CONTAINERS_CONF))  # the agent passes it on
    yield asyncio.Queue()
    for name in containers_of(agent_name):
        podman_kit.podman("rm", "--force", "--time", "0", name, check=False)


def runner(agent: str, work_dir: Path, exits: Exits) -> PodmanRunner:
    async def on_exit(pod: str, uid: str, code: int, reason: str) -> None:
        await exits.put((pod, uid, code, reason))

    return PodmanRunner(CLUSTER, agent, str(work_dir), kill_grace=2.0, on_exit=on_exit)


def pod(name: str, image: str, script: str, **fields: object) -> events.PodStart:
    return events.PodStart(
        pod=name, uid=f"{name}-uid", node="n0", task="t", image=image, command=["sh", "-c", script], **fields
    )  # type: ignore[arg-type]


def running_pod(start: events.PodStart) -> domain.RunningPod:
    return domain.RunningPod(
        pod=start.pod, uid=start.uid, job="j", node="n0", job_version=0, started_at=0.0, finishes_at=None,
        exit_code=0, restart_policy="Never",
    )  # fmt: skip


def containers_of(agent: str) -> list[str]:
    out = podman_kit.podman("ps", "--all", "--filter", f"label={LABEL_AGENT}={agent}", "--format", "{{.Names}}")
    return out.stdout.split()


def inspect(name: str, template: str) -> str:
    return podman_kit.podman("inspect", "--format", template, name).stdout.strip()


def output(work_dir: Path, pod_name: str) -> str:
    lines = (work_dir / CLUSTER / pod_name / "log").read_bytes().splitlines(keepends=True)
    return b"".join(k8s_log_text(line) for line in lines).decode()


async def said(work_dir: Path, pod_name: str, text: str) -> None:
    while not (work_dir / CLUSTER / pod_name / "log").exists() or text not in output(work_dir, pod_name):
        await asyncio.sleep(0.05)


async def next_exit(exits: Exits) -> tuple[str, str, int, str]:
    return await asyncio.wait_for(exits.get(), 90)  # a guard against a hang, not a timing


async def test_a_pod_ends_with_its_exit_code_and_its_output_in_its_log(
    base_image: str, tmp_path: Path, exits: Exits, agent_name: str
) -> None:
    pods = runner(agent_name, tmp_path, exits)
    await pods.launch(pod("ends-3", base_image, "echo hello from the pod; exit 3", env={"GREETING": "hi"}))
    assert await next_exit(exits) == ("ends-3", "ends-3-uid", 3, "Error")
    assert "hello from the pod" in output(tmp_path, "ends-3")
    assert containers_of(agent_name) == []  # an ended container is removed: its log stays


async def test_limits_are_the_cgroup_limits_inside_and_over_memory_is_oom_killed(
    base_image: str, tmp_path: Path, exits: Exits, agent_name: str
) -> None:
    pods = runner(agent_name, tmp_path, exits)
    read_limits = (
        "cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes; "
        "cat /sys/fs/cgroup/cpu.max 2>/dev/null || "
        "echo $(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)"
    )
    await pods.launch(pod("limits", base_image, read_limits, limits={"cpu": "500m", "memory": "64Mi"}))
    assert (await next_exit(exits))[2:] == (0, "Completed")
    memory, cpu = output(tmp_path, "limits").split("\n")[:2]
    quota, period = (int(v) for v in cpu.split())
    assert int(memory) == 64 * 2**20 and quota / period == 0.5
    FIGURES["cgroup limits inside vs pod limits"] = {
        "memory": f"{memory} bytes inside, limits.memory 64Mi = {64 * 2**20}",
        "cpu": f"quota {quota}/{period} inside, limits.cpu 500m",
    }

    hog = "python3 -c 'b = bytearray(512 * 2**20); print(len(b))'"
    await pods.launch(pod("hog", base_image, hog, limits={"memory": "64Mi"}))
    assert await next_exit(exits) == ("hog", "hog-uid", 137, "OOMKilled")


async def test_requests_are_recorded_in_the_cgroup(
    base_image: str, tmp_path: Path, exits: Exits, agent_name: str
) -> None:
    pods = runner(agent_name, tmp_path, exits)
    read_requests = (  # cgroup v1 (these machines), else v2
        "cat /sys/fs/cgroup/cpu/cpu.shares 2>/dev/null || echo weight $(cat /sys/fs/cgroup/cpu.weight); "
        "cat /sys/fs/cgroup/memory/memory.soft_limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.low"
    )
    await pods.launch(pod("requests", base_image, read_requests, requests={"cpu": "250m", "memory": "32Mi"}))
    assert (await next_exit(exits))[2:] == (0, "Completed")
    cpu, memory = output(tmp_path, "requests").split("\n")[:2]
    assert cpu in ("256", "weight 10")  # 250m as the kubelet's shares; podman's weight of 256 shares on v2
    assert int(memory) == 32 * 2**20
    FIGURES["cgroup requests inside vs pod requests"] = f"cpu.shares {cpu}, soft limit {memory} (250m, 32Mi)"


async def test_kill_9_is_failed_137_and_a_restarted_agent_adopts_what_it_left(
    base_image: str, tmp_path: Path, exits: Exits, agent_name: str
) -> None:
    first = runner(agent_name, tmp_path, exits)
    sleeper, orphan = pod("sleeper", base_image, "sleep 600"), pod("orphan", base_image, "sleep 600")
    began = time.monotonic()
    await first.launch(sleeper)
    FIGURES["container pod: launch to running (podman run returned)"] = f"{time.monotonic() - began:.2f} s"
    await first.launch(orphan)
    container = f"hyperjob-{agent_name}-sleeper"
    started = (inspect(container, "{{.Id}}"), inspect(container, "{{.State.StartedAt}}"))
    await first.close()  # the agent stops (or dies): its containers keep running

    second = runner(agent_name, tmp_path, exits)
    adopted = await second.recover({"sleeper": running_pod(sleeper)})  # the orphan's pod is gone
    assert list(adopted) == ["sleeper"] and adopted["sleeper"] == sleeper
    assert containers_of(agent_name) == [container]  # the orphan is removed, the sleeper kept
    assert (inspect(container, "{{.Id}}"), inspect(container, "{{.State.StartedAt}}")) == started  # not restarted

    os.kill(int(inspect(container, "{{.State.Pid}}")), 9)
    assert await next_exit(exits) == ("sleeper", "sleeper-uid", 137, "Error")
    assert containers_of(agent_name) == []


async def test_a_frozen_pod_stands_still_and_a_thawed_one_runs_on_where_it_stood(
    base_image: str, tmp_path: Path, exits: Exits, agent_name: str
) -> None:
    """Self-fencing's freeze in container mode (issue 33): ``podman pause`` (the cgroup freezer)
    stops every process inside without ending it, ``unpause`` lets it run on; a counter it writes
    stands still while frozen and goes on from where it stood."""
    pods = runner(agent_name, tmp_path, exits)
    counter = "i=0; while :; do i=$((i+1)); echo tick $i; sleep 0.1; done"
    await pods.launch(pod("counter", base_image, counter))
    await asyncio.wait_for(said(tmp_path, "counter", "tick 3"), 60)
    container = f"hyperjob-{agent_name}-counter"
    assert await pods.freeze("counter")
    assert inspect(container, "{{.State.Status}}") == "paused"
    frozen_at = output(tmp_path, "counter")
    await asyncio.sleep(1.0)  # ten ticks' time: none is written
    assert output(tmp_path, "counter") == frozen_at
    last = int(frozen_at.split()[-1])
    await pods.thaw("counter")
    assert inspect(container, "{{.State.Status}}") == "running"
    await asyncio.wait_for(said(tmp_path, "counter", f"tick {last + 3}\n"), 60)
    assert f"tick {last + 1}\n" in output(tmp_path, "counter")  # on from where it stood, not again from 1
    await pods.kill("counter")
    assert containers_of(agent_name) == [] and exits.empty()


async def test_the_image_is_pulled_as_its_pull_policy_says_and_a_failed_pull_names_why(
    base_image: str, tmp_path: Path, exits: Exits, agent_name: str
) -> None:
    """``IfNotPresent`` runs the node's own image without asking a registry; ``Never`` with no such
    image fails the pod ``ErrImageNeverPull``; a pull that fails (no registry answers at
    ``localhost``, here and anywhere) fails it ``ErrImagePull``, under ``IfNotPresent`` for an
    absent image and under ``Always`` even for one the node has, as the kubelet does."""
    pods = runner(agent_name, tmp_path, exits)
    absent = "localhost/hyperjob-absent:1"
    await pods.launch(pod("local", base_image, "exit 0", image_pull_policy="IfNotPresent"))
    assert (await next_exit(exits))[2:] == (0, "Completed")
    cases = [
        ("never", absent, "Never", "ErrImageNeverPull"),
        ("missing", absent, "IfNotPresent", "ErrImagePull"),
        ("always", base_image, "Always", "ErrImagePull"),
    ]
    for name, image, policy, reason in cases:
        await pods.launch(pod(name, image, "exit 0", image_pull_policy=policy))
        assert await next_exit(exits) == (name, f"{name}-uid", 125, reason)
    assert containers_of(agent_name) == []


async def test_a_deleted_pod_is_stopped_unreported_and_leaves_no_container(
    base_image: str, tmp_path: Path, exits: Exits, agent_name: str
) -> None:
    pods = runner(agent_name, tmp_path, exits)
    polite = "trap 'echo got TERM; exit 0' TERM; echo up; while :; do sleep 0.1; done"
    await pods.launch(pod("polite", base_image, polite, grace_period=30.0))
    # It ignores SIGTERM: the grace period (1 s) ends in SIGKILL.
    await pods.launch(pod("stubborn", base_image, "trap '' TERM; sleep 600 & wait", grace_period=1.0))
    await asyncio.wait_for(said(tmp_path, "polite", "up"), 60)  # its trap is set: SIGTERM is not missed
    assert sorted(containers_of(agent_name)) == [f"hyperjob-{agent_name}-polite", f"hyperjob-{agent_name}-stubborn"]
    await asyncio.gather(pods.kill("polite"), pods.kill("stubborn"))
    assert containers_of(agent_name) == []
    assert "got TERM" in output(tmp_path, "polite")  # SIGTERM first, as the grace period promises
    await asyncio.sleep(0)  # a watcher that would report has had its turn
    assert exits.empty(), json.dumps(exits.get_nowait())


async def test_a_pod_reads_its_host_path_read_only_and_its_empty_dir_goes_with_it(
    base_image: str, tmp_path: Path, exits: Exits, agent_name: str
) -> None:
    host = tmp_path / "host"
    host.mkdir()
    (host / "greeting.txt").write_text("hello from the host\n")
    mounts = [
        events.PodMount(volume="data", mount_path="/data", source="hostPath", host_path=str(host), read_only=True),
        events.PodMount(volume="scratch", mount_path="/scratch"),
    ]
    script = (
        "cat /data/greeting.txt; touch /data/written 2>/dev/null || echo data is read-only; "
        "echo kept > /scratch/note; echo ready; sleep 600"
    )
    pods = runner(agent_name, tmp_path, exits)
    await pods.launch(pod("mounts", base_image, script, mounts=mounts))
    await asyncio.wait_for(said(tmp_path, "mounts", "ready"), 60)
    said_text = output(tmp_path, "mounts")
    assert "hello from the host" in said_text and "data is read-only" in said_text
    assert not (host / "written").exists()
    volumes = tmp_path / CLUSTER / "mounts" / "volumes"
    assert (volumes / "mounts-uid" / "scratch" / "note").read_text() == "kept\n"  # written inside, seen here
    await pods.kill("mounts")
    assert not volumes.exists() and containers_of(agent_name) == []  # the emptyDir went with the pod
    assert (host / "greeting.txt").exists()  # a hostPath is the host's: left as it was


def test_under_uvloop_as_in_a_service_process_the_container_runs_until_killed(
    base_image: str, tmp_path: Path, agent_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Services run on uvloop (servicekit.process): containers whose podman uvloop had spawned
    # ended at once (`sleep` returning early), so the runner spawns podman itself.
    monkeypatch.setenv("CONTAINERS_CONF", str(podman_kit.CONTAINERS_CONF))

    async def scenario() -> tuple[str, str, int, str]:
        exits: Exits = asyncio.Queue()
        pods = runner(agent_name, tmp_path, exits)
        await pods.launch(pod("held", base_image, "sleep 600"))
        pid = int(inspect(f"hyperjob-{agent_name}-held", "{{.State.Pid}}"))
        assert pid > 0, "the container is not running"
        os.kill(pid, 9)
        return await next_exit(exits)

    loop = uvloop.new_event_loop()
    try:
        assert loop.run_until_complete(scenario()) == ("held", "held-uid", 137, "Error")
    finally:
        loop.close()
        for name in containers_of(agent_name):
            podman_kit.podman("rm", "--force", "--time", "0", name, check=False)
