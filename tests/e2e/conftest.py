"""The whole system as separate processes: ``hyperjob up`` in the background, driven through the CLI."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HYPERJOB = str(Path(sys.executable).parent / "hyperjob")
REPO = Path(__file__).resolve().parents[2]


class Cli:
    """Runs ``hyperjob`` commands against one running system."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env

    def run(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [HYPERJOB, *args], env=self.env, cwd=REPO, capture_output=True, text=True, timeout=timeout
        )
        if check and done.returncode != 0:
            raise AssertionError(f"hyperjob {' '.join(args)} failed ({done.returncode}): {done.stdout}{done.stderr}")
        return done

    def json(self, *args: str) -> Any:
        """``get ... -o json`` as flat views: each object's status fields (``phase``, ``placement``,
        ``running`` ...) at the top next to its ``name``; a List as the list of its items."""
        data = json.loads(self.run(*args, "-o", "json").stdout)
        if data.get("kind") == "List":
            return [view(item) for item in data["items"]]
        return view(data)

    def manifests(self, *args: str) -> Any:
        """``get ... -o json`` as printed (kubectl's shape)."""
        return json.loads(self.run(*args, "-o", "json").stdout)

    @contextlib.contextmanager
    def applied(self, manifest: Path, *names: str) -> Iterator[None]:
        """Apply ``manifest``; delete the HyperJobs ``names`` afterwards, pass or fail, so the
        next test finds the clusters empty (the system is shared by the whole session)."""
        self.run("apply", "-f", str(manifest))
        try:
            yield
        finally:
            for name in names:
                self.run("delete", "hyperjob", name, "--timeout", "120", check=False)

    def wait_for(self, what: str, probe: Any, timeout: float = 120) -> Any:
        """Poll ``probe()`` until it returns something truthy; fail naming ``what`` after ``timeout``."""
        deadline, last = time.monotonic() + timeout, None
        while time.monotonic() < deadline:
            last = probe()
            if last:
                return last
            time.sleep(0.5)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}; last saw {last!r}")


def view(obj: dict[str, Any]) -> dict[str, Any]:
    """An object as ``get -o json`` prints it, flattened for assertions (kinds that are not API
    objects, such as clusters and nodes, are printed flat already)."""
    if "metadata" not in obj:
        return obj
    status = obj.get("status", {})
    flat = {"name": obj["metadata"]["name"], **status, "status": status}
    if isinstance(status.get("state"), dict):  # a Volcano Job's status.state.phase
        flat["phase"] = status["state"]["phase"]
    if "nodeName" in obj.get("spec", {}):  # a pod
        flat["node"] = obj["spec"]["nodeName"]
    return flat


@contextlib.contextmanager
def running_system(home: Path, clusters: int, *up_args: str, env: dict[str, str] | None = None) -> Iterator[Cli]:
    """``hyperjob up`` in the background with its own home, until every cluster reports; stopped
    (Ctrl-C, as a user would) when the block ends."""
    environment = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "REDIS_URL")}
    environment |= {**(env or {}), "HYPERJOB_HOME": str(home)}
    log = open(home / "up.log", "w")  # noqa: SIM115 - closed after the system stops
    up = subprocess.Popen([HYPERJOB, "up", *up_args], env=environment, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    cli = Cli(environment)
    try:
        cli.wait_for("the system to answer", lambda: (home / "endpoints.json").exists(), timeout=60)
        cli.wait_for(f"{clusters} clusters to report", lambda: len(cli.json("get", "clusters")) == clusters, timeout=60)
        yield cli
    finally:
        up.send_signal(signal.SIGINT)
        try:
            up.wait(60)
        except subprocess.TimeoutExpired:
            up.kill()
            up.wait()
        log.close()
        if up.returncode not in (0, -signal.SIGINT):
            print((home / "up.log").read_text())


@pytest.fixture(scope="session")
def cli(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cli]:
    # Tests freeze a cluster's processes (SIGSTOP) to make the cluster fall silent; up must not
    # restart them as hung meanwhile (test_up_supervision checks that it does, on its own system).
    home = tmp_path_factory.mktemp("hyperjob-home")
    config = home / "up.yaml"
    config.write_text("livenessTimeout: 600\n")
    with running_system(home, 2, "--config", str(config)) as system:
        yield system


def service_pids(module: str, home: str, cluster: str | None = None) -> list[int]:
    """The processes of one service of the system whose home is ``home`` (optionally of one cluster)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if [b"-m", f"hyperjob.services.{module}".encode()] != cmdline[
            1:3
        ] or f"HYPERJOB_HOME={home}".encode() not in environ:
            continue
        if cluster is None or any(v.endswith(f"_CLUSTER={cluster}".encode()) for v in environ):
            pids.append(int(proc.name))
    return pids
