"""``hyperjob up`` as a process supervisor: ready only once every cluster has registered, one per
home, services restarted when they crash, nothing left behind when it is killed, ``down`` stops it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import HYPERJOB, REPO, Cli, service_pids

pytestmark = pytest.mark.e2e


def system_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "REDIS_URL")}
    return {**env, "HYPERJOB_HOME": str(home)}


def up_detached(home: Path) -> Cli:
    cli = Cli(system_env(home))
    done = cli.run("up", "-d", timeout=180)
    assert "hyperjob is ready" in done.stdout
    return cli


def every_pid(home: Path) -> list[int]:
    modules = ("splitter", "global_scheduler", "status_aggregator", "cluster_scheduler", "job_controller", "node_agent")
    return [pid for module in modules for pid in service_pids(module, str(home))]


def test_up_is_ready_only_with_every_cluster_one_per_home_and_restarts_crashed_services(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cli = up_detached(home)
    try:
        # Ready means registered: an apply right away would find both clusters.
        assert [c["name"] for c in cli.json("get", "clusters")] == ["cluster-a", "cluster-b"]

        second = cli.run("up", check=False, timeout=60)
        assert second.returncode == 1
        assert f"is running in {home}" in second.stderr
        assert (home / "endpoints.json").exists()  # the second one touched nothing
        assert cli.json("get", "clusters")

        [victim] = service_pids("global_scheduler", str(home))
        os.kill(victim, signal.SIGKILL)
        restarted = cli.wait_for(
            "the global-scheduler to be restarted",
            lambda: [
                s
                for s in json.loads(cli.run("get", "services", "-o", "json").stdout)["items"]
                if s["name"] == "global_scheduler" and s["restarts"] == 1 and s["state"] == "running"
            ],
            timeout=60,
        )
        assert restarted[0]["pid"] != victim
        assert restarted[0]["lastExit"] == -signal.SIGKILL
        table = cli.run("get", "services").stdout.splitlines()
        assert table[0].split() == ["NAME", "STATE", "RESTARTS", "UPTIME", "PID"]
    finally:
        stopped = cli.run("down", check=False, timeout=120)
    assert stopped.returncode == 0, stopped.stderr
    assert every_pid(home) == []
    assert not (home / "endpoints.json").exists()


def test_nothing_outlives_a_killed_up(tmp_path: Path) -> None:
    home = tmp_path / "home"
    cli = up_detached(home)
    pid = int((home / "up.lock").read_text())
    assert every_pid(home)
    os.kill(pid, signal.SIGKILL)
    cli.wait_for("every service to die with up", lambda: every_pid(home) == [], timeout=30)
    started = time.monotonic()
    done = cli.run("get", "hyperjobs", check=False)
    assert (done.returncode, done.stderr) == (
        1,
        f"error: no running system: `hyperjob up` (pid {pid}) is gone; start it again\n",
    )
    assert time.monotonic() - started < 15
    # and the home is free for the next up
    again = subprocess.run([HYPERJOB, "down"], env=cli.env, cwd=REPO, capture_output=True, text=True, timeout=30)
    assert "no `hyperjob up` is running" in again.stderr
