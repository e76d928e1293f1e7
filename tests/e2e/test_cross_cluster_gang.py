"""A HyperJob whose children span clusters starts everywhere at once, or nowhere."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from .conftest import REPO, Cli

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

EXAMPLE = (REPO / "examples" / "hyperjob-llm.yaml").read_text()


def _variant(name: str, duration: str, split: str, replicas: int) -> str:
    return (
        EXAMPLE.replace("name: llm-train-hyperjob", f"name: {name}")
        .replace("sim-duration: 10s", f"sim-duration: {duration}")
        .replace("replicas: 64", f"replicas: {replicas}")
        .replace("minAvailable: 64", f"minAvailable: {replicas}")
        .replace("    - {name: cluster-a, replicas: 32}\n    - {name: cluster-b, replicas: 32}", split)
    )


def test_gang_waits_while_one_cluster_is_full_then_starts_everywhere_at_once(cli: Cli, tmp_path: Path) -> None:
    filler, gang = tmp_path / "filler.yaml", tmp_path / "gang.yaml"
    filler.write_text(_variant("filler", "600s", "    - {name: cluster-b, replicas: 32}", 32))
    gang.write_text(
        _variant("gang", "600s", "    - {name: cluster-a, replicas: 8}\n    - {name: cluster-b, replicas: 8}", 16)
    )
    with cli.applied(filler, "filler"):
        cli.wait_for("cluster-b to be full", lambda: cli.json("get", "hyperjobs", "filler")["phase"] == "Running")
        with cli.applied(gang, "gang"):
            for _ in range(5):
                # cluster-a has room, but no pod of the gang may run anywhere while cluster-b cannot hold its part.
                assert sum(j["running"] for j in cli.json("get", "jobs") if j["hyperJob"] == "gang") == 0
                assert cli.json("get", "hyperjobs", "gang")["phase"] in ("Pending", "Admitted")
                time.sleep(1)
            cli.run("delete", "hyperjob", "filler", "--timeout", "120")  # cluster-b has room again
            _starts_everywhere(cli)


def _starts_everywhere(cli: Cli) -> None:
    def both_running() -> list[dict] | None:
        children = [j for j in cli.json("get", "jobs") if j["hyperJob"] == "gang"]
        return children if len(children) == 2 and all(j["running"] == 8 for j in children) else None

    children = cli.wait_for("the gang to run in both clusters", both_running, timeout=120)
    assert {j["cluster"] for j in children} == {"cluster-a", "cluster-b"}
    assert cli.json("get", "hyperjobs", "gang")["status"]["placement"] == {"cluster-a": 8, "cluster-b": 8}
