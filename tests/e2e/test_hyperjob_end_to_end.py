"""The product brief's example through the CLI, and bad input that changes nothing."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from .conftest import REPO, Cli

pytestmark = pytest.mark.e2e

EXAMPLE = REPO / "examples" / "hyperjob-llm.yaml"
NAME = "llm-train-hyperjob"


def test_example_hyperjob_completes_with_32_pods_in_each_cluster(cli: Cli) -> None:
    applied = cli.run("apply", "-f", str(EXAMPLE))
    assert "hyperjob/llm-train-hyperjob created" in applied.stdout
    try:
        _runs_to_completion(cli)
    finally:
        cli.run("delete", "hyperjob", NAME, "--timeout", "120", check=False)


def _runs_to_completion(cli: Cli) -> None:
    def completed() -> dict | None:
        hyperjob = cli.json("get", "hyperjobs", NAME)
        return hyperjob if hyperjob["phase"] in ("Completed", "Failed") else None

    hyperjob = cli.wait_for("the HyperJob to finish", completed, timeout=180)
    assert hyperjob["phase"] == "Completed"
    status = hyperjob["status"]
    assert status["placement"] == {"cluster-a": 32, "cluster-b": 32}
    assert [c["type"] for c in status["conditions"]] == ["Completed"]
    assert status["conditions"][0]["reason"] == "AllChildVCJobsCompleted"

    jobs = {job["name"]: job for job in cli.json("get", "jobs")}
    for child, cluster in ((f"{NAME}-job-0", "cluster-a"), (f"{NAME}-job-1", "cluster-b")):
        assert jobs[child]["cluster"] == cluster
        assert jobs[child]["phase"] == "Completed"
        assert jobs[child]["succeeded"] == 32
        nodes = {pod["node"] for pod in jobs[child]["pods"]}
        assert nodes == {f"{cluster}-node-{i}" for i in range(4)}  # 8 one-GPU pods on each 8-GPU node


def test_deleting_a_hyperjob_removes_every_child_from_every_cluster(cli: Cli) -> None:
    cli.run("apply", "-f", str(EXAMPLE))
    cli.wait_for(
        "the children to exist",
        lambda: {j["name"] for j in cli.json("get", "jobs")} >= {f"{NAME}-job-0", f"{NAME}-job-1"},
    )
    deleted = cli.run("delete", "hyperjob", NAME, "--timeout", "120")
    assert "deleted" in deleted.stdout
    assert NAME not in {h["name"] for h in cli.json("get", "hyperjobs")}
    assert not [j for j in cli.json("get", "jobs") if j["hyperJob"] == NAME]


BAD_INPUTS = {
    "malformed-yaml": ("apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {name: broken\n", "not valid YAML"),
    "negative-replicas": (
        EXAMPLE.read_text().replace("replicas: 64", "replicas: -64"),
        "$.spec.template.spec.tasks[0].replicas: Expected `int` >= 0",
    ),
    "split-does-not-add-up": (
        EXAMPLE.read_text().replace("{name: cluster-b, replicas: 32}", "{name: cluster-b, replicas: 30}"),
        "$.spec.splitPolicy.clusters: replicas add up to 62, but the template has 64",
    ),
    "unknown-cluster": (
        EXAMPLE.read_text().replace("{name: cluster-b, replicas: 32}", "{name: cluster-z, replicas: 32}"),
        "$.spec.splitPolicy.clusters[1].name: cluster 'cluster-z' does not exist",
    ),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS), ids=list(BAD_INPUTS))
def test_bad_input_is_rejected_naming_the_field_and_changes_nothing(cli: Cli, tmp_path: Path, case: str) -> None:
    text, message = BAD_INPUTS[case]
    manifest = tmp_path / f"{case}.yaml"
    manifest.write_text(textwrap.dedent(text).replace("name: llm-train-hyperjob", f"name: bad-{case}"))
    before = _state(cli)

    rejected = cli.run("apply", "-f", str(manifest), check=False)

    assert rejected.returncode != 0
    assert message in rejected.stdout + rejected.stderr
    assert _state(cli) == before


def _state(cli: Cli) -> dict[str, object]:
    """What a rejected manifest must not change: every object's name and phase."""
    return {
        "hyperjobs": sorted((h["name"], h["phase"]) for h in cli.json("get", "hyperjobs")),
        "jobs": sorted((j["name"], j["phase"]) for j in cli.json("get", "jobs")),
        "queues": sorted((q["name"], q["state"]) for q in cli.json("get", "queues")),
    }
