"""What ``hyperjob up`` starts: the clusters of the simulated fleet, and where state lives.

Default: ``cluster-a`` and ``cluster-b``, 4 nodes × 8 GPUs each. A config file (YAML) may say
otherwise; unknown fields are rejected with the field path.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal

import msgspec
import yaml

from hyperjob import fleetcore
from hyperjob.client import ClientError
from hyperjob.events.access import with_credentials

DEFAULT_HOME = ".hyperjob"


class ClusterConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    name: str
    labels: dict[str, str] = {}
    nodes: int = 4
    allocatable: dict[str, str | int | float] = msgspec.field(
        default_factory=lambda: {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8", "pods": "110"}
    )
    node_labels: dict[str, str] = msgspec.field(default_factory=lambda: {"nvidia.com/gpu.product": "H100"})
    # Declared bandwidth (Gb/s) to other clusters, e.g. {cluster-b: 400}.
    links: dict[str, float] = {}
    # Declared price per resource-hour, e.g. {nvidia.com/gpu: 2.5, cpu: 0.04, memory: 0.005}
    # (cpu per core, memory per GiB): splitPolicy.prefer: cost chooses the cheapest plan.
    prices: dict[str, Annotated[float, msgspec.Meta(ge=0)]] = {}
    # Data sets this cluster holds, e.g. [imagenet]: a HyperJob naming them in dataSets prefers it.
    data_sets: list[str] = []
    # Bandwidth (Gb/s) to where data sets it does not hold live, e.g. {imagenet: 100}: of clusters
    # holding as many of a HyperJob's dataSets, it prefers the better linked.
    data_links: dict[str, Annotated[float, msgspec.Meta(ge=0)]] = {}
    # Simulated pods without a hyperjob.io/sim-duration annotation succeed after this many seconds.
    pod_duration: str = "30s"
    # simulate: simulated pods and telemetry; exec: pods run their command as local processes;
    # container: pods run their image as OCI containers through podman (which CONTAINERS_CONF,
    # from `up`'s environment, configures).
    mode: Literal["simulate", "exec", "container"] = "simulate"


class UpConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel"):
    clusters: list[ClusterConfig] = msgspec.field(
        default_factory=lambda: [ClusterConfig(name="cluster-a"), ClusterConfig(name="cluster-b")]
    )
    schedule_period: str = "1s"
    # Seconds a service may keep work waiting on one of its consumers without acknowledging any,
    # before `hyperjob up` restarts it.
    liveness_timeout: float = 60.0
    # Seconds a cluster runs its children with no word from the fleet before its job-controller
    # stops their pods (the fleet lease, docs/reliability.md). The fleet moves a child after 30 s of
    # silence, so the lease may be at most 30 s less the margin (10 s) that stopping takes. It is
    # also how long a node-agent cut off from the bus runs its pods before it freezes them itself,
    # with ``selfFence``.
    fleet_lease: float = fleetcore.FLEET_LEASE
    # true (the default): a node-agent cut off from the bus longer than the lease freezes its pods
    # itself, so a cluster partitioned whole never runs a child the fleet moved; once back, it asks
    # its job-controller, which resumes those the fleet kept, and the others are killed
    # (docs/reliability.md "Fencing"). false: pods run on through any cut-off (a host whose pods
    # cannot be frozen, a rootless podman on cgroup v1, would have them killed instead).
    self_fence: bool = True

    def __post_init__(self) -> None:
        longest = fleetcore.CLUSTER_SILENCE_TIMEOUT - fleetcore.LEASE_MARGIN
        if not 0 < self.fleet_lease <= longest:
            raise ValueError(
                f"fleetLease must be more than 0 and at most {longest:g} s (the fleet moves a silent "
                f"cluster's children after {fleetcore.CLUSTER_SILENCE_TIMEOUT:g} s, "
                f"{fleetcore.LEASE_MARGIN:g} s of them the margin)"
            )


def load_config(path: str | None) -> UpConfig:
    if path is None:
        return UpConfig()
    with open(path, encoding="utf-8") as handle:
        raw = yaml.safe_load(handle) or {}
    try:
        return msgspec.convert(raw, UpConfig)
    except msgspec.ValidationError as exc:
        raise ClientError(f"{path}: {exc}") from None


class Endpoints(msgspec.Struct, frozen=True, kw_only=True):
    """Where a running system answers; ``hyperjob up`` writes it, the other commands read it."""

    nats_url: str
    redis_url: str
    pid: int = 0
    # The servers check credentials: each client connects as its user (credentials_file).
    secured: bool = False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """Killed but not yet reaped by its parent: signals still reach the pid, nothing runs."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False  # no /proc (not Linux): trust the signal
    return stat.rpartition(")")[2].split()[0] == "Z"


def home() -> Path:
    return Path(os.environ.get("HYPERJOB_HOME", DEFAULT_HOME)).resolve()


def endpoints_file() -> Path:
    return home() / "endpoints.json"


def credentials_file() -> Path:
    """Every identity's password for the servers ``hyperjob up`` starts (0600: the operator's, as a
    kubeconfig is)."""
    return home() / "credentials.json"


def identity() -> str:
    """Whom the CLI acts as: ``HYPERJOB_USER``, else the CLI's user that ``hyperjob up`` created."""
    return os.environ.get("HYPERJOB_USER", "cli")


def services_file() -> Path:
    """What ``hyperjob up`` supervises, with each service's state (``hyperjob get services``)."""
    return home() / "services.json"


def resolve_endpoints(as_user: str | None = None) -> Endpoints:
    """NATS_URL / REDIS_URL when set, else what ``hyperjob up`` recorded (with the credentials of
    ``as_user``, default ``identity()``, from ``credentials_file``), else a clear error."""
    nats_url, redis_url = os.environ.get("NATS_URL"), os.environ.get("REDIS_URL")
    if nats_url and redis_url:
        return Endpoints(nats_url=nats_url, redis_url=redis_url)
    recorded = _recorded(nats_url, redis_url)
    if not recorded.secured:
        return recorded
    user = as_user or identity()
    path = credentials_file()
    try:
        password = msgspec.json.decode(path.read_bytes(), type=_Passwords).passwords[user]
    except OSError as exc:
        raise ClientError(f"cannot read the credentials of this system ({path}): {exc.strerror}") from None
    except KeyError:
        raise ClientError(
            f"no user {user!r} in {path}: add one with `hyperjob user add {user}` (HYPERJOB_USER chooses the user)"
        ) from None
    return Endpoints(
        nats_url=nats_url or with_credentials(recorded.nats_url, user, password),
        redis_url=redis_url or with_credentials(recorded.redis_url, user, password),
        pid=recorded.pid,
        secured=True,
    )


class _Passwords(msgspec.Struct):
    """What the CLI reads of ``credentials_file`` (``testkit.auth.Auth`` writes it)."""

    passwords: dict[str, str]


def _recorded(nats_url: str | None, redis_url: str | None) -> Endpoints:
    path = endpoints_file()
    if not path.is_file():
        raise ClientError(
            f"no running system: start one with `hyperjob up` (looked for {path}), or set NATS_URL and REDIS_URL"
        )
    recorded = msgspec.json.decode(path.read_bytes(), type=Endpoints)
    if not nats_url and not redis_url and recorded.pid and not _alive(recorded.pid):
        raise ClientError(f"no running system: `hyperjob up` (pid {recorded.pid}) is gone; start it again")
    return Endpoints(
        nats_url=nats_url or recorded.nats_url,
        redis_url=redis_url or recorded.redis_url,
        pid=recorded.pid,
        secured=recorded.secured,
    )
