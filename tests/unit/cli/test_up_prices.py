"""Clusters' prices (issue 28, what to build 4): declared in the ``up`` config, carried by the
cluster-scheduler's capacity summary to what fleetcore reads, and the plan's estimated cost per
hour shown by ``describe hyperjob`` (the HyperJob view's status)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from click.testing import CliRunner

from hyperjob import api, events
from hyperjob.cli import main as cli_main
from hyperjob.cli.config import load_config
from hyperjob.cli.up import _cluster_env
from hyperjob.client import ClientError
from hyperjob.client.views import estimated_cost, hyperjob_manifest
from hyperjob.records import HyperJobDoc
from hyperjob.records.capacity import cluster_capacity
from hyperjob.servicekit.config import load_settings
from hyperjob.services.cluster_scheduler.config import Settings
from tests.unit.cli import simulated
from tests.unit.fleetcore.fleet_builders import conceptual, job_spec, task

GPU = "nvidia.com/gpu"
EXAMPLES = Path(__file__).parents[3] / "examples" / "scenarios"


def test_prices_travel_from_the_up_config_to_the_capacity_fleetcore_reads(tmp_path: Path) -> None:
    path = tmp_path / "up.yaml"
    path.write_text("clusters:\n- name: a\n  prices: {nvidia.com/gpu: 2.5, cpu: 0.04}\n")
    config = load_config(str(path)).clusters[0]
    env = {k: v for k, v in _cluster_env(config, "1s").items() if k.startswith("CLUSTER_SCHEDULER_")}
    settings = load_settings(Settings, "CLUSTER_SCHEDULER", environ=env)
    assert settings.prices == {GPU: 2.5, "cpu": 0.04}
    report = events.ClusterCapacityReported(
        event_id="e", occurred_at=0.0, producer="p", correlation_id="c", causation_id="c",
        cluster="a", allocatable={}, free={}, nodes=0, ready_nodes=0, prices=settings.prices,
    )  # fmt: skip
    assert cluster_capacity(report, 0.0).prices == {GPU: 2.5, "cpu": 0.04}


def test_a_negative_price_in_the_up_config_is_refused_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "up.yaml"
    path.write_text("clusters:\n- name: a\n  prices: {nvidia.com/gpu: -1}\n")
    with pytest.raises(ClientError, match=r"clusters\[0\]\.prices"):
        load_config(str(path))


def test_describe_shows_the_plans_estimated_cost_per_hour() -> None:
    hyperjob = conceptual("hj", job_spec(task("w", 16, cpu="1")), {"mode": "auto", "prefer": "cost"})
    children = [
        events.ChildRef(name="hj-job-0", replicated_job="job", cluster="cheap", replicas=8, tasks={"w": 8}),
        events.ChildRef(name="hj-job-1", replicated_job="job", cluster="mid", replicas=8, tasks={"w": 8}),
    ]
    doc = HyperJobDoc(name="hj", manifest=api.encode(hyperjob), children=children)
    prices = {"cheap": {GPU: 1.0, "cpu": 0.01}, "mid": {GPU: 2.0}}
    cost = estimated_cost(doc, prices)
    assert cost == 8 * (1.0 + 0.01) + 8 * 2.0
    item = {"manifest": doc.manifest, "created": 0.0, "status": {}, "phase": "Running", "waitingReason": ""}
    item |= {"splitCount": 2, "children": [], "restarts": 0, "estimatedCostPerHour": cost}
    assert hyperjob_manifest(item)["status"]["estimatedCostPerHour"] == 24.08
    assert estimated_cost(doc, {"cheap": prices["cheap"]}) is None  # mid declares no price


def test_describe_shows_the_estimate_of_a_hyperjob_placed_by_cost(monkeypatch: pytest.MonkeyPatch) -> None:
    """ex-57 run through the services: 8 GPUs at 1/h on cheap and 8 at 2/h on mid."""
    system = simulated.run((EXAMPLES / "ex-57-prefer-cost.yaml").read_text())
    monkeypatch.setattr(cli_main, "with_client", lambda work: asyncio.run(work(system)))
    result = CliRunner().invoke(cli_main.main, ["describe", "hj", "thrifty"])
    assert result.exit_code == 0, result.output
    assert "Estimated Cost Per Hour:  24" in result.output
