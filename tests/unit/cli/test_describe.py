"""``describe`` for people (issue 32, item 6), as kubectl's: sections of ``Key:  value``, tables,
quantities and times in human units, an Events table; for pods, podgroups and clusters too.

The objects run through the real services under the simulator; ``describe`` then reads its log
and store, as it reads JetStream and Redis."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
import yaml
from click.testing import CliRunner, Result

from hyperjob.cli import main as cli_main
from tests.unit.cli import simulated

SCENARIO = simulated.scenario(
    "describe",
    "16",
    simulated.hyperjob("small-a", "team-b", duration="1000s"),
    simulated.job("solo", "default", "1", at="1s"),
    extra="""\
  priorityClasses:
  - {name: high, value: 1000}
""",
)


@pytest.fixture(scope="module")
def system() -> simulated.Reader:
    return simulated.run(SCENARIO)


@pytest.fixture
def describe(system: simulated.Reader, monkeypatch: pytest.MonkeyPatch) -> Callable[..., str]:
    """``hyperjob describe ARGS``'s output against the simulated system."""
    monkeypatch.setattr(cli_main, "with_client", lambda work: asyncio.run(work(system)))

    def run(*args: str) -> str:
        result: Result = CliRunner().invoke(cli_main.main, ["describe", *args])
        assert result.exit_code == 0, result.output
        return result.output

    return run


def test_a_hyperjob_is_described_in_sections_with_tables_and_an_events_table(describe: Callable[..., str]) -> None:
    text = describe("hj", "small-a", "-n", "team-b")
    lines = text.splitlines()

    assert lines[:2] == ["Name:            small-a", "Namespace:       team-b"]
    assert "Children:" in lines and "Jobs:" in lines
    children = lines.index("Children:")
    assert lines[children + 1].split()[:3] == ["Name", "Replicated", "Job"]
    assert lines[children + 3].split()[:2] == ["team-b-small-a-job-0", "job"]
    events = lines.index("Events:")
    assert lines[events + 1].split() == ["Type", "Reason", "Age", "Object", "Message"]
    assert "phase Pending → Admitted" in text  # not "\u2192"
    assert text.count("\nPhase:") == 1 and "\n  Phase:" not in text  # the status does not repeat it


def test_times_and_quantities_are_for_people(describe: Callable[..., str]) -> None:
    job = describe("job", "solo")
    node = describe("node", "n")

    assert "Created:         Thu, 01 Jan 1970 00:00:01 +0000 (" in job  # the simulator's clock starts at 0
    assert "Created:         <unknown>" in describe("priorityclass", "high")  # none recorded: not 1970
    assert "Allocatable:     cpu: 16, memory: 8Gi, pods: 110" in node
    assert "8589934592" not in node and "1.0\n" not in job


@pytest.mark.parametrize(
    ("kind", "name", "shows"),
    [
        ("pod", "solo-w-0", "Node:       n"),
        ("podgroup", "solo", "Phase:"),
        ("cluster", "cluster-a", "Ready Nodes:"),
        ("priorityclass", "high", "Value:"),
    ],
)
def test_pods_podgroups_and_clusters_are_described(
    describe: Callable[..., str], kind: str, name: str, shows: str
) -> None:
    text = describe(kind, name)

    assert text.startswith("Name:") and name in text.splitlines()[0]
    assert shows in text and "Events:" in text


def test_yaml_stays_for_programs(describe: Callable[..., str]) -> None:
    described = yaml.safe_load(describe("hj", "small-a", "-n", "team-b", "-o", "yaml"))

    assert [c["name"] for c in described["children"]] == ["team-b-small-a-job-0"]
