"""The HyperJob-level expectations of the example scenarios (``hyperJobChecks`` in an
``.expect.json``), without and under chaos: the shared checker reads pods, podgroups, jobs and
queues only, and some fleet behaviours show only in the HyperJob's own phase.

``{"hyperJob": NAME, "phase": P}``: the HyperJob ends in phase P.
``{"hyperJob": NAME, "neverPhase": P}``: no HyperJobPhaseChanged to P in the whole run.
``{"hyperJob": NAME, "reasonContains": S}``: its last phase change gave a waiting reason holding S.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any

import pytest

from hyperjob import simulator

from .test_scenarios import SCENARIOS

SEEDS = (1, 2, 3)
WITH_CHECKS = [(s, e) for s, e in SCENARIOS if "hyperJobChecks" in json.loads(e.read_text())]


def hyperjob_failure(check: dict[str, Any], result: dict[str, Any]) -> str | None:
    """None when the check holds, else what was seen."""
    name = check["hyperJob"]
    if "phase" in check:
        phases = [h["phase"] for h in result["hyperJobs"] if h["name"] == name]
        return None if phases == [check["phase"]] else f"phase {phases}"
    changes = [e for e in result["events"] if e["type"] == "HyperJobPhaseChanged" and e["object"] == name]
    if "reasonContains" in check:
        reason = changes[-1]["reason"] if changes else None
        return None if reason is not None and check["reasonContains"] in reason else f"reason {reason!r}"
    seen = [e["time"] for e in result["events"] if e["type"] == "HyperJobPhaseChanged" and e["object"] == name]
    hits = [
        e["time"]
        for e in result["events"]
        if e["type"] == "HyperJobPhaseChanged" and e["object"] == name and e["phase"] == check["neverPhase"]
    ]
    return None if seen and not hits else f"{check['neverPhase']} at t={hits} (phase changes at {seen})"


def _failures(expect: pathlib.Path, result: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    checks = json.loads(expect.read_text())["hyperJobChecks"]
    assert checks, "an expectation without checks proves nothing"
    return [(c, seen) for c in checks if (seen := hyperjob_failure(c, result)) is not None]


def test_some_examples_check_hyperjobs() -> None:
    assert WITH_CHECKS


@pytest.mark.parametrize(("scenario", "expect"), WITH_CHECKS, ids=[s.stem for s, _ in WITH_CHECKS])
def test_hyperjob_expectations_hold(scenario: pathlib.Path, expect: pathlib.Path) -> None:
    result = json.loads(simulator.to_json(simulator.run(scenario.read_text())))
    failures = _failures(expect, result)
    assert not failures, f"{scenario.name}: {failures[0][0]} -> saw {failures[0][1]}"


@pytest.mark.parametrize(("scenario", "expect"), WITH_CHECKS, ids=[s.stem for s, _ in WITH_CHECKS])
def test_hyperjob_expectations_hold_under_chaos(scenario: pathlib.Path, expect: pathlib.Path) -> None:
    for run in simulator.run_chaos(scenario.read_text(), SEEDS):
        failures = _failures(expect, json.loads(simulator.to_json(run.result)))
        assert not failures, f"{scenario.name}, seed {run.seed}: {failures[0][0]} -> saw {failures[0][1]}"
