"""``hyperjob bench api`` runs against a system of its own, reports every figure the issue asks for
with the counts it was given, and leaves nothing behind, even when it is stopped half-way."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from .conftest import HYPERJOB, REPO, service_pids

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def environment(tmp: Path) -> dict[str, str]:
    """The bench makes its home with ``tempfile``: under ``tmp`` here, to see that it is removed."""
    env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "REDIS_URL", "HYPERJOB_HOME")}
    return env | {"TMPDIR": str(tmp)}


def homes(tmp: Path) -> list[Path]:
    return sorted(tmp.glob("hyperjob-bench-api-*"))


def left_running(home: Path) -> list[int]:
    modules = ("splitter", "global_scheduler", "status_aggregator", "cluster_scheduler", "apiserver", "node_agent")
    return [pid for module in modules for pid in service_pids(module, str(home))]


def test_the_report_has_every_figure_and_the_counts_asked_for_and_nothing_is_left(tmp_path: Path) -> None:
    sizes = ["--hyperjobs", "20", "--watchers", "3", "--lists", "3", "--applies", "5"]
    done = subprocess.run(
        [HYPERJOB, "bench", "api", *sizes, "-o", "json"],
        env=environment(tmp_path), cwd=REPO, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    figures = json.loads(done.stdout)
    assert (figures["hyperjobs"], figures["seeded"], figures["listRequests"]) == (20, 20, 3)
    assert figures["list"]["items"] == 20 and figures["listTable"]["rows"] == 20
    for listed in (figures["list"], figures["listTable"]):
        assert listed["bytes"] > 0 and 0 < listed["p50"] <= listed["p95"] <= listed["p99"]
    watch = figures["watch"]
    assert (watch["watchers"], watch["opened"], watch["saw"]) == (3, 3, 3)
    assert 0 < watch["p50"] <= watch["p99"] <= watch["max"] and watch["acceptedAfter"] > 0 and watch["openSeconds"] > 0
    assert figures["applies"] == 5
    for path in ("applyApi", "applyNats"):
        assert figures[path]["created"] == 5 and figures[path]["failed"] == 0 and figures[path]["perSecond"] > 0
    assert homes(tmp_path) == []  # its home, with the servers' data, is removed


def test_a_bench_stopped_half_way_stops_its_system_and_removes_its_home(tmp_path: Path) -> None:
    bench = subprocess.Popen(
        [HYPERJOB, "bench", "api", "--hyperjobs", "5000", "--lists", "50", "--applies", "500"],
        env=environment(tmp_path), cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert bench.stderr is not None
        for line in bench.stderr:  # its system is up once it creates the HyperJobs
            if line.startswith("creating"):
                break
        [home] = homes(tmp_path)
        assert left_running(home), "the bench's services should be running while it measures"
        bench.send_signal(signal.SIGTERM)
        bench.communicate(timeout=60)
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
    assert bench.returncode != 0
    deadline = time.monotonic() + 30  # a service may take a moment to exit after its SIGTERM
    while left_running(home) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert left_running(home) == []
    assert not home.exists()
