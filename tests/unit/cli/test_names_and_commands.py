"""Names and commands as a person uses them (issue 32, item 7 of the issue): a namespaced
HyperJob's children are found by its name, ``abort`` leaves it Aborted, a second ``suspend`` is
refused, ``get`` takes ``KIND/NAME`` and ``KIND,KIND``, and ``apply -f examples/`` works.

The objects run through the real services under the simulator; the commands then read its store,
as they read Redis."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from hyperjob import records
from hyperjob.cli import main as cli_main
from hyperjob.services.splitter import domain as splitter
from tests.unit.cli import simulated

REPO = Path(__file__).resolve().parents[3]

SCENARIO = simulated.scenario(
    "names-and-commands",
    "16",
    simulated.hyperjob("small-a", "team-a"),
    simulated.hyperjob("stopper", "default", duration="1000s"),
    simulated.hyperjob("held", "default", duration="1000s"),
    simulated.command("5s", "held", "suspend"),
    simulated.command("10s", "stopper", "abort"),
)


@pytest.fixture(scope="module")
def system() -> simulated.Reader:
    return simulated.run(SCENARIO)


@pytest.fixture
def cli(system: simulated.Reader, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Result]:
    """``hyperjob ARGS`` against the simulated system."""
    monkeypatch.setattr(cli_main, "with_client", lambda work: asyncio.run(work(system)))
    return lambda *args: CliRunner().invoke(cli_main.main, list(args))


def rows(result: Result) -> list[list[str]]:
    assert result.exit_code == 0, result.output
    return [line.split() for line in result.output.splitlines() if line]


def test_a_namespaced_hyperjobs_children_are_selected_by_its_name(cli: Any) -> None:
    found = rows(cli("get", "jobs", "-n", "team-a", "-l", "volcano.sh/hyperjob-name=small-a"))

    assert [row[0] for row in found[1:]] == ["team-a-small-a-job-0"]


def test_abort_leaves_the_hyperjob_aborted_as_its_children(cli: Any) -> None:
    (header, row) = rows(cli("get", "hyperjobs", "stopper"))
    (_, child) = rows(cli("get", "jobs", "stopper-job-0"))

    assert row[header.index("PHASE")] == "Aborted"
    assert "Aborted" in child


def test_a_second_suspend_is_refused_as_changing_nothing(cli: Any) -> None:
    result = cli("suspend", "held")

    assert result.exit_code == 1
    assert "hyperjob/held: is suspended already: nothing to suspend" in result.output


def test_the_splitter_refuses_a_second_suspend_too() -> None:
    doc = records.HyperJobDoc(name="held", manifest={}, lifecycle="Suspended")

    assert splitter.command_refused("suspend", doc) == "is suspended already: nothing to suspend"
    assert splitter.command_refused("resume", doc) == ""


def test_get_takes_kind_slash_name_as_kubectl(cli: Any) -> None:
    assert rows(cli("get", "hj/stopper")) == rows(cli("get", "hyperjobs", "stopper"))
    assert [r[0] for r in rows(cli("get", "hj/stopper", "job/held-job-0"))] == [
        "NAME",
        "hyperjob/stopper",
        "NAME",
        "job/held-job-0",
    ]


def test_get_takes_kinds_separated_by_commas_as_kubectl(cli: Any) -> None:
    result = cli("get", "hj,job")
    tables = result.output.split("\n\n")

    assert result.exit_code == 0, result.output
    assert [t.splitlines()[0].split()[0] for t in tables] == ["NAME", "NAME"]
    assert {line.split()[0] for line in tables[0].splitlines()[1:]} == {"hyperjob/stopper", "hyperjob/held"}
    assert {line.split()[0] for line in tables[1].splitlines()[1:]} == {"job/stopper-job-0", "job/held-job-0"}


def test_get_names_what_it_did_not_find_and_exits_1(cli: Any) -> None:
    result = cli("get", "hj/stopper", "hj/nothing")

    assert result.exit_code == 1
    assert result.output.splitlines()[1].split()[:2] == ["stopper", "Aborted"]
    assert "hyperjob 'nothing' not found" in result.output


def test_the_shipped_examples_apply_together() -> None:
    found = cli_main._load((str(REPO / "examples"),), False, None)

    assert [o.error for o in found if o.error] == []
    assert sorted(o.ref for o in found) == ["hyperjob/llm-train-hyperjob", "queue/global-ai"]


def test_get_refuses_kind_slash_name_mixed_with_bare_names(cli: Any) -> None:
    result = cli("get", "hj/stopper", "held")

    assert result.exit_code != 0
    assert "'held': give every object as KIND/NAME once the first is" in result.output
