"""A cluster that goes silent, control plane and nodes alike, loses its children to another
eligible cluster, names kept. (One whose nodes still report while its control plane is silent is
hung, not lost: its children stay, ex-55 and the job-controller's fleet lease show it.)"""

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
    # cluster-b goes silent: its scheduler stops reporting capacity and its nodes stop beating.
    home = cli.env["HYPERJOB_HOME"]
    silent = service_pids("cluster_scheduler", home, "cluster-b") + service_pids("node_agent", home, "cluster-b")
    assert len(silent) == 2, silent
    for pid in silent:
        os.kill(pid, signal.SIGSTOP)
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
        for pid in silent:
            os.kill(pid, signal.SIGCONT)
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
