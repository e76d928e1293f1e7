"""A real distributed training across two clusters on separate hosts: the DDP example
(``examples/exec/hyperjob-ddp.yaml``, 4 ranks, gloo) with cluster-a's one node an agent in one
network namespace and cluster-b's in another (``netns_hosts``, routed: the hosts reach each other
through the root namespace, as a fleet's hosts do over their network), its pods processes (exec
mode) or podman containers of the torch image on the host's network (container mode, as
``test_ddp_containers``; no container is left once the job is done). Each agent reports
its host's address (``--node-address``); every rank's ``MASTER_ADDR``, the hostname of cluster-a's
worker-0, resolves to cluster-a's host address (127.0.0.1 on that host itself), so cluster-b's
ranks reach rank 0 across the link. Asserted as the one-host tests (``ddp_kit``): one world of
four ranks, every loss fallen, the same weights on every rank; the rank lines are read from each
host's own disk, where its agent keeps its pods' logs.

Needs root, iproute2 and torch in this venv (``make torch``), and podman for container mode;
about a minute each once the torch image is built."""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from hyperjob.client import podlogs
from tests.containers import ddp_kit, netns_hosts, podman_kit, torch_image
from tests.containers.netns_hosts import Host
from tests.containers.test_hosts import servers  # noqa: F401 - the fixture: NATS and Redis on every address
from tests.e2e.conftest import HYPERJOB, REPO, running_system

pytestmark = [
    pytest.mark.containers,
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("ip") is None, reason="network namespaces need root and iproute2 (ip)"
    ),
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed (make torch)"),
    pytest.mark.timeout(900),  # a cold machine builds the base and the torch image first
]

# Named for this run in container mode: container names are per agent and pod, and another run on
# this machine may use the example's names.
CLUSTERS: dict[str, tuple[str, str]] = {
    "process": ddp_kit.EXAMPLE_CLUSTERS,
    "podman": (f"hj27h{os.getpid()}-a", f"hj27h{os.getpid()}-b"),
}


def up_config(clusters: tuple[str, str]) -> dict[str, Any]:
    """The control plane's own agents serve no node: each cluster's one node is a host's."""
    return {"clusters": [{"name": c, "mode": "exec", "nodes": 0} for c in clusters], "schedulePeriod": "500ms"}


def start_agent(host: Host, cluster: str, ports: tuple[int, int], tmp_path: Path, runtime: str) -> Path:
    """The host's node-agent for ``cluster``, at the host's address, its pods run by ``runtime``
    (in exec mode, their python3 is this venv's, with torch). The directory its pods' logs are
    kept under."""
    home = tmp_path / host.node
    home.mkdir()
    bin_dir = Path(sys.executable).parent
    env = {
        **os.environ,
        "HYPERJOB_HOME": str(home),
        "NATS_URL": f"nats://{host.gateway}:{ports[0]}",
        "REDIS_URL": f"redis://{host.gateway}:{ports[1]}/0",
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "VIRTUAL_ENV": str(bin_dir.parent),
        "CONTAINERS_CONF": str(podman_kit.CONTAINERS_CONF),  # container mode: the agent passes it to podman
    }
    argv = [HYPERJOB, "agent", "--cluster", cluster, "--runtime", runtime, "--node-name", host.node]
    argv += ["--node-address", host.address, "--cpu", "4", "--memory", "8Gi", "--gpus", "0"]
    argv += ["--heartbeat-period", "1", "--telemetry-period", "1"]
    host.spawn(argv, env, tmp_path / f"{host.node}.log")
    return home / "pods" / cluster


def on_hosts(manifest: dict[str, Any], runtime: str, image: str, clusters: tuple[str, str]) -> dict[str, Any]:
    """The example as exec mode runs it (its script named absolutely: the agents' working directory
    is the test's) or in containers (``ddp_kit.in_containers``), each pod first saying the
    ``MASTER_ADDR`` it was given."""
    if runtime == "podman":
        manifest = ddp_kit.in_containers(manifest, image, clusters)
    [container] = manifest["spec"]["template"]["spec"]["tasks"][0]["template"]["spec"]["containers"]
    script = "/ddp/ddp_train.py" if runtime == "podman" else REPO / "examples" / "exec" / "ddp_train.py"
    container["command"] = ["sh", "-c", f'echo "master address $MASTER_ADDR"; exec python3 {script}']
    return manifest


def log_text(where: Path, pod: str) -> str:
    """What the pod printed, from the log its host's agent keeps (a process's output as it is, a
    container's in podman's k8s-file records)."""
    return podlogs.tail(where / pod / "log", 10_000)


def master_addresses(logs: dict[str, Path]) -> dict[str, str]:
    """The ``MASTER_ADDR`` each pod was given, as it said it."""
    found = {}
    for pod, where in logs.items():
        said = [line for line in log_text(where, pod).splitlines() if line.startswith("master address ")]
        found[pod] = said[-1].removeprefix("master address ") if said else ""
    return found


def rank_lines(logs: dict[str, Path]) -> dict[str, dict[str, str]]:
    """Each pod's last ``rank ...`` line, from the log its host's agent keeps (pod -> its cluster's logs)."""
    lines = {}
    for pod, where in logs.items():
        text = log_text(where, pod)
        matches = [m for line in text.splitlines() if (m := ddp_kit.RANK_LINE.match(line))]
        assert matches, f"{pod} printed no rank line; its log ends:\n{text[-2000:]}"
        lines[pod] = matches[-1].groupdict()
    return lines


@pytest.fixture(params=["process", "podman"])
def runtime(request: pytest.FixtureRequest) -> str:
    if request.param == "podman" and shutil.which("podman") is None:
        pytest.skip("podman is not installed (make container-tools)")
    return str(request.param)


def test_ddp_over_two_clusters_on_two_hosts_trains_one_model_on_every_rank(
    servers: tuple[int, int],  # noqa: F811
    runtime: str,
    tmp_path: Path,
) -> None:
    clusters = CLUSTERS[runtime]
    image = torch_image.ensure_or_skip() if runtime == "podman" else ""
    home = tmp_path / "control-plane"
    home.mkdir()
    (home / "up.yaml").write_text(yaml.safe_dump(up_config(clusters)))
    env = {"NATS_URL": f"nats://127.0.0.1:{servers[0]}", "REDIS_URL": f"redis://127.0.0.1:{servers[1]}/0"}
    try:
        with (
            netns_hosts.hosts(2, f"hj{os.getpid() % 100000}d", routed=True) as hosts,
            running_system(home, 2, "--config", str(home / "up.yaml"), "--no-dashboard", env=env) as cli,
        ):
            logs = {
                cluster: start_agent(host, cluster, servers, tmp_path, runtime)
                for host, cluster in zip(hosts, clusters, strict=True)
            }
            nodes = {host.node for host in hosts}
            cli.wait_for("both hosts' nodes", lambda: nodes <= {n["name"] for n in cli.json("get", "nodes")})
            manifest = on_hosts(ddp_kit.example(), runtime, image, clusters)
            hyperjob = ddp_kit.run_to_the_end(cli, ddp_kit.write(manifest, tmp_path))
            pods = {p["name"]: p.get("node") for p in cli.json("get", "pods") if p["name"] in ddp_kit.PODS}
            if runtime == "podman":
                cli.wait_for("every container to be removed", lambda: not podman_kit.containers_of_clusters(clusters))
    finally:
        for name in podman_kit.containers_of_clusters(clusters) if runtime == "podman" else ():
            podman_kit.podman("rm", "--force", name, check=False)  # whatever happened: nothing of this run stays
    pod_logs = {pod: logs[clusters[i]] for pod, i in ddp_kit.PODS.items()}
    lines, masters = rank_lines(pod_logs), master_addresses(pod_logs)
    print(
        "\n".join(
            f"{pod} on {pods.get(pod)}, MASTER_ADDR {masters[pod]}: {line}" for pod, line in sorted(lines.items())
        )
    )
    # Rank 0 runs on cluster-a's host: its peers there reach it on loopback, cluster-b's at that host's address.
    assert masters == {pod: "127.0.0.1" if i == 0 else hosts[0].address for pod, i in ddp_kit.PODS.items()}
    # Each cluster's pods ran on its own host, and the world spanned both.
    assert {pod: pods.get(pod) for pod in ddp_kit.PODS} == {pod: hosts[i].node for pod, i in ddp_kit.PODS.items()}
    ddp_kit.assert_one_model_trained(hyperjob, lines, clusters)
