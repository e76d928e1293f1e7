"""``hyperjob up`` keeps its servers and services alive: nats-server and redis-server killed with
SIGKILL are started again on their ports with their data (JetStream's streams, the AOF, the same
users), and a service that stops making progress (SIGSTOP: alive, doing nothing) is restarted once
its consumers keep work waiting for ``livenessTimeout``. A HyperJob submitted meanwhile completes."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from .conftest import REPO, Cli, running_system

pytestmark = pytest.mark.e2e


def services(cli: Cli) -> dict[str, dict[str, Any]]:
    return {s["name"]: s for s in json.loads(cli.run("get", "services", "-o", "json").stdout)["items"]}


def hyperjob(tmp_path: Path, name: str) -> Path:
    manifest = tmp_path / f"{name}.yaml"
    manifest.write_text(
        (REPO / "examples" / "hyperjob-llm.yaml")
        .read_text()
        .replace("name: llm-train-hyperjob", f"name: {name}")
        .replace("sim-duration: 10s", "sim-duration: 3s")
    )
    return manifest


def test_up_restarts_crashed_servers_and_a_service_that_made_no_progress(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    config = tmp_path / "up.yaml"
    config.write_text("livenessTimeout: 10\n")
    with running_system(home, 2, "--config", str(config), "--no-dashboard") as cli:
        before = services(cli)
        assert before["nats-server"]["state"] == before["redis-server"]["state"] == "running"
        for server in ("nats-server", "redis-server"):
            os.kill(before[server]["pid"], signal.SIGKILL)
        cli.wait_for(
            "both servers to be restarted",
            lambda: all(
                services(cli)[s]["restarts"] == 1 and services(cli)[s]["state"] == "running"
                for s in ("nats-server", "redis-server")
            ),
            timeout=60,
        )
        assert services(cli)["nats-server"]["lastExit"] == -signal.SIGKILL
        assert [c["name"] for c in cli.json("get", "clusters")] == ["cluster-a", "cluster-b"]  # state kept

        stuck = services(cli)["job_controller@cluster-a"]
        os.kill(stuck["pid"], signal.SIGSTOP)
        try:
            cli.run("apply", "-f", str(hyperjob(tmp_path, "supervised")))
            restarted = cli.wait_for(
                "the stalled job-controller to be restarted",
                lambda: services(cli)["job_controller@cluster-a"]["pid"] != stuck["pid"],
                timeout=90,
            )
            assert restarted
        finally:
            if _alive(stuck["pid"]):  # not restarted: let it go on, so the system stops cleanly
                os.kill(stuck["pid"], signal.SIGCONT)
        cli.wait_for(
            "the HyperJob to complete",
            lambda: cli.json("get", "hyperjobs", "supervised")["phase"] == "Completed",
            timeout=120,
        )
        other = services(cli)["job_controller@cluster-b"]
        assert other["restarts"] == 0, _why_restarted(home, "job_controller@cluster-b", other)  # only the stalled one
    log = (home / "up.log").read_text()
    assert "job_controller@cluster-a made no progress for 10s" in log


def _why_restarted(home: Path, name: str, status: dict[str, Any]) -> str:
    """What up said of ``name`` and the end of its log: a restart this test did not cause is
    either a crash (its exit code and traceback) or a liveness verdict (up's note says which)."""
    notes = [line for line in (home / "up.log").read_text().splitlines() if name in line]
    log = home / "logs" / (name.replace("@", "-") + ".log")
    tail = log.read_text().splitlines()[-30:] if log.exists() else []
    return "\n".join([f"{name}: {status}", *notes, f"-- end of {log.name}:", *tail])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
