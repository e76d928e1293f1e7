"""Pods that really run: two local clusters of exec-mode node-agents (``examples/exec/up-exec.yaml``);
a HyperJob's workers in both clusters form one job (a ring all-reduce over TCP, pure Python), their
output is shown by ``hyperjob logs`` and the real ``kubectl logs`` (the apiserver's ``pods/log``),
and deleting a HyperJob kills its running processes.

The same system has a third, simulated cluster for node health: faults injected with
``hyperjob agent fault`` keep GPU pods off a node with a failed GPU, and a node that stops
heartbeating loses its pods, which the job's policies start again elsewhere."""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from .conftest import REPO, Cli, running_system

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

EXAMPLE = REPO / "examples" / "exec" / "hyperjob-ring-allreduce.yaml"
CONFIG = REPO / "examples" / "exec" / "up-exec.yaml"
SIM = "cluster-s"
KUBECTL = Path("/usr/bin/kubectl")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def exec_cli(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cli]:
    home = tmp_path_factory.mktemp("hyperjob-exec-home")
    config = yaml.safe_load(CONFIG.read_text())
    config["clusters"].append(
        {
            "name": SIM,
            "nodes": 3,
            "podDuration": "15s",
            "allocatable": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "2", "pods": "110"},
        }
    )
    (home / "up.yaml").write_text(yaml.safe_dump(config))
    # Faster fault detection than the defaults (every service inherits these).
    faster = {
        "CLUSTER_SCHEDULER_NODE_TIMEOUT": "6",
        "CLUSTER_SCHEDULER_HEALTH_PERIOD": "1",
        "NODE_AGENT_TELEMETRY_PERIOD": "1",
    }
    with running_system(home, 3, "--config", str(home / "up.yaml"), env=faster) as cli:
        yield cli


def manifest(tmp_path: Path, name: str, port: int, command: str | None = None) -> Path:
    text = (
        EXAMPLE.read_text().replace("name: ring-allreduce", f"name: {name}").replace("--port=29517", f"--port={port}")
    )
    if command is not None:
        text = text.replace("command: [python3, examples/exec/ring_allreduce.py]", f"command: {command}")
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


def finished(cli: Cli, name: str) -> dict | None:
    hyperjob = cli.json("get", "hyperjobs", name)
    return hyperjob if hyperjob["phase"] in ("Completed", "Failed") else None


def test_workers_in_two_clusters_train_as_one_job_and_their_logs_show_it(exec_cli: Cli, tmp_path: Path) -> None:
    exec_cli.run("apply", "-f", str(manifest(tmp_path, "ring", free_port())))
    hyperjob = exec_cli.wait_for("the HyperJob to finish", lambda: finished(exec_cli, "ring"), timeout=120)
    assert hyperjob["phase"] == "Completed"
    assert hyperjob["status"]["placement"] == {"cluster-a": 2, "cluster-b": 2}

    lines = {}
    for child, cluster in (("ring-job-0", "cluster-a"), ("ring-job-1", "cluster-b")):
        for index in (0, 1):
            output = exec_cli.run("logs", f"{child}-worker-{index}").stdout
            [line] = [line for line in output.splitlines() if line.startswith("rank ")]
            lines[line.split()[1]] = (cluster, line)
    assert sorted(lines) == ["0/4", "1/4", "2/4", "3/4"]  # one world of four ranks across both clusters
    assert {cluster for cluster, _ in lines.values()} == {"cluster-a", "cluster-b"}
    assert all(f"cluster {cluster}:" in line and line.endswith("OK") for cluster, line in lines.values())
    assert len({line.split("w=")[1] for _, line in lines.values()}) == 1  # every rank ended with the same weights
    if KUBECTL.exists():
        _kubectl_logs_agree(exec_cli, "ring-job-1-worker-1")


def test_a_failing_command_fails_the_hyperjob_with_its_exit_code(exec_cli: Cli, tmp_path: Path) -> None:
    command = "[python3, -c, \"import sys; print('bad input'); sys.exit(7)\"]"
    exec_cli.run("apply", "-f", str(manifest(tmp_path, "failing", free_port(), command)))
    hyperjob = exec_cli.wait_for("the HyperJob to finish", lambda: finished(exec_cli, "failing"), timeout=120)
    assert hyperjob["phase"] == "Failed"
    # The first worker to fail fails the job, which may kill the others before they print.
    outputs = [
        exec_cli.run("logs", f"failing-job-{child}-worker-{index}").stdout for child in (0, 1) for index in (0, 1)
    ]
    assert any("bad input" in output for output in outputs)


def test_deleting_a_hyperjob_kills_its_running_processes(exec_cli: Cli, tmp_path: Path) -> None:
    command = "[python3, -c, \"import time; print('working', flush=True); time.sleep(600)\"]"
    exec_cli.run("apply", "-f", str(manifest(tmp_path, "sleepy", free_port(), command)))
    home = Path(exec_cli.env["HYPERJOB_HOME"])
    pids = exec_cli.wait_for("all four processes to start", lambda: _pids(home, "sleepy"), timeout=120)
    exec_cli.wait_for("them to run", lambda: "working" in exec_cli.run("logs", "sleepy-job-1-worker-1").stdout)
    following = _follow_logs(exec_cli, "sleepy-job-1-worker-1")
    exec_cli.run("delete", "hyperjob", "sleepy", "--timeout", "120")
    exec_cli.wait_for("every process to be gone", lambda: not any(_alive(pid) for pid in pids), timeout=60)
    if following is not None:  # kubectl logs -f ends once its pod is gone, having shown its output
        out, _ = following.communicate(timeout=60)
        assert following.returncode == 0 and "working" in out.splitlines()


def _kubectl_logs_agree(cli: Cli, pod: str) -> None:
    """``kubectl logs`` (the apiserver's ``pods/log``) shows what ``hyperjob logs`` shows, and
    refuses, saying why, what it cannot answer."""
    output = cli.run("logs", pod).stdout
    assert kubectl(cli, "logs", pod).stdout == output
    assert kubectl(cli, "logs", pod, "--tail=1").stdout == output.splitlines(keepends=True)[-1]
    assert kubectl(cli, "logs", pod, "-c", "worker").stdout == output
    for args, message in (
        (("-c", "nope"), "container nope is not valid for pod"),
        (("--previous",), "previous: not served"),
        (("-n", "team-b"), "not found"),  # another namespace's pod of that name: none
    ):
        refused = kubectl(cli, "logs", pod, *args, check=False)
        assert refused.returncode != 0 and message in refused.stderr, refused.stderr


def kubectl(cli: Cli, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {**cli.env, "KUBECONFIG": str(Path(cli.env["HYPERJOB_HOME"]) / "kubeconfig")}
    done = subprocess.run([str(KUBECTL), *args], env=env, capture_output=True, text=True, timeout=120)
    if check and done.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed: {done.stderr}")
    return done


def _follow_logs(cli: Cli, pod: str) -> subprocess.Popen[str] | None:
    if not KUBECTL.exists():
        return None
    env = {**cli.env, "KUBECONFIG": str(Path(cli.env["HYPERJOB_HOME"]) / "kubeconfig")}
    return subprocess.Popen([str(KUBECTL), "logs", "-f", pod], env=env, stdout=subprocess.PIPE, text=True)


def _pids(home: Path, name: str) -> list[int] | None:
    files = sorted(home.glob(f"pods/*/{name}-job-*-worker-*/pid"))
    return [int(f.read_text()) for f in files] if len(files) == 4 else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead too: it only waits for its parent (the agent) to reap it.
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(") ", 1)[-1].startswith("Z"))


SIM_JOB = """
apiVersion: batch.volcano.sh/v1alpha1
kind: HyperJob
metadata: {name: healthy-only}
spec:
  template:
    apiVersion: batch.volcano.sh/v1alpha1
    kind: Job
    spec:
      minAvailable: 4
      tasks:
      - name: trainer
        replicas: 4
        template:
          spec:
            containers:
            - name: trainer
              resources: {requests: {cpu: "1", memory: 1Gi, nvidia.com/gpu: "1"}}
            restartPolicy: OnFailure
  splitPolicy:
    strategy: ByCluster
    clusters:
    - {name: cluster-s, replicas: 4}
"""


def sim_gpus_free(cli: Cli) -> float:
    return float(cli.json("get", "clusters", SIM)["free"].get("nvidia.com/gpu", -1))


def pod_nodes(cli: Cli, job: str) -> dict[str, str]:
    return {p["name"]: p["node"] for p in cli.json("get", "pods") if p["name"].startswith(f"{job}-") and p.get("node")}


def test_sick_gpus_keep_pods_away_and_a_silent_nodes_pods_start_again_elsewhere(exec_cli: Cli, tmp_path: Path) -> None:
    cli, sick, lost = exec_cli, f"{SIM}-node-2", f"{SIM}-node-0"
    cli.run("agent", "--cluster", SIM, "fault", f"gpu-xid@{sick},gpu=1,xid=79")
    cli.wait_for("the sick node's GPUs to leave the free capacity", lambda: sim_gpus_free(cli) == 4.0, timeout=60)
    (tmp_path / "job.yaml").write_text(SIM_JOB)
    cli.run("apply", "-f", str(tmp_path / "job.yaml"))
    placed = cli.wait_for(
        "all four pods to be placed",
        lambda: (n := pod_nodes(cli, "healthy-only-job-0")) and len(n) == 4 and n,
        timeout=60,
    )
    assert set(placed.values()) == {f"{SIM}-node-0", f"{SIM}-node-1"}  # never the node with the failed GPU
    if KUBECTL.exists():  # a simulated pod runs no process: no log, and kubectl is told why
        simulated = kubectl(cli, "logs", next(iter(placed)), check=False)
        assert simulated.returncode != 0 and "simulated pods have none" in simulated.stderr, simulated.stderr

    cli.run("agent", "--cluster", SIM, "fault", f"clear@{sick}")
    cli.run("agent", "--cluster", SIM, "fault", f"silent@{lost}")
    moved = cli.wait_for(
        "the lost node's pods to start on the recovered node",
        lambda: (n := pod_nodes(cli, "healthy-only-job-0")) and sum(node == sick for node in n.values()) == 2 and n,
        timeout=180,  # the node timeout, the eviction, the job's restart and a new gang: 74 s alone on 2 cores
    )
    assert lost not in moved.values()
    hyperjob = cli.wait_for("the HyperJob to finish", lambda: finished(cli, "healthy-only"), timeout=120)
    assert hyperjob["phase"] == "Completed"
