"""``hyperjob up``: NATS JetStream and Redis on loopback, every service as its own process, and a
simulated node fleet per cluster. Ctrl-C (or SIGTERM) stops everything cleanly, services first.

A service that exits unexpectedly is restarted (with a short back-off), as a process supervisor
would; its log is in ``<home>/logs/<name>.log``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import msgspec

from hyperjob.testkit.servers import NatsServer, RedisServer

from .config import ClusterConfig, Endpoints, UpConfig, endpoints_file, home

GLOBAL_SERVICES = ["splitter", "global_scheduler", "status_aggregator"]
CLUSTER_SERVICES = ["cluster_scheduler", "job_controller", "node_agent"]


def _module(service: str) -> str:
    return f"hyperjob.services.{service}"


@dataclass
class ServiceProcess:
    name: str
    module: str
    env: dict[str, str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = None
    restarts: int = 0
    started_at: float = 0.0

    def start(self) -> None:
        self.log = open(self.log_path, "ab")  # noqa: SIM115 - kept open for the child's lifetime
        self.proc = subprocess.Popen(
            [sys.executable, "-m", self.module],
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.started_at = time.monotonic()

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
class System:
    """Everything ``up`` started; ``stop`` undoes it in reverse order."""

    config: UpConfig
    nats: NatsServer | None = None
    redis: RedisServer | None = None
    services: list[ServiceProcess] = field(default_factory=list)
    endpoints: Endpoints | None = None

    def start(self, nats_url: str | None = None, redis_url: str | None = None) -> Endpoints:
        data = home()
        (data / "logs").mkdir(parents=True, exist_ok=True)
        if nats_url is None:
            self.nats = NatsServer(data / "nats")
            nats_url = self.nats.start()
        if redis_url is None:
            self.redis = RedisServer(data / "redis", appendonly=True)
            redis_url = self.redis.start()
        self.endpoints = Endpoints(nats_url=nats_url, redis_url=redis_url, pid=os.getpid())
        endpoints_file().write_bytes(msgspec.json.encode(self.endpoints))
        for service in self._plan(nats_url, redis_url, data / "logs"):
            service.start()
            self.services.append(service)
        return self.endpoints

    def _plan(self, nats_url: str, redis_url: str, logs: Path) -> list[ServiceProcess]:
        base = {**os.environ, "NATS_URL": nats_url, "REDIS_URL": redis_url, "PYTHONUNBUFFERED": "1"}
        plan = [ServiceProcess(name, _module(name), dict(base), logs / f"{name}.log") for name in GLOBAL_SERVICES]
        for cluster in self.config.clusters:
            env = {**base, **_cluster_env(cluster, self.config.schedule_period)}
            plan += [
                ServiceProcess(f"{name}@{cluster.name}", _module(name), env, logs / f"{name}-{cluster.name}.log")
                for name in CLUSTER_SERVICES
            ]
        return plan

    def supervise_once(self) -> list[str]:
        """Restart services that died; return a line for each restart."""
        notes = []
        for service in self.services:
            if service.proc is not None and service.proc.poll() is not None:
                code = service.proc.returncode
                if time.monotonic() - service.started_at < 2.0 * (service.restarts + 1):
                    continue  # back off: do not spin on a service that dies at start-up
                service.restarts += 1
                notes.append(f"{service.name} exited ({code}); restarting (see {service.log_path})")
                service.start()
        return notes

    def stop(self) -> None:
        for service in reversed(self.services):
            service.stop()
        self.services.clear()
        for server in (self.redis, self.nats):
            if server is not None:
                server.stop()
        if endpoints_file().is_file():
            endpoints_file().unlink()


def _cluster_env(cluster: ClusterConfig, schedule_period: str) -> dict[str, str]:
    allocatable = msgspec.json.encode(cluster.allocatable).decode()
    return {
        "CLUSTER_SCHEDULER_CLUSTER": cluster.name,
        "CLUSTER_SCHEDULER_SCHEDULE_PERIOD": schedule_period,
        "CLUSTER_SCHEDULER_LABELS": msgspec.json.encode(cluster.labels).decode(),
        "CLUSTER_SCHEDULER_LINKS": msgspec.json.encode(cluster.links).decode(),
        "JOB_CONTROLLER_CLUSTER": cluster.name,
        "NODE_AGENT_CLUSTER": cluster.name,
        "NODE_AGENT_MODE": cluster.mode,
        "NODE_AGENT_WORK_DIR": str(home() / "pods"),  # exec-mode pod logs, where `hyperjob logs` looks
        "NODE_AGENT_NODES": str(cluster.nodes),
        "NODE_AGENT_ALLOCATABLE": allocatable,
        "NODE_AGENT_LABELS": msgspec.json.encode(cluster.node_labels).decode(),
        "NODE_AGENT_POD_DURATION": cluster.pod_duration,
    }


def run_forever(system: System, echo: Callable[[str], None]) -> None:
    """Block until Ctrl-C or SIGTERM, restarting services that die; then stop everything."""
    stopping = False

    def on_signal(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    # Both explicitly: a shell starts background jobs with SIGINT ignored, and Ctrl-C must still work.
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        while not stopping:
            for note in system.supervise_once():
                echo(note)
            time.sleep(0.5)
    finally:
        echo("stopping ...")
        system.stop()
        echo("stopped")
