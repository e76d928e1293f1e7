"""A live service process's /healthz and /readyz (``servicekit.health``) over a Redis that goes
away and comes back: not ready while Redis is down (its supervisor waits), alive throughout (no
restart would help), ready again once Redis is back; and its /metrics in Prometheus' format."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from hyperjob.testkit.servers import RedisServer
from tests.service import service_helpers as sh

pytestmark = pytest.mark.service


def fetch(url: str) -> tuple[int, dict[str, Any] | str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:  # noqa: S310 - loopback
            body = answer.read().decode()
            status = answer.status
    except urllib.error.HTTPError as refused:
        body, status = refused.read().decode(), refused.code
    try:
        return status, json.loads(body)
    except ValueError:
        return status, body


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A Redis of this test's own: it is stopped and started again."""
    with RedisServer(tmp_path / "redis") as server:
        yield server


@pytest.fixture
async def service(nats_url: str, redis: RedisServer, tmp_path: Path) -> AsyncIterator[str]:
    """The status-aggregator as its own process (it declares the streams it needs, as without
    authentication), its endpoints on any free port; yields their base URL."""
    alive = tmp_path / "status-aggregator.alive"
    env = {
        **os.environ,
        "NATS_URL": nats_url,
        "REDIS_URL": redis.url,
        "METRICS_PORT": "0",
        "HYPERJOB_LIVENESS_FILE": str(alive),
    }
    log = open(tmp_path / "service.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "hyperjob.services.status_aggregator"], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        record = await sh.until(
            lambda: alive.exists() and json.loads(alive.read_text() or "{}"),
            what="the liveness file",
            timeout=30,
            interval=0.1,
        )
        yield record["metrics"]
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()


async def test_readyz_follows_redis_and_healthz_stays_up(service: str, redis: RedisServer) -> None:
    assert fetch(f"{service}/readyz") == (200, {"ready": True, "active": True, "problems": []})
    status, alive = fetch(f"{service}/healthz")
    assert status == 200 and alive["instance"] == "status-aggregator"

    redis.stop()
    status, ready = await sh.until(
        lambda: (r := fetch(f"{service}/readyz"))[0] == 503 and r, what="readyz to refuse", timeout=30, interval=0.2
    )
    assert ready["ready"] is False and any(p.startswith("Redis: ") for p in ready["problems"])
    assert fetch(f"{service}/healthz")[0] == 200  # alive: a restart would not bring Redis back

    redis.restart()
    await sh.until(
        lambda: fetch(f"{service}/readyz")[0] == 200, what="readyz to accept again", timeout=30, interval=0.2
    )


async def test_metrics_are_prometheus_text_and_unknown_paths_are_refused(service: str) -> None:
    status, text = fetch(f"{service}/metrics")
    assert status == 200 and isinstance(text, str)
    assert "# TYPE hyperjob_bus_messages_handled_total counter" in text
    assert "# TYPE hyperjob_hyperjobs gauge" in text
    assert "\nhyperjob_instance_active 1.0\n" in text  # the one replica: it holds the lease

    def gauged() -> str | None:
        text = str(fetch(f"{service}/metrics")[1])
        return text if "hyperjob_bus_dead_letters{" in text else None

    gauges = await sh.until(gauged, what="the dead-letter gauge", timeout=30, interval=0.2)
    assert 'hyperjob_bus_dead_letters{durable="status-aggregator"} 0.0' in gauges
    assert fetch(f"{service}/nothing")[0] == 404


async def test_a_per_cluster_service_labels_every_series_with_its_cluster(
    nats_url: str, redis: RedisServer, tmp_path: Path
) -> None:
    """A cluster-scheduler's /metrics, as any scraper reads it: its cluster is on every series
    (Volcano's, the bus's, the process's), not added by one Prometheus' relabelling."""
    alive = tmp_path / "cluster-scheduler.alive"
    env = {
        **os.environ,
        "NATS_URL": nats_url,
        "REDIS_URL": redis.url,
        "METRICS_PORT": "0",
        "HYPERJOB_LIVENESS_FILE": str(alive),
        "CLUSTER_SCHEDULER_CLUSTER": "cluster-q",
    }
    log = open(tmp_path / "service.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-m", "hyperjob.services.cluster_scheduler"], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    try:
        record = await sh.until(
            lambda: alive.exists() and json.loads(alive.read_text() or "{}"),
            what="the liveness file",
            timeout=30,
            interval=0.1,
        )
        status, text = fetch(f"{record['metrics']}/metrics")
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()
    assert status == 200 and isinstance(text, str)
    series = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert any(line.startswith("hyperjob_e2e_scheduling_latency_seconds_count") for line in series)
    assert [line for line in series if 'cluster="cluster-q"' not in line] == []
