"""The node-agent's one Settings struct (env ``NODE_AGENT_<FIELD>``), and the host env pods inherit."""

from __future__ import annotations

import os
import socket
from typing import Literal

import msgspec

from hyperjob import fleetcore
from hyperjob.hwprobe import FleetShape


class NodeSpec(msgspec.Struct, frozen=True, kw_only=True):
    """One node named explicitly, for fleets whose nodes differ (a scenario's clusters)."""

    name: str
    allocatable: dict[str, str | int | float]
    labels: dict[str, str] = {}
    taints: list[dict[str, str]] = []


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    cluster: str
    # simulate: pods "run" for their sim duration. exec: pods run their command as local processes.
    # container: pods run their image as OCI containers through podman (containerpods).
    mode: Literal["simulate", "exec", "container"] = "simulate"
    nats_url: str = "nats://127.0.0.1:4222"
    redis_url: str = "redis://127.0.0.1:6379/0"
    log_level: str = "INFO"
    # The nodes this agent serves: node_specs (each its own), else node_names, else
    # <node_prefix or "<cluster>-node">-<i> for i < nodes, all alike (allocatable, labels).
    node_specs: list[NodeSpec] = []
    nodes: int = 4
    node_prefix: str = ""
    node_names: list[str] = []
    allocatable: dict[str, str | int | float] = msgspec.field(
        default_factory=lambda: {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8", "pods": "110"}
    )
    labels: dict[str, str] = {}
    # The address the agent's nodes are reached at (``--node-address``): pods run on the host's
    # network, so another pod reaches one at its node's address. "" finds the host's own
    # (``host_address``).
    node_address: str = ""
    # A pod whose env names other pods' hostnames waits at most this long (seconds) for each to
    # be launched somewhere (``podaddr.<pod>``); a name still unknown then is 127.0.0.1.
    resolve_wait: float = 120.0
    # A pod without a hyperjob.io/sim-duration annotation succeeds after this (seconds or 30s/5m),
    # or runs until it is stopped ("never").
    pod_duration: str = "30s"
    heartbeat_period: float = 2.0
    # Seconds the agent runs its pods while cut off from the bus (no heartbeat acknowledged) before
    # it freezes them itself (self-fencing, ``fencing``), and how long, once back, it waits for its
    # job-controller to resume them: the fleet lease, as `hyperjob up` grants it (inf: never, as in
    # the simulator, whose clusters cut off are frozen whole).
    fleet_lease: float = fleetcore.FLEET_LEASE
    # Whether it fences itself at all (freezes, then resumes or kills; docs/reliability.md). Off
    # only where pods cannot be frozen (a rootless podman on cgroup v1): they would be killed.
    self_fence: bool = True
    # Telemetry: "auto" is simulated in simulate mode and the real readers in exec mode.
    telemetry: Literal["auto", "simulated", "real", "off"] = "auto"
    telemetry_period: float = 10.0
    # Simulated telemetry is sent on change (load, faults); a node nothing touched is read again
    # at least this often (seconds).
    telemetry_refresh: float = 300.0
    fleet_shape: FleetShape = FleetShape()  # gpus_per_node follows allocatable's nvidia.com/gpu
    faults: list[str] = []  # injected into the simulated fleet: KIND@NODE[,key=value...]
    seed: int = 0
    xid_hold: float = 300.0
    infiniband_sysfs: str = "/sys/class/infiniband"
    # exec mode: pod sandboxes and logs under <work_dir>/<cluster>/<pod>/, the processes' cwd, and
    # how long a killed pod gets between SIGTERM and SIGKILL.
    work_dir: str = ".hyperjob/pods"
    pod_working_dir: str = ""
    kill_grace: float = 10.0
    # container mode: the podman binary, and the OCI runtime podman is told to use ("" for podman's
    # own choice; runc where crun cannot run, as on cgroup-hybrid hosts). podman's other settings
    # come from containers.conf, or the file CONTAINERS_CONF names in the agent's environment.
    podman: str = "podman"
    oci_runtime: str = "runc"

    def __post_init__(self) -> None:
        # A beat must have several chances to get through within the lease, or a healthy agent fences.
        if not 0 < 4 * self.heartbeat_period <= self.fleet_lease:
            raise ValueError(
                f"fleet_lease ({self.fleet_lease:g} s) must be at least 4 heartbeat periods "
                f"(heartbeat_period {self.heartbeat_period:g} s, more than 0)"
            )


# What a pod's process inherits from the agent's environment (then the pod's env wins).
INHERITED = ("PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "TZ", "PYTHONPATH", "VIRTUAL_ENV", "SYSTEMROOT")


def host_env() -> dict[str, str]:
    """The part of the agent's environment every pod process starts from."""
    return {name: os.environ[name] for name in INHERITED if name in os.environ}


def host_address() -> str:
    """This host's address as its peers reach it: what its hostname resolves to, unless that is
    loopback (as many /etc/hosts say), then the source address of a route outward; 127.0.0.1
    when there is neither (a machine on its own, where every pod is a local peer)."""
    try:
        named = socket.gethostbyname(socket.gethostname())
    except OSError:
        named = ""
    if named and not named.startswith("127."):
        return named
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # TEST-NET-1: a UDP connect sends nothing, only routes
            return str(probe.getsockname()[0])
        except OSError:
            return "127.0.0.1"
