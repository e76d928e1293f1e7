"""``promtool check metrics`` finds every service's ``/metrics`` clean (issue 32, item 4): the
services run traffic through the simulator (the real services, one process, the registry each
service's ``/metrics`` serves), the dashboard exports the fleet it left, the apiserver its own;
each text goes to Prometheus' own linter. Volcano's names promtool refuses (gauges ending in
``_count``, milliseconds) come from ``deploy/prometheus/volcano.rules.yml`` instead."""

from __future__ import annotations

import asyncio
import importlib
import subprocess
from typing import Any

import pytest
from prometheus_client import REGISTRY as DEFAULT_REGISTRY
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from hyperjob.dashboard import metrics as fleet
from hyperjob.servicekit.metrics import REGISTRY
from tests.unit.cli import simulated
from tests.unit.deploy.test_compose import promtool
from tests.unit.servicekit.test_metric_cardinality import traffic

# A job no node can hold, so the cluster-scheduler's unschedulable series have samples.
TOO_BIG = """\
  - at: 1s
    create:
      apiVersion: batch.volcano.sh/v1alpha1
      kind: Job
      metadata: {name: too-big}
      spec: {tasks: [{name: w, replicas: 1, template: {spec: {containers: [
        {name: m, image: busybox, resources: {requests: {cpu: "512"}}}]}}}]}
"""


@pytest.fixture(scope="module")
def expositions() -> dict[str, str]:
    """Each exporter's ``/metrics`` text after the run: the services' registry, the dashboard's
    fleet, the apiserver's (the default registry, one request counted)."""
    text = traffic("lint", 2)
    system = simulated.run(text.replace("  until: 60s\n", TOO_BIG + "  until: 60s\n"))
    services = generate_latest(REGISTRY).decode()
    dashboard = asyncio.run(fleet.exposition(system)).decode()  # type: ignore[arg-type]
    apiserver = importlib.import_module("hyperjob.services.apiserver.app")
    apiserver.REQUESTS.labels("get", "hyperjobs", "200").inc()
    apiserver.LATENCY.labels("get").observe(0.01)
    return {"services": services, "dashboard": dashboard, "apiserver": generate_latest(DEFAULT_REGISTRY).decode()}


def check_metrics(text: str) -> subprocess.CompletedProcess[str]:
    promtool("--version")  # skips, saying why, where promtool is not installed
    return subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("exporter", ["services", "dashboard", "apiserver"])
def test_promtool_finds_the_metrics_clean(expositions: dict[str, str], exporter: str) -> None:
    checked = check_metrics(expositions[exporter])
    assert (checked.returncode, checked.stdout + checked.stderr) == (0, "")


def _sampled(text: str) -> set[str]:
    """The families of ``text`` with at least one sample: promtool lints only those."""
    return {family.name for family in text_string_to_metric_families(text) if family.samples}


def test_the_renamed_volcano_metrics_have_samples_so_promtool_read_them(expositions: dict[str, str]) -> None:
    sampled: dict[str, Any] = {name: _sampled(text) for name, text in expositions.items()}
    assert {
        "hyperjob_e2e_scheduling_latency_seconds",
        "hyperjob_e2e_job_scheduling_latency_seconds",
        "hyperjob_unschedulable_jobs",
        "hyperjob_unschedulable_tasks",
        "volcano_schedule_attempts",
        "hyperjob_bus_messages_handled",
    } <= sampled["services"]
    assert {"hyperjob_queue_podgroups", "hyperjob_cluster_nodes", "hyperjob_node_ready"} <= sampled["dashboard"]
    assert "apiserver_request" in sampled["apiserver"]


def test_the_volcano_names_are_recorded_as_volcano_exports_them() -> None:
    checked = promtool("test", "rules", "volcano.test.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
