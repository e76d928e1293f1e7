"""Every acceptance scenario (shared seeds and our examples) runs and its expectations hold.

The checks are applied with the shared checker's own ``apply_check`` (loaded from
``<repo>/../shared/tools/check_scenarios.py``) so this test and ``check_scenarios.py`` agree;
without that file the scenarios still run and only the output's shape is checked.
"""

from __future__ import annotations

import importlib.util
import json
import pathlib
from types import ModuleType
from typing import Any

import pytest

from hyperjob import simulator

REPO = pathlib.Path(__file__).resolve().parents[3]
CHECKER = REPO.parent / "shared" / "tools" / "check_scenarios.py"
FOLDERS = [REPO.parent / "shared" / "scenarios", REPO / "examples" / "scenarios"]
KEYS = ["scenario", "time", "pods", "podGroups", "jobs", "hyperJobs", "queues", "events"]


def _scenarios() -> list[tuple[pathlib.Path, pathlib.Path]]:
    found = []
    for folder in FOLDERS:
        if folder.is_dir():
            for path in sorted(folder.rglob("*.yaml")):
                expect = path.with_name(path.name[: -len(".yaml")] + ".expect.json")
                if expect.is_file():
                    found.append((path, expect))
    return found


def _checker() -> ModuleType | None:
    if not CHECKER.is_file():
        return None
    spec = importlib.util.spec_from_file_location("check_scenarios", CHECKER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCENARIOS = _scenarios()


def test_examples_are_present() -> None:
    assert len([s for s, _ in SCENARIOS if s.is_relative_to(REPO)]) >= 16


@pytest.mark.parametrize(("scenario", "expect"), SCENARIOS, ids=[s.stem for s, _ in SCENARIOS])
def test_scenario_expectations_hold(scenario: pathlib.Path, expect: pathlib.Path) -> None:
    result: dict[str, Any] = json.loads(simulator.to_json(simulator.run(scenario.read_text())))
    assert list(result) == KEYS
    checker = _checker()
    if checker is None:
        return
    expectation = json.loads(expect.read_text())
    assert expectation["checks"], "an expectation without checks proves nothing"
    failures = [
        (check, seen) for check in expectation["checks"] if (seen := checker.apply_check(check, result)) is not None
    ]
    assert not failures, f"{scenario.name}: {failures[0][0]} -> saw {failures[0][1]}"


@pytest.mark.parametrize(("scenario", "expect"), SCENARIOS, ids=[s.stem for s, _ in SCENARIOS])
def test_scenario_output_is_byte_identical_across_runs(scenario: pathlib.Path, expect: pathlib.Path) -> None:
    text = scenario.read_text()
    assert simulator.to_json(simulator.run(text)) == simulator.to_json(simulator.run(text))
