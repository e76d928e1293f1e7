"""Deleting a HyperJob while one of its clusters is down finishes when that cluster returns: no orphans."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from .conftest import REPO, Cli, service_pids

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

NAME = "llm-orphan-check"


def test_delete_waits_for_a_down_cluster_and_completes_when_it_returns(cli: Cli, tmp_path: Path) -> None:
    manifest = tmp_path / "hyperjob.yaml"
    manifest.write_text(
        (REPO / "examples" / "hyperjob-llm.yaml")
        .read_text()
        .replace("name: llm-train-hyperjob", f"name: {NAME}")
        .replace("sim-duration: 10s", "sim-duration: 600s")
        .replace("replicas: 64", "replicas: 16")
        .replace("minAvailable: 64", "minAvailable: 16")
        .replace("replicas: 32}", "replicas: 8}")
    )
    with cli.applied(manifest, NAME):
        cli.wait_for("the HyperJob to run", lambda: cli.json("get", "hyperjobs", NAME)["phase"] == "Running")
        # cluster-b's job-controller (its control plane) is down while the HyperJob is deleted.
        [controller] = service_pids("job_controller", cli.env["HYPERJOB_HOME"], "cluster-b")
        os.kill(controller, signal.SIGSTOP)
        try:
            pending = cli.run("delete", "hyperjob", NAME, "--timeout", "8", check=False)
            assert pending.returncode != 0 and "still deleting" in pending.stderr
            assert cli.json("get", "hyperjobs", NAME)["phase"] == "Terminating"
            cli.wait_for(
                "cluster-a's child to be gone, cluster-b's to stay",
                lambda: [j["cluster"] for j in cli.json("get", "jobs") if j["hyperJob"] == NAME] == ["cluster-b"],
                timeout=60,
            )
        finally:
            os.kill(controller, signal.SIGCONT)
        cli.wait_for("the deletion to finish", lambda: NAME not in {h["name"] for h in cli.json("get", "hyperjobs")})
        assert not [j for j in cli.json("get", "jobs") if j["hyperJob"] == NAME]
