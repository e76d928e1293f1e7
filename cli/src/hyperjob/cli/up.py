"""``hyperjob up``: NATS JetStream and Redis on loopback, every service as its own process, and a
simulated node fleet per cluster. Ctrl-C, SIGTERM or ``hyperjob down`` stops everything cleanly,
services first.

Invariants:
- one ``up`` per ``HYPERJOB_HOME``: it holds an exclusive lock on ``<home>/up.lock`` (released by
  the kernel however ``up`` ends), and a second ``up`` refuses before touching anything;
- nothing outlives ``up``: every child (servers and services) is started with
  ``PR_SET_PDEATHSIG``, so even ``kill -9`` of ``up`` takes them down;
- authentication is on (ADR 0006): ``<home>/credentials.json`` (0600, kept across runs) holds a
  password per identity — each service instance, the operator, the CLI's user, the dashboard and
  people added with ``hyperjob user add``; nats-server gets one user per identity with its
  ``events.access`` permissions, redis-server an ACL file with its ``store.acl`` keys; the
  operator declares the streams before any service starts; every process gets URLs with its own
  credentials. Servers given by URL (``NATS_URL``/``REDIS_URL``) are used as they are;
- a service that exits unexpectedly is restarted with exponential back-off (1 s, 2 s, 4 s ... 60 s),
  each restart logged; so is nats-server or redis-server, on its port with its data;
- a service that stops making progress is restarted: its liveness is what JetStream says of its
  durable consumers (work waiting, nothing acknowledged for ``livenessTimeout`` seconds, judged
  only while both servers answer), and its own liveness file (``<logs>/<name>.alive``, rewritten
  while its loop, bus and consumers run: ``servicekit.liveness``);
- ``<home>/services.json`` says, for ``hyperjob get services``, each server's and service's
  state, restarts, pid and start time, and whether every cluster has registered (``ready``).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import msgspec

from hyperjob.client import Client
from hyperjob.events.services import BY_NAME, CLUSTER_SERVICES, FLEET_SERVICES
from hyperjob.servicekit import liveness as service_liveness
from hyperjob.testkit.auth import (
    APISERVER,
    CLI_USER,
    DASHBOARD,
    OPERATOR,
    Auth,
    Identity,
    make_certificates,
    system_identities,
    write_private,
)
from hyperjob.testkit.servers import NatsServer, RedisServer, ServerError, free_port
from hyperjob.testkit.servers import _die_with_parent as die_with_parent

from . import fleet_state
from .config import (
    ClusterConfig,
    Endpoints,
    UpConfig,
    credentials_file,
    endpoints_file,
    home,
    services_file,
)
from .kubeconfig import dump, kubeconfig_file, render, tls_dir
from .liveness import ConsumerProgress, Progress, consumer_progress, owners
from .streams import declare_streams, stream_replicas

MAX_BACKOFF = 60.0
LIVENESS_PERIOD = 5.0  # seconds between two looks at the consumers' progress


class UpError(Exception):
    """``up`` cannot start (another one runs in this home) or did not become ready."""


def lock_file() -> Path:
    return home() / "up.lock"


def make_private(data: Path) -> None:
    """The system's state is its owner's alone (ADR 0006): ``data`` and everything in it loses
    group and other rights (a home of an older ``up``: ``0755``, an AOF ``0644``), and what this
    process and its children (redis-server's AOF, nats-server's store, the logs) create from now
    on is ``0700`` / ``0600``."""
    os.umask(0o077)
    for path in [data, *data.rglob("*")]:
        with contextlib.suppress(FileNotFoundError):  # a server may remove a file meanwhile
            if not path.is_symlink():
                path.chmod(stat.S_IMODE(path.lstat().st_mode) & 0o700)


class HomeLock:
    """The exclusive lock of one ``HYPERJOB_HOME``; the file also says which ``up`` holds it."""

    def __init__(self) -> None:
        self.handle: IO[str] | None = None

    def acquire(self) -> None:
        home().mkdir(parents=True, exist_ok=True)
        handle = open(lock_file(), "a+")  # noqa: SIM115 - held (open) for as long as up runs
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "?"
            handle.close()
            raise UpError(
                f"another `hyperjob up` (pid {holder}) is running in {home()}: stop it with `hyperjob down`, "
                "or set HYPERJOB_HOME to start a second system"
            ) from None
        handle.truncate(0)
        handle.write(str(os.getpid()))
        handle.flush()
        self.handle = handle

    def release(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None


def holder_pid() -> int | None:
    """The pid of the ``up`` holding this home's lock, or None when no ``up`` runs here."""
    path = lock_file()
    if not path.is_file():
        return None
    with open(path) as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            text = handle.read().strip()
            return int(text) if text.isdigit() else None
        fcntl.flock(handle, fcntl.LOCK_UN)
    return None


def load_auth(config: UpConfig) -> Auth:
    """The system's credentials (``<home>/credentials.json``, 0600): kept from an earlier ``up``, with
    the identities of clusters new to this config added."""
    path = credentials_file()
    auth = Auth.load(path) if path.is_file() else Auth()
    changed = [auth.add(identity) for identity in system_identities(c.name for c in config.clusters)]
    if any(changed) or not path.is_file():
        auth.save(path)
    return auth


def grant(identity: Identity, *, people_only: bool = False) -> Auth:
    """Add ``identity`` to the running (or next) system of this home: saved with the credentials,
    and the servers' users re-read at once when ``up`` runs (nats-server reloads its config on
    SIGHUP, redis-server its ACL file on ``ACL LOAD``). ``people_only``: refuse to redefine an
    identity that is not a person's (a service's, the operator's)."""
    path = credentials_file()
    if not path.is_file():
        raise UpError(f"no credentials in {home()}: start the system once with `hyperjob up`")
    auth = Auth.load(path)
    known = auth.identity(identity.name)
    if people_only and known is not None and (known.role != "user" or known.name in (CLI_USER, DASHBOARD)):
        raise UpError(f"{identity.name!r} is the system's own identity ({known.role}): choose another name")
    if not auth.add(identity):
        return auth
    auth.save(path)
    nats, redis = NatsServer(home() / "nats", auth=auth), RedisServer(home() / "redis", auth=auth)
    nats.write_authorization()
    redis.write_acl()
    pid_file = home() / "nats" / "nats.pid"
    if holder_pid() is None or not endpoints_file().is_file():
        return auth
    recorded = msgspec.json.decode(endpoints_file().read_bytes(), type=Endpoints)
    redis.port = _port(recorded.redis_url)
    redis.reload()
    if pid_file.is_file():
        os.kill(int(pid_file.read_text().strip()), signal.SIGHUP)
        nats.port = _port(recorded.nats_url)
        deadline = time.monotonic() + 10
        while not nats.accepts(identity.name):  # the reload is asynchronous
            if time.monotonic() > deadline:
                raise UpError(f"nats-server did not take the new user {identity.name!r}; see {home() / 'nats'}")
            time.sleep(0.1)
    return auth


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


@dataclass
class ServiceProcess:
    name: str
    module: str
    env: dict[str, str]
    log_path: Path
    instance: str = ""  # its instance name: its NATS/Redis user, its durable consumers' prefix
    proc: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = None
    restarts: int = 0
    started_at: float = 0.0  # wall clock, for `get services`
    last_exit: int | None = None
    restart_at: float = 0.0  # monotonic: when the back-off of a dead service ends

    @property
    def liveness_file(self) -> Path:
        """The file the service rewrites while its loop, bus and consumers are well
        (``servicekit.liveness``)."""
        return self.log_path.with_suffix(".alive")

    def hung(self, timeout: float) -> bool:
        """Running, wrote its liveness file since it started, and has not rewritten it for
        ``timeout`` seconds: its loop or a consumer is stuck (a service still restoring has written
        nothing yet)."""
        if self.state != "running" or not self.liveness_file.exists():
            return False
        return not service_liveness.fresh(self.liveness_file, max(timeout, service_liveness.STALE_AFTER))

    def start(self) -> None:
        if self.log is not None:
            self.log.close()
        self.liveness_file.unlink(missing_ok=True)
        self.log = open(self.log_path, "ab")  # noqa: SIM115 - kept open for the child's lifetime
        self.proc = subprocess.Popen(
            [sys.executable, "-m", self.module],
            env={**self.env, service_liveness.ENV: str(self.liveness_file)},
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent if sys.platform == "linux" else None,
        )
        self.started_at = time.time()
        self.restart_at = 0.0

    @property
    def state(self) -> str:
        if self.proc is None:
            return "stopped"
        return "running" if self.proc.poll() is None else "backoff"

    def status(self) -> dict[str, object]:
        return {
            "name": self.name,
            "state": self.state,
            "pid": self.proc.pid if self.proc is not None else None,
            "restarts": self.restarts,
            "startedAt": self.started_at,
            "lastExit": self.last_exit,
            "log": str(self.log_path),
        }

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.log is not None:
            self.log.close()


@dataclass
class ServerState:
    """What ``up`` remembers of a server it supervises."""

    restarts: int = 0
    started_at: float = field(default_factory=time.time)
    last_exit: int | None = None
    restart_at: float = 0.0  # monotonic: when the back-off of a dead server ends


@dataclass
class System:
    """Everything ``up`` started; ``stop`` undoes it in reverse order."""

    config: UpConfig
    nats: NatsServer | None = None
    redis: RedisServer | None = None
    services: list[ServiceProcess] = field(default_factory=list)
    endpoints: Endpoints | None = None
    # The dashboard's port on 127.0.0.1: None for no dashboard, 0 for any free port.
    dashboard_port: int | None = None
    dashboard_url: str = ""
    # The apiserver's port on 127.0.0.1 (HTTPS, ``hyperjob kubeconfig``): None for none, 0 for any
    # free port. Only with servers of our own: its tokens are the identities' passwords.
    apiserver_port: int | None = None
    apiserver_url: str = ""
    auth: Auth | None = None  # the users of servers started here (None: given servers, used as they are)
    nats_state: ServerState = field(default_factory=lambda: ServerState())
    redis_state: ServerState = field(default_factory=lambda: ServerState())
    forgotten: list[str] = field(default_factory=list)  # nodes and clusters of an earlier fleet

    def start(self, nats_url: str | None = None, redis_url: str | None = None) -> Endpoints:
        """Start the servers (unless their URLs are given) and every service. Servers of our own
        run with authentication: every service, the CLI and the operator get their own user; the
        operator declares the streams before any service starts. Given servers are used as they are."""
        data = home()
        (data / "logs").mkdir(parents=True, exist_ok=True)
        make_private(data)
        if nats_url is None and redis_url is None:
            self.auth = load_auth(self.config)
        if nats_url is None:
            self.nats = NatsServer(data / "nats", auth=self.auth)
            nats_url = self.nats.start()
        if redis_url is None:
            self.redis = RedisServer(data / "redis", appendonly=True, auth=self.auth)
            redis_url = self.redis.start()
        self.endpoints = Endpoints(
            nats_url=nats_url, redis_url=redis_url, pid=os.getpid(), secured=self.auth is not None
        )
        endpoints_file().write_bytes(msgspec.json.encode(self.endpoints))
        if self.auth is not None:
            asyncio.run(declare_streams(self.nats_url(OPERATOR), stream_replicas()))
        if self.nats is not None:  # state of our own kept across `down`: the fleet may have changed
            fleet = fleet_state.fleet_nodes(self.config)
            self.forgotten = asyncio.run(fleet_state.forget_removed_nodes(self.nats_url(OPERATOR), fleet))
        for service in self._plan(data / "logs"):
            service.start()
            self.services.append(service)
        return self.endpoints

    def nats_url(self, identity: str) -> str:
        """The NATS URL with ``identity``'s credentials (the plain URL without authentication)."""
        assert self.endpoints is not None
        url = self.endpoints.nats_url
        return self.auth.nats_url(url, identity) if self.auth is not None else url

    def redis_url(self, identity: str) -> str:
        assert self.endpoints is not None
        url = self.endpoints.redis_url
        return self.auth.redis_url(url, identity) if self.auth is not None else url

    def _env(self, identity: str) -> dict[str, str]:
        """A process's environment: its own URLs (its own credentials)."""
        return {
            **os.environ,
            "NATS_URL": self.nats_url(identity),
            "REDIS_URL": self.redis_url(identity),
            "PYTHONUNBUFFERED": "1",
        }

    def _plan(self, logs: Path) -> list[ServiceProcess]:
        fleet = {"GLOBAL_SCHEDULER_FLEET_LEASE": str(self.config.fleet_lease)}  # the lease it grants
        plan = [
            ServiceProcess(s.package, s.module, {**self._env(s.name), **fleet}, logs / f"{s.package}.log", s.name)
            for s in FLEET_SERVICES
            if not s.edge
        ]
        for cluster in self.config.clusters:
            shared = {
                **_cluster_env(cluster, self.config.schedule_period),
                **_agent_lease_env(self.config.fleet_lease, self.config.self_fence),
            }
            plan += [
                ServiceProcess(
                    f"{s.package}@{cluster.name}",
                    s.module,
                    {**self._env(f"{s.name}-{cluster.name}"), **shared},
                    logs / f"{s.package}-{cluster.name}.log",
                    f"{s.name}-{cluster.name}",
                )
                for s in CLUSTER_SERVICES
            ]
        if self.apiserver_port is not None and self.auth is not None:
            plan.append(self._apiserver(logs))
        if self.dashboard_port is not None:
            port = _usable_port(self.dashboard_port)
            self.dashboard_url = f"http://127.0.0.1:{port}/"
            env = {
                **self._env(DASHBOARD),
                "DASHBOARD_HOST": "127.0.0.1",
                "DASHBOARD_PORT": str(port),
                "DASHBOARD_POD_LOGS": str(home() / "pods"),  # where the agents' pod logs are (NODE_AGENT_WORK_DIR)
            }
            plan.append(ServiceProcess("dashboard", "hyperjob.dashboard", env, logs / "dashboard.log"))
        return plan

    def _apiserver(self, logs: Path) -> ServiceProcess:
        """The apiserver on loopback over HTTPS (a CA and certificate made once in ``tls_dir``),
        and the CLI user's kubeconfig for it in ``$HYPERJOB_HOME/kubeconfig``."""
        assert self.auth is not None and self.apiserver_port is not None
        port = _usable_port(self.apiserver_port)
        self.apiserver_url = f"https://127.0.0.1:{port}"
        make_certificates(tls_dir())
        env = {
            **self._env(APISERVER),
            "APISERVER_HOST": "127.0.0.1",
            "APISERVER_PORT": str(port),
            "APISERVER_CREDENTIALS": str(credentials_file()),
            "APISERVER_TLS_CERT": str(tls_dir() / "server.pem"),
            "APISERVER_TLS_KEY": str(tls_dir() / "server-key.pem"),
            "APISERVER_POD_LOGS": str(home() / "pods"),  # where the agents' pod logs are (NODE_AGENT_WORK_DIR)
        }
        config = render(self.apiserver_url, CLI_USER, self.auth.password(CLI_USER), (tls_dir() / "ca.pem").read_bytes())
        write_private(kubeconfig_file(), dump(config).encode())
        apiserver = BY_NAME[APISERVER]
        return ServiceProcess(apiserver.package, apiserver.module, env, logs / "apiserver.log", APISERVER)

    def supervise_servers(self) -> list[str]:
        """Start again a server that died, on its port and with its data (JetStream's store, the
        AOF, the same users), after its back-off; a line for each event."""
        notes = []
        now = time.monotonic()
        for server, state in ((self.nats, self.nats_state), (self.redis, self.redis_state)):
            if server is None or server.running:
                continue
            if not state.restart_at:
                state.last_exit = server.returncode
                delay = min(2.0 ** min(state.restarts, 6), MAX_BACKOFF) / 2  # 0.5 s, 1 s, 2 s ...
                state.restart_at = now + delay
                notes.append(f"{server.name} exited ({state.last_exit}); restarting in {delay:g}s")
            elif now >= state.restart_at:
                state.restarts += 1
                state.restart_at = 0.0
                try:
                    server.restart()
                except ServerError as exc:
                    notes.append(f"{server.name} did not start again: {exc}")
                    continue
                state.started_at = time.time()
                notes.append(f"{server.name} restarted (restart {state.restarts})")
        return notes

    def supervise_liveness(self, progress: Progress) -> list[str]:
        """Restart a service whose durable consumers stopped making progress (``Progress``), or
        whose own liveness file went stale (its loop, bus or a consumer stopped): both for
        ``livenessTimeout`` seconds."""
        stalled = progress.stalled()
        notes = []
        for service in self.services:
            if service.instance and service.instance in stalled and service.state == "running":
                durables = ", ".join(sorted(stalled[service.instance]))
                notes.append(
                    f"{service.name} made no progress for {progress.timeout:g}s with work waiting ({durables}); "
                    "restarting it"
                )
                self._restart(service)
                progress.forget(stalled[service.instance])
            elif service.hung(progress.timeout):
                notes.append(f"{service.name} stopped rewriting {service.liveness_file.name}; restarting it")
                self._restart(service)
        return notes

    @staticmethod
    def _restart(service: ServiceProcess) -> None:
        service.stop(timeout=5.0)
        service.restarts += 1
        service.last_exit = service.proc.returncode if service.proc is not None else None
        service.start()

    def supervise_once(self) -> list[str]:
        """Restart services that died, each after its back-off; return a line for each event."""
        notes = []
        now = time.monotonic()
        for service in self.services:
            if service.proc is None or service.proc.poll() is None:
                continue
            if not service.restart_at:  # just noticed: wait 1 s, 2 s, 4 s ... before restarting
                service.last_exit = service.proc.returncode
                delay = min(2.0**service.restarts, MAX_BACKOFF)
                service.restart_at = now + delay
                notes.append(
                    f"{service.name} exited ({service.last_exit}); restarting in {delay:g}s (see {service.log_path})"
                )
            elif now >= service.restart_at:
                service.restarts += 1
                service.start()
                notes.append(f"{service.name} restarted (restart {service.restarts})")
        return notes

    def write_status(self, ready: bool) -> None:
        """What ``hyperjob get services`` shows (written atomically: a reader never sees half)."""
        status = {
            "pid": os.getpid(),
            "ready": ready,
            "nats": self.endpoints.nats_url if self.endpoints else "",
            "redis": self.endpoints.redis_url if self.endpoints else "",
            "dashboard": self.dashboard_url,
            "apiserver": self.apiserver_url,
            "services": [*self._server_status(), *(s.status() for s in self.services)],
        }
        partial = services_file().with_suffix(".tmp")
        partial.write_bytes(msgspec.json.encode(status))
        partial.replace(services_file())

    def _server_status(self) -> list[dict[str, object]]:
        """The servers ``up`` started, as ``get services`` lists the services."""
        rows: list[dict[str, object]] = []
        for server, state in ((self.nats, self.nats_state), (self.redis, self.redis_state)):
            if server is None:
                continue
            assert server.data_dir is not None
            rows.append(
                {
                    "name": server.name,
                    "state": "running" if server.running else "backoff",
                    "pid": server.pid,
                    "restarts": state.restarts,
                    "startedAt": state.started_at,
                    "lastExit": state.last_exit,
                    "log": str(server.data_dir / f"{server.name}.log"),
                }
            )
        return rows

    def consumers(self) -> list[ConsumerProgress] | None:
        """Every durable consumer's progress, read as the operator; None when NATS or Redis does
        not answer (liveness is judged only on what was received: a dependency's outage is no
        service's fault)."""

        async def probe() -> list[ConsumerProgress]:
            client = await Client.connect(self.nats_url(OPERATOR), self.redis_url(OPERATOR), timeout=2.0)
            try:
                await client.store.ping()
                return await consumer_progress(client.bus)
            finally:
                await client.close()

        try:
            return asyncio.run(probe())
        except Exception:  # either server not answering: judge nothing now
            return None

    def api_answers(self) -> bool:
        """Whether the apiserver, if this system runs one, takes connections on its port."""
        if not self.apiserver_url:
            return True
        port = int(self.apiserver_url.rsplit(":", 1)[1])
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.settimeout(1.0)
            return sock.connect_ex(("127.0.0.1", port)) == 0

    def registered(self) -> list[str]:
        """The configured clusters that have reported their capacity (each one's services run)."""

        async def probe() -> list[str]:
            assert self.endpoints is not None
            client = await Client.connect(self.nats_url(OPERATOR), self.redis_url(OPERATOR), timeout=2.0)
            try:
                return await client.cluster_names()
            finally:
                await client.close()

        try:
            reported = asyncio.run(probe())
        except Exception:  # not answering yet: not registered yet
            return []
        return [c.name for c in self.config.clusters if c.name in reported]

    def stop(self) -> None:
        for service in reversed(self.services):
            service.stop()
        self.services.clear()
        for server in (self.redis, self.nats):
            if server is not None:
                server.stop()
        for path in (endpoints_file(), services_file()):
            path.unlink(missing_ok=True)


def _usable_port(wanted: int) -> int:
    """``wanted`` if it is free on loopback, else any free port (a second system, a busy 8765)."""
    if wanted:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", wanted))
                return wanted
            except OSError:
                pass
    return free_port()


def _cluster_env(cluster: ClusterConfig, schedule_period: str) -> dict[str, str]:
    allocatable = msgspec.json.encode(cluster.allocatable).decode()
    return {
        "CLUSTER_SCHEDULER_CLUSTER": cluster.name,
        "CLUSTER_SCHEDULER_SCHEDULE_PERIOD": schedule_period,
        "CLUSTER_SCHEDULER_LABELS": msgspec.json.encode(cluster.labels).decode(),
        "CLUSTER_SCHEDULER_LINKS": msgspec.json.encode(cluster.links).decode(),
        "CLUSTER_SCHEDULER_PRICES": msgspec.json.encode(cluster.prices).decode(),
        "CLUSTER_SCHEDULER_DATA_SETS": msgspec.json.encode(cluster.data_sets).decode(),
        "CLUSTER_SCHEDULER_DATA_LINKS": msgspec.json.encode(cluster.data_links).decode(),
        "JOB_CONTROLLER_CLUSTER": cluster.name,
        "NODE_AGENT_CLUSTER": cluster.name,
        "NODE_AGENT_MODE": cluster.mode,
        "NODE_AGENT_WORK_DIR": str(home() / "pods"),  # exec/container pod logs, where `hyperjob logs` looks
        "NODE_AGENT_NODES": str(cluster.nodes),
        "NODE_AGENT_ALLOCATABLE": allocatable,
        "NODE_AGENT_LABELS": msgspec.json.encode(cluster.node_labels).decode(),
        "NODE_AGENT_POD_DURATION": cluster.pod_duration,
    }


def _agent_lease_env(lease: float, self_fence: bool) -> dict[str, str]:
    """The node-agents' side of the fleet lease: with ``self_fence``, cut off from the bus longer
    than ``lease`` they freeze their pods themselves (``node_agent.fencing``); they beat at least 4
    times per lease (every 2 s, more often under a lease shorter than 8 s), so that a healthy agent
    never fences."""
    return {
        "NODE_AGENT_FLEET_LEASE": str(lease),
        "NODE_AGENT_HEARTBEAT_PERIOD": str(min(2.0, lease / 4)),
        "NODE_AGENT_SELF_FENCE": "true" if self_fence else "false",
    }


def run_forever(
    system: System,
    echo: Callable[[str], None],
    wait_timeout: float | None = None,
    ready: Callable[[], None] | None = None,
) -> None:
    """Block until Ctrl-C, SIGTERM or ``hyperjob down``, restarting services that die; then stop
    everything. Until every cluster has registered (and the apiserver, if any, takes connections:
    `up` says kubectl may go) the system is not ready: ``ready`` is called once it is; after
    ``wait_timeout`` seconds without it, ``up`` gives up (UpError)."""
    stopping = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    # Both explicitly: a shell starts background jobs with SIGINT ignored, and Ctrl-C must still work.
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    started, is_ready = time.monotonic(), False
    progress, probed = Progress(system.config.liveness_timeout, owners(s.instance for s in system.services)), 0.0
    try:
        while not stopping:
            for note in [*system.supervise_servers(), *system.supervise_once()]:
                echo(note)
            if is_ready and time.monotonic() - probed >= LIVENESS_PERIOD:
                probed = time.monotonic()
                progress.observe(system.consumers())
                for note in system.supervise_liveness(progress):
                    echo(note)
            if not is_ready and len(system.registered()) == len(system.config.clusters) and system.api_answers():
                is_ready = True
                if ready is not None:
                    ready()
            if not is_ready and wait_timeout is not None and time.monotonic() - started > wait_timeout:
                missing = sorted({c.name for c in system.config.clusters} - set(system.registered()))
                what = f"clusters {', '.join(missing)} did not register" if missing else "the apiserver did not answer"
                raise UpError(f"{what} within {wait_timeout:g}s; see {home() / 'logs'}")
            system.write_status(is_ready)
            time.sleep(0.5)
    finally:
        echo("stopping ...")
        system.stop()
        echo("stopped")
