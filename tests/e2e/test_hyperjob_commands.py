"""suspend and resume act on every child of a HyperJob in every cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import REPO, Cli

pytestmark = pytest.mark.e2e

NAME = "llm-suspend"


def test_suspend_aborts_every_child_and_resume_runs_them_again(cli: Cli, tmp_path: Path) -> None:
    manifest = tmp_path / "hyperjob.yaml"
    manifest.write_text(
        (REPO / "examples" / "hyperjob-llm.yaml")
        .read_text()
        .replace("name: llm-train-hyperjob", f"name: {NAME}")
        .replace("sim-duration: 10s", "sim-duration: 300s")
    )
    with cli.applied(manifest, NAME):
        cli.wait_for("the HyperJob to run", lambda: cli.json("get", "hyperjobs", NAME)["phase"] == "Running")
        _suspend_and_resume(cli)


def _suspend_and_resume(cli: Cli) -> None:
    assert "commanded" in cli.run("suspend", NAME).stdout
    cli.wait_for("every child to be aborted", lambda: _children(cli) == {"Aborted"})
    assert cli.wait_for("the Suspended phase", lambda: cli.json("get", "hyperjobs", NAME)["phase"] == "Suspended")
    assert sum(j["running"] for j in cli.json("get", "jobs") if j["hyperJob"] == NAME) == 0

    assert "commanded" in cli.run("resume", NAME).stdout
    cli.wait_for("every child to run again", lambda: _children(cli) == {"Running"})
    cli.wait_for("the Running phase", lambda: cli.json("get", "hyperjobs", NAME)["phase"] == "Running")
    assert {j["retryCount"] for j in cli.json("get", "jobs") if j["hyperJob"] == NAME} == {1}


def _children(cli: Cli) -> set[str]:
    return {j["phase"] for j in cli.json("get", "jobs") if j["hyperJob"] == NAME}


def test_a_command_for_an_unknown_hyperjob_is_rejected(cli: Cli) -> None:
    done = cli.run("suspend", "no-such-hyperjob", check=False)
    assert done.returncode != 0
    assert "HyperJob 'no-such-hyperjob' not found" in done.stderr
