"""A cluster that stops reporting loses its children to another eligible cluster, names kept."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from .conftest import REPO, Cli, service_pids

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

NAME = "llm-failover"


def test_children_of_a_silent_cluster_are_placed_again_on_another(cli: Cli, tmp_path: Path) -> None:
    text = (
        (REPO / "examples" / "hyperjob-llm.yaml")
        .read_text()
        .replace("name: llm-train-hyperjob", f"name: {NAME}")
        .replace("sim-duration: 10s", "sim-duration: 600s")
        .replace("replicas: 64", "replicas: 16")
        .replace("minAvailable: 64", "minAvailable: 16")
        .replace("replicas: 32}", "replicas: 8}")
    )
    manifest = tmp_path / "hyperjob.yaml"
    manifest.write_text(text)
    with cli.applied(manifest, NAME):
        cli.wait_for("the HyperJob to run", lambda: cli.json("get", "hyperjobs", NAME)["phase"] == "Running")
        _lose_cluster_b(cli)


def _lose_cluster_b(cli: Cli) -> None:
    # cluster-b's control plane goes silent: its scheduler stops reporting capacity.
    [scheduler] = service_pids("cluster_scheduler", cli.env["HYPERJOB_HOME"], "cluster-b")
    os.kill(scheduler, signal.SIGSTOP)
    try:
        moved = cli.wait_for(
            "the child of cluster-b to run on cluster-a",
            lambda: _running_on(cli, f"{NAME}-job-1", "cluster-a"),
            timeout=120,
        )
        assert moved["succeeded"] + moved["running"] == 8
        placement = cli.wait_for(
            "the placement to follow",
            lambda: cli.json("get", "hyperjobs", NAME)["status"]["placement"] == {"cluster-a": 16} or None,
        )
        assert placement
    finally:
        os.kill(scheduler, signal.SIGCONT)
    # Back again, cluster-b removes its stale copy: the child exists once, on cluster-a.
    cli.wait_for(
        "cluster-b to drop its copy",
        lambda: [j["cluster"] for j in cli.json("get", "jobs") if j["name"] == f"{NAME}-job-1"] == ["cluster-a"],
    )


def _running_on(cli: Cli, child: str, cluster: str) -> dict | None:
    return next(
        (
            j
            for j in cli.json("get", "jobs")
            if j["name"] == child and j["cluster"] == cluster and j["phase"] == "Running"
        ),
        None,
    )
