"""The pure parts of the node-agent's pod runtimes: the ``podman run`` arguments a pod gets (image,
command, env, working dir, files, cgroup limits, GPU devices), the GPU env of exec pods, and how a
container's end (``podman inspect``) becomes an exit code and a reason."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from hyperjob import api, events
from hyperjob import jobcore as jc
from hyperjob.services.node_agent import domain
from hyperjob.services.node_agent.containerpods import (
    LABEL_POD,
    LABEL_UID,
    exit_of,
    limit_args,
    request_args,
    run_args,
)
from hyperjob.services.node_agent.runners import gpu_assignment


def pod_start(**overrides: object) -> events.PodStart:
    fields: dict[str, object] = {
        "pod": "train-worker-0",
        "uid": "u-1",
        "node": "n0",
        "task": "worker",
        "image": "localhost/trainer:1",
        "command": ["python3", "-m", "train"],
        "args": ["--epochs", "3"],
        "env": {"MASTER_ADDR": "train-master-0.train", "WORLD_SIZE": "4"},
        **overrides,
    }
    return events.PodStart(**fields)  # type: ignore[arg-type]


def args_of(msg: events.PodStart, nvml_gpus: bool = False) -> list[str]:
    return run_args(
        msg,
        agent="node-agent-c1",
        env=domain.local_env(msg.env),
        files_root=Path("/pods/c1/p/files"),
        log_path=Path("/pods/c1/p/log"),
        grace=7,
        nvml_gpus=nvml_gpus,
        volumes_root=Path("/pods/c1/p/volumes/u-1"),
    )


def option_values(args: list[str], option: str) -> list[str]:
    return [args[i + 1] for i, arg in enumerate(args) if arg == option]


def test_run_args_carry_the_image_command_args_env_and_labels() -> None:
    args = args_of(pod_start(working_dir="/work"))
    image_at = args.index("localhost/trainer:1")
    assert args[:2] == ["run", "--detach"]
    assert args[image_at + 1 :] == ["--epochs", "3"]  # args after the image: the container's CMD
    assert json.loads(option_values(args, "--entrypoint")[0]) == ["python3", "-m", "train"]
    env = option_values(args, "--env")
    assert "WORLD_SIZE=4" in env and "MASTER_ADDR=127.0.0.1" in env  # pod hostnames map to this host
    assert option_values(args, "--workdir") == ["/work"]
    assert {f"{LABEL_POD}=train-worker-0", f"{LABEL_UID}=u-1"} <= set(option_values(args, "--label"))
    assert option_values(args, "--stop-timeout") == ["7"]
    assert option_values(args, "--log-opt") == ["path=/pods/c1/p/log"]


def test_without_a_command_the_image_entrypoint_stays() -> None:
    args = args_of(pod_start(command=[], args=[]))
    assert "--entrypoint" not in args and args[-1] == "localhost/trainer:1"
    assert "--workdir" not in args


def test_plugin_files_are_mounted_read_only_at_their_paths() -> None:
    args = args_of(pod_start(files={"/etc/volcano/worker.host": "a\nb\n"}))
    assert option_values(args, "--volume") == ["/pods/c1/p/files/etc/volcano/worker.host:/etc/volcano/worker.host:ro"]


def test_a_pod_without_an_image_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="^image:"):
        args_of(pod_start(image=""))


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        ({"cpu": "500m", "memory": "64Mi"}, ["--cpus", "0.5", "--memory", "67108864", "--memory-swap", "67108864"]),
        ({"cpu": 2}, ["--cpus", "2"]),
        ({"memory": "1Gi", "nvidia.com/gpu": "1"}, ["--memory", "1073741824", "--memory-swap", "1073741824"]),
        ({}, []),
    ],
)
def test_limits_become_cgroup_limits(limits: dict[str, str | int], expected: list[str]) -> None:
    assert limit_args(limits) == expected


@pytest.mark.parametrize(
    ("limits", "field"),
    [({"memory": "lots"}, "resources.limits.memory"), ({"cpu": "0"}, "resources.limits.cpu")],
)
def test_a_bad_limit_is_refused_naming_the_field(limits: dict[str, str], field: str) -> None:
    with pytest.raises(ValueError, match=f"^{field}:"):
        limit_args(limits)


def test_limits_reach_podman_run() -> None:
    args = args_of(pod_start(limits={"cpu": "1500m", "memory": "128Mi"}))
    assert option_values(args, "--cpus") == ["1.5"] and option_values(args, "--memory") == ["134217728"]


@pytest.mark.parametrize(
    ("requests", "expected"),
    [
        ({"cpu": "250m", "memory": "32Mi"}, ["--cpu-shares", "256", "--memory-reservation", "33554432"]),
        ({"cpu": 2}, ["--cpu-shares", "2048"]),
        ({"cpu": "1m"}, ["--cpu-shares", "2"]),  # the kubelet's floor
        ({"nvidia.com/gpu": "1"}, []),
        ({}, []),
    ],
    ids=["quarter-cpu-and-memory", "two-cpus", "a-millicore", "gpus-only", "none"],
)
def test_requests_are_recorded_as_the_kubelet_records_them(requests: dict[str, str | int], expected: list[str]) -> None:
    assert request_args(requests) == expected


@pytest.mark.parametrize(
    ("requests", "field"),
    [({"memory": "lots"}, "resources.requests.memory"), ({"cpu": "-1"}, "resources.requests.cpu")],
)
def test_a_bad_request_is_refused_naming_the_field(requests: dict[str, str], field: str) -> None:
    with pytest.raises(ValueError, match=f"^{field}:"):
        request_args(requests)


def test_requests_of_the_manifest_reach_podman_run() -> None:
    manifest = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "req"},
        "spec": {"tasks": [{"name": "w", "replicas": 1, "template": {"spec": {"containers": [{
            "name": "main", "image": "i", "resources": {"requests": {"cpu": "500m"}, "limits": {"memory": "64Mi"}},
        }]}}}]},
    }  # fmt: skip
    job = api.decode(manifest)
    assert isinstance(job, api.Job)
    record = jc.admit(job, {"default": "Open"}, 0.0)
    record, _ = jc.decide(record, jc.PodGroupAdmitted(job_version=record.version), 0.0)
    (pod,) = record.pods.values()
    start = msgspec.json.decode(msgspec.json.encode(pod_start(requests=pod.run.requests)), type=events.PodStart)
    args = args_of(start)
    # memory requests its limit, as Kubernetes defaults it; cpu is requested only.
    assert option_values(args, "--cpu-shares") == ["512"] and option_values(args, "--memory-reservation") == [
        "67108864"
    ]


# -- GPUs by device --------------------------------------------------------------------------


def test_an_exec_pod_sees_exactly_the_devices_of_its_binding() -> None:
    env, args = gpu_assignment((3, 5), "exec", nvml_gpus=True)
    assert env == {"CUDA_VISIBLE_DEVICES": "3,5", "NVIDIA_VISIBLE_DEVICES": "3,5"} and args == []


def test_a_container_pod_gets_its_devices_through_cdi_where_nvml_reports_gpus() -> None:
    env, args = gpu_assignment((0, 2), "container", nvml_gpus=True)
    assert args == ["--device", "nvidia.com/gpu=0", "--device", "nvidia.com/gpu=2"] and env == {}
    assert gpu_assignment((0, 2), "container", nvml_gpus=False) == ({}, [])


def test_a_pod_without_devices_gets_no_gpu_setting() -> None:
    assert gpu_assignment((), "exec", nvml_gpus=True) == ({}, [])
    assert gpu_assignment((), "container", nvml_gpus=True) == ({}, [])


def test_a_negative_device_index_is_refused() -> None:
    with pytest.raises(ValueError, match="^devices:"):
        gpu_assignment((-1,), "exec", nvml_gpus=True)


def test_devices_of_the_binding_reach_podman_run() -> None:
    args = args_of(pod_start(devices=(1,)), nvml_gpus=True)
    assert option_values(args, "--device") == ["nvidia.com/gpu=1"]
    assert not any(e.startswith("CUDA_VISIBLE_DEVICES=") for e in option_values(args, "--env"))


def test_devices_survive_the_pod_start_message() -> None:
    msg = pod_start(devices=(4, 6), limits={"memory": "1Gi"}, grace_period=3.0)
    decoded = msgspec.json.decode(msgspec.json.encode(msg), type=events.PodStart)
    assert decoded.devices == (4, 6) and decoded.grace_period == 3.0 and decoded.limits == {"memory": "1Gi"}


# -- how a container ended ---------------------------------------------------------------------

# Trimmed from `podman inspect` (podman 4.3) of real containers.
EXITED_3 = [{"Id": "a1", "State": {"Status": "exited", "Running": False, "ExitCode": 3, "OOMKilled": False}}]
KILLED_9 = [{"Id": "a2", "State": {"Status": "exited", "Running": False, "ExitCode": 137, "OOMKilled": False}}]
OOM = [{"Id": "a3", "State": {"Status": "exited", "Running": False, "ExitCode": 137, "OOMKilled": True}}]
DONE = [{"Id": "a4", "State": {"Status": "exited", "Running": False, "ExitCode": 0, "OOMKilled": False}}]


@pytest.mark.parametrize(
    ("inspected", "expected"),
    [(EXITED_3, (3, "Error")), (KILLED_9, (137, "Error")), (OOM, (137, "OOMKilled")), (DONE, (0, "Completed"))],
)
def test_exit_code_and_reason_from_podman_inspect(
    inspected: list[dict[str, object]], expected: tuple[int, str]
) -> None:
    assert exit_of(inspected) == expected


# The kernel's line for an OOM kill under cgroup v1 (dmesg on the development machine, podman 4.3
# with runc and cgroupfs: its inspect says OOMKilled false), shortened.
KERNEL_LOG = """[3146.9] python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0
[3146.9] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=libpod-a5,mems_allowed=0,\
oom_memcg=/libpod_parent/libpod-a5,task_memcg=/libpod_parent/libpod-a5,task=python3,pid=19808,uid=0
[3146.9] Memory cgroup out of memory: Killed process 19808 (python3) total-vm:538064kB
"""


def test_an_oom_kill_podman_missed_is_found_in_the_kernel_log() -> None:
    killed = [{"Id": "a5", "State": {"ExitCode": 137, "OOMKilled": False}}]
    assert exit_of(killed, KERNEL_LOG) == (137, "OOMKilled")
    assert exit_of([{**killed[0], "Id": "a6"}], KERNEL_LOG) == (137, "Error")  # another container's
    assert exit_of([{"Id": "a5", "State": {"ExitCode": 1}}], KERNEL_LOG) == (1, "Error")  # not killed by it


def test_an_oom_kill_is_a_failure_even_when_podman_says_zero() -> None:
    assert exit_of([{"State": {"ExitCode": 0, "OOMKilled": True}}]) == (137, "OOMKilled")


def test_an_oom_killed_pod_is_reported_failed_with_its_reason() -> None:
    pod = domain.RunningPod(
        pod="p", uid="u", job="j", node="n0", job_version=0, started_at=0, finishes_at=None, exit_code=0,
        restart_policy="Never",
    )  # fmt: skip
    pods = {"p": pod}
    [report] = domain.exited(pods, "p", "u", 137, now=1.0, reason="OOMKilled")
    assert (report.phase, report.exit_code, report.reason) == ("Failed", 137, "OOMKilled")
