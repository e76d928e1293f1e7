"""Several hosts: node-agents in network namespaces of their own (``netns_hosts``), each with its
own identity (``--node-name``) and its own disk (``HYPERJOB_HOME``), reach NATS and Redis over
their link to the root namespace, where ``hyperjob up`` runs the control plane on servers this
test starts on every address (``NATS_URL``/``REDIS_URL``: up uses given servers as they are).

Taking a host's link down is a real partition: its node is lost after the node timeout and its
pod starts again on the other host, as the job's policy says; while cut off, the host's own copy
of the pod keeps running (it cannot hear of the eviction). With the link back, the stale copy is
stopped, and the pod runs exactly once, where it was recreated."""

from __future__ import annotations

import os
import shutil
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from hyperjob.testkit.servers import NatsServer, RedisServer
from tests.containers import netns_hosts, observe
from tests.containers.netns_hosts import Host
from tests.e2e.conftest import HYPERJOB, Cli, running_system

pytestmark = [
    pytest.mark.containers,
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("ip") is None, reason="network namespaces need root and iproute2 (ip)"
    ),
]

CLUSTER = "cluster-a"
NODE_TIMEOUT = 6  # seconds without a heartbeat before the cluster-scheduler declares a node lost
# The control plane's own agent serves no node: every node is a namespace's.
UP_CONFIG = f"""
clusters:
- name: {CLUSTER}
  mode: exec
  nodes: 0
schedulePeriod: 500ms
"""


def job(token: str) -> str:
    """One long-running pod that may run on either host; OnFailure: a lost pod is started again."""
    command = f"[python3, -c, \"import time; print('up', flush=True); time.sleep(3600)\", {token}]"
    return f"""
apiVersion: batch.volcano.sh/v1alpha1
kind: HyperJob
metadata: {{name: roaming}}
spec:
  template:
    apiVersion: batch.volcano.sh/v1alpha1
    kind: Job
    spec:
      minAvailable: 1
      tasks:
      - name: worker
        replicas: 1
        template:
          spec:
            containers:
            - name: worker
              image: python:3.11-slim
              command: {command}
              resources: {{requests: {{cpu: "1", memory: 256Mi}}}}
            restartPolicy: OnFailure
  splitPolicy:
    strategy: ByCluster
    clusters:
    - {{name: {CLUSTER}, replicas: 1}}
"""


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[int, int]]:
    """NATS and Redis listening on every address (loopback for up, each link's root end for the
    hosts); their ports."""
    nats, redis = NatsServer(tmp_path / "nats"), RedisServer()
    nats.host = redis.host = "0.0.0.0"  # noqa: S104 - the hosts reach them over their veth links
    try:
        nats.start()
        redis.start()
        assert nats.port is not None and redis.port is not None
        yield nats.port, redis.port
    finally:
        nats.stop()
        redis.stop()


def start_agent(host: Host, ports: tuple[int, int], tmp_path: Path) -> None:
    """The host's own node-agent: its node, its disk, the control plane at the link's root end."""
    home = tmp_path / host.node
    home.mkdir()
    env = {
        **os.environ,
        "HYPERJOB_HOME": str(home),
        "NATS_URL": f"nats://{host.gateway}:{ports[0]}",
        "REDIS_URL": f"redis://{host.gateway}:{ports[1]}/0",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    argv = [HYPERJOB, "agent", "--cluster", CLUSTER, "--exec", "--node-name", host.node]
    argv += ["--cpu", "4", "--memory", "8Gi", "--gpus", "0", "--heartbeat-period", "1", "--telemetry-period", "1"]
    host.spawn(argv, env, tmp_path / f"{host.node}.log")


def pod_node(cli: Cli) -> str | None:
    """The node the job's pod is Running on, if it is."""
    pods = [p for p in cli.json("get", "pods") if p["name"].startswith("roaming-job-0-worker-0")]
    running = [p for p in pods if p.get("phase") == "Running" and p.get("node")]
    return running[0]["node"] if len(running) == 1 else None


def copies(token: str, hosts: list[Host]) -> dict[str, int]:
    """How many live copies of the pod's process each host runs."""
    inodes = list(netns_hosts.processes_in(token).values())
    return {host.node: inodes.count(host.inode) for host in hosts}


def test_a_cut_host_loses_its_pod_to_the_other_and_stops_its_stale_copy_when_back(
    servers: tuple[int, int], tmp_path: Path
) -> None:
    token = f"hj27-roaming-{uuid.uuid4().hex[:8]}"
    home = tmp_path / "control-plane"
    home.mkdir()
    (home / "up.yaml").write_text(UP_CONFIG)
    env = {
        "NATS_URL": f"nats://127.0.0.1:{servers[0]}",
        "REDIS_URL": f"redis://127.0.0.1:{servers[1]}/0",
        "CLUSTER_SCHEDULER_NODE_TIMEOUT": str(NODE_TIMEOUT),
        "CLUSTER_SCHEDULER_HEALTH_PERIOD": "1",
    }
    with (
        netns_hosts.hosts(2, f"hj{os.getpid() % 100000}") as hosts,
        running_system(home, 1, "--config", str(home / "up.yaml"), "--no-dashboard", env=env) as cli,
    ):
        for host in hosts:
            start_agent(host, servers, tmp_path)
        nodes = {host.node: host for host in hosts}
        cli.wait_for("both hosts' nodes", lambda: set(nodes) <= {n["name"] for n in cli.json("get", "nodes")})

        (tmp_path / "job.yaml").write_text(job(token))
        cli.run("apply", "-f", str(tmp_path / "job.yaml"))
        first = cli.wait_for("the pod to run on a host", lambda: pod_node(cli), timeout=60)
        cut, other = nodes[first], next(h for h in hosts if h.node != first)
        cli.wait_for("its process on that host", lambda: copies(token, hosts) == {cut.node: 1, other.node: 0})

        cut.set_link(up=False)
        cut_at = time.monotonic()
        cli.wait_for("the pod to start again on the other host", lambda: pod_node(cli) == other.node, timeout=90)
        cli.wait_for("its process there", lambda: copies(token, hosts)[other.node] == 1, timeout=30)
        recreated_after = time.monotonic() - cut_at
        stale_while_cut = copies(token, hosts)[cut.node]  # the cut host cannot hear of the eviction

        cut.set_link(up=True)
        healed_at = time.monotonic()
        cli.wait_for("the stale copy to stop", lambda: copies(token, hosts) == {cut.node: 0, other.node: 1}, timeout=60)
        observe.FIGURES["hosts: link down, then back"] = {
            "node timeout s": NODE_TIMEOUT,
            "cut to running on the other host s": round(recreated_after, 1),
            "stale copies while cut": stale_while_cut,
            "heal to stale copy stopped s": round(time.monotonic() - healed_at, 1),
            "copies at the end": copies(token, hosts),
        }
        assert pod_node(cli) == other.node
        assert cli.json("get", "hyperjobs", "roaming")["phase"] == "Running"
