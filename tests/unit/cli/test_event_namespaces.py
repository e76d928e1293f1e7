"""Events are namespaced (issue 32, item 2): ``get events [-n NS | -A] [KIND/NAME]`` and
``describe``'s Events show only the objects of the namespace asked for, and a team-b HyperJob
finds its own history, not the default namespace's HyperJob of the same name.

The objects run through the real services under the simulator; the views then read its log and
store, as ``get`` reads JetStream and Redis."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

import pytest
from click.testing import CliRunner

from hyperjob import events
from hyperjob.cli import main as cli_main
from hyperjob.cli import views
from hyperjob.client import eventlog
from tests.unit.cli import simulated

SCENARIO = simulated.scenario(
    "namespaced-events",
    "8",
    simulated.hyperjob("small-a", "default"),
    simulated.hyperjob("small-a", "team-b"),
    simulated.job("solo", "team-b", "1"),
    simulated.job("huge", "team-b", "4", "small"),  # beyond its queue's capability: its podgroup waits
    extra="""\
  queues:
  - {apiVersion: scheduling.volcano.sh/v1beta1, kind: Queue, metadata: {name: small}, spec: {capability: {cpu: "2"}}}
""",
)
Reader = simulated.Reader


@pytest.fixture(scope="module")
def system() -> Reader:
    return simulated.run(SCENARIO)


def listed(system: Reader, target: str | None, namespace: str | None) -> list[dict[str, Any]]:
    return asyncio.run(views.event_items(system, target, namespace))  # type: ignore[arg-type]


def test_each_namespace_lists_only_the_events_of_its_objects(system: Reader) -> None:
    team_b = listed(system, None, "team-b")
    default = listed(system, None, "default")
    every = listed(system, None, None)

    assert {i["namespace"] for i in team_b} == {"team-b"}
    assert {i["object"] for i in team_b} == {
        "hyperjob/small-a",
        "job/team-b-small-a-job-0",
        "podgroup/team-b-small-a-job-0",
        "job/solo",
        "podgroup/solo",
        "job/huge",
        "podgroup/huge",
    }
    assert {i["namespace"] for i in default} == {"default"}
    shown = {i["object"] for i in default}
    assert {"hyperjob/small-a", "job/small-a-job-0", "podgroup/small-a-job-0", "queue/default", "queue/small"} <= shown
    # Cluster-scoped objects' events are listed in default, as Kubernetes records them.
    assert shown <= {
        "hyperjob/small-a",
        "job/small-a-job-0",
        "podgroup/small-a-job-0",
        "queue/default",
        "queue/small",
        "node/n",
    }
    assert len(every) == len(team_b) + len(default)


def test_a_plain_job_is_named_a_job_in_its_events(system: Reader) -> None:
    assert not [i for i in listed(system, None, None) if i["object"] in ("hyperjob/solo", "hyperjob/huge")]
    assert any(i["reason"] == "Admitted" for i in listed(system, "job/solo", "team-b"))


def test_one_hyperjobs_events_are_those_of_its_namespace(system: Reader) -> None:
    mine = listed(system, "hyperjob/small-a", "team-b")
    theirs = listed(system, "hyperjob/small-a", "default")

    assert {i["object"] for i in mine} == {
        "hyperjob/small-a",
        "job/team-b-small-a-job-0",
        "podgroup/team-b-small-a-job-0",
    }
    assert {i["namespace"] for i in mine} == {"team-b"}
    assert {i["object"] for i in theirs} == {"hyperjob/small-a", "job/small-a-job-0", "podgroup/small-a-job-0"}
    assert {i["namespace"] for i in theirs} == {"default"}


def test_describe_ends_with_the_events_of_the_object_in_its_namespace(system: Reader) -> None:
    described = asyncio.run(views.describe(system, "hj", "small-a", "team-b"))  # type: ignore[arg-type]

    assert described is not None
    assert isinstance(described["events"], list)
    assert {e["object"] for e in described["events"]} == {
        "hyperjob/small-a",
        "job/team-b-small-a-job-0",
        "podgroup/team-b-small-a-job-0",
    }


def test_a_job_no_message_places_is_in_the_namespace_the_store_knows() -> None:
    submitted = events.OwnerSubmitted(event_id="e1", name="waiting", plain=True, queue="q", request={}, created=1.0)

    (placed,) = eventlog.about(eventlog.derive([(submitted, 1.0)], {"waiting": "team-c"}), "job/waiting")
    (unknown,) = eventlog.about(eventlog.derive([(submitted, 1.0)]), "job/waiting")

    assert (placed.kind, placed.namespace) == ("Job", "team-c")
    assert unknown.namespace == "default"


@pytest.fixture
def cli(system: Reader, monkeypatch: pytest.MonkeyPatch) -> Callable[..., list[str]]:
    """``hyperjob ARGS`` against the simulated system: its output lines."""
    monkeypatch.setattr(cli_main, "with_client", lambda work: asyncio.run(work(system)))

    def run(*args: str) -> list[str]:
        result = CliRunner().invoke(cli_main.main, list(args))
        assert result.exit_code == 0, result.output
        return result.output.splitlines()

    return run


def objects(lines: list[str]) -> set[str]:
    """The OBJECT column of a ``get events`` table."""
    header = re.split(r"\s{2,}", lines[0])
    return {re.split(r"\s{2,}", line)[header.index("OBJECT")] for line in lines[1:]}


def test_get_events_lists_the_namespace_asked_for_and_every_one_with_a_namespace_column(cli: Any) -> None:
    default = cli("get", "events")
    team_b = cli("get", "events", "-n", "team-b")
    every = cli("get", "events", "-A")

    assert "job/small-a-job-0" in objects(default) and "job/solo" not in objects(default)
    assert "job/solo" in objects(team_b) and "job/small-a-job-0" not in objects(team_b)
    assert every[0].split()[0] == "NAMESPACE"
    assert len(every) - 1 == (len(default) - 1) + (len(team_b) - 1)
    assert {line.split()[0] for line in every[1:]} == {"default", "team-b"}


def test_get_events_of_one_object_and_describe_read_its_namespace(cli: Any) -> None:
    listed = objects(cli("get", "events", "hyperjob/small-a", "-n", "team-b"))
    described = "\n".join(cli("describe", "hj", "small-a", "-n", "team-b"))

    assert listed == {"hyperjob/small-a", "job/team-b-small-a-job-0", "podgroup/team-b-small-a-job-0"}
    assert "job/team-b-small-a-job-0" in described and "job/small-a-job-0" not in described
