"""``hyperjob trace``: one life of a HyperJob per trace, drawn as spans with durations and parents
(``cli.journey``), and a Jaeger link only where a Jaeger answers."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from click.testing import CliRunner

from hyperjob import events
from hyperjob.bus import Delivery
from hyperjob.cli import journey
from hyperjob.cli import main as cli_main
from hyperjob.client import eventlog
from tests.unit.cli import simulated

FIRST = "00-11111111111111111111111111111111-2222222222222222-01"
SECOND = "00-33333333333333333333333333333333-4444444444444444-01"


def _stored(message: events.Message, at: float, traceparent: str) -> tuple[Delivery, float]:
    return Delivery(subject="x", data=events.encode(message), headers={"traceparent": traceparent}), at


def _life(born: float, traceparent: str, end: str = "Completed") -> list[tuple[Delivery, float]]:
    """One life of HyperJob ``llm`` (one child on c1) from its submission at ``born``."""
    t = born

    def phase(new: str, old: str, at: float) -> tuple[Delivery, float]:
        changed = events.JobPhaseChanged(
            event_id=f"{born}-{new}",
            producer="job-controller",
            cluster="c1",
            job="llm-0",
            hyperjob="llm",
            old=old,
            new=new,
        )
        return _stored(changed, at, traceparent)

    podgroup = events.PodGroupPhaseChanged(
        event_id=f"{born}p", producer="cluster-scheduler", cluster="c1", job="llm-0", phase="Running"
    )
    pods = [events.PodRef(pod="llm-0-w-0", uid="u", node="n1")]
    return [
        _stored(
            events.OwnerSubmitted(
                event_id=f"{born}s", producer="splitter", name="llm", queue="q", request={}, created=born
            ),
            t,
            traceparent,
        ),
        _stored(
            events.OwnerAdmitted(event_id=f"{born}a", producer="global-scheduler", name="llm", queue="q"),
            t + 1,
            traceparent,
        ),
        _stored(
            events.DispatchChild(
                event_id=f"{born}d", producer="global-scheduler", child="llm-0", cluster="c1", hyperjob="llm", job={}
            ),
            t + 1.5,
            traceparent,
        ),
        _stored(
            events.PodsBound(event_id=f"{born}b", producer="cluster-scheduler", cluster="c1", job="llm-0", pods=pods),
            t + 3,
            traceparent,
        ),
        _stored(podgroup, t + 3.5, traceparent),  # the podgroup runs before its job says so
        phase("Running", "Pending", t + 4),
        phase(end, "Running", t + 10),
        _stored(events.HyperJobDeleted(event_id=f"{born}x", producer="splitter", name="llm"), t + 12, traceparent),
    ]


def test_a_name_applied_again_after_its_deletion_is_a_second_life_with_its_own_trace() -> None:
    found = journey.steps(_life(100.0, FIRST) + _life(200.0, SECOND, end="Failed"), "llm")
    first, second = journey.lives(found, "llm")
    assert {s.trace_id for s in first} == {FIRST.split("-")[1]}
    assert {s.trace_id for s in second} == {SECOND.split("-")[1]}
    assert (first[0].at, first[-1].at, second[0].at) == (100.0, 112.0, 200.0)


def test_a_resubmission_of_the_same_life_stays_in_it() -> None:
    again = events.OwnerSubmitted(
        event_id="again", producer="splitter", name="llm", queue="q", request={}, created=100.0, generation=2
    )
    found = journey.steps([*_life(100.0, FIRST), _stored(again, 105.0, FIRST)], "llm")
    assert len(journey.lives(found, "llm")) == 1


def test_the_waterfall_nests_each_childs_binding_and_run_under_it_with_durations() -> None:
    [life] = journey.lives(journey.steps(_life(100.0, FIRST), "llm"), "llm")
    root = journey.waterfall(life, "llm")
    assert (root.name, root.start, root.duration) == ("hyperjob/llm", 100.0, 12.0)
    top = {s.name: s for s in root.children}
    assert top["queue: Submitted → Admitted"].duration == 1.0
    assert top["split: Admitted → 1 Dispatched"].duration == 0.5
    job = top["job/llm-0 on c1"]
    assert (job.start, job.end) == (101.5, 110.0)
    assert [(s.name, s.service, s.duration) for s in job.children] == [
        ("schedule on c1: Dispatched → Scheduled", "cluster-scheduler", 1.5),
        ("start pods: Scheduled → Running", "job-controller", 1.0),
        ("Running: podgroup Running", "cluster-scheduler", 0.0),
        ("run: Running → Completed", "job-controller", 6.0),
    ]


def test_the_rendered_waterfall_is_the_latest_life_and_names_the_others() -> None:
    found = journey.steps(_life(100.0, FIRST) + _life(200.0, SECOND), "llm")
    shown = journey.render(found, "llm", ("http://jaeger:16686", True)).splitlines()
    assert shown[0].startswith("HyperJob llm, life 2 of 2")
    assert shown[1] == f"trace id: {SECOND.split('-')[1]}"
    assert shown[2] == f"jaeger:   http://jaeger:16686/trace/{SECOND.split('-')[1]}"
    assert shown[3] == f"life 1: trace {FIRST.split('-')[1]} (--life 1)"
    rows = shown[5:]
    assert rows[0].split()[:4] == ["SPAN", "SERVICE", "START", "DURATION"]
    assert rows[1].startswith("hyperjob/llm ") and "12.000s" in rows[1]
    run = next(r for r in rows if r.startswith("│  └─ run: Running → Completed"))
    assert "+10.000s" not in run and "6.000s" in run  # nested under its job, with its duration
    bind = next(r for r in rows if "schedule on c1" in r)
    assert bind.index("█") < run.index("█")  # the waterfall moves right with time


@pytest.mark.parametrize(
    ("given", "endpoint", "url"),
    [
        (None, None, None),
        (None, "http://collector:4318", "http://collector:16686"),
        ("http://ui:8080/", "http://collector:4318", "http://ui:8080"),
    ],
    ids=["nothing exported", "the endpoint's host", "the url given"],
)
def test_jaeger_is_looked_for_where_spans_are_sent(given: str | None, endpoint: str | None, url: str | None) -> None:
    assert journey.jaeger_url(given, endpoint) == url


class _Jaeger:
    """A Jaeger query API that knows one service."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                body = b'{"data": ["splitter"]}' if self.path == "/api/services" else b""
                self.send_response(200 if body else 404)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


@pytest.fixture
def jaeger() -> Iterator[str]:
    found = _Jaeger()
    thread = threading.Thread(target=found.server.serve_forever, daemon=True)
    thread.start()
    yield found.url
    found.server.shutdown()
    found.server.server_close()


SCENARIO = simulated.scenario(
    "two-lives",
    "4",
    simulated.hyperjob("small-a", "default", duration="3s"),
    "  - {at: 8s, delete: {kind: HyperJob, name: small-a}}\n",
    simulated.hyperjob("small-a", "default", duration="3s").replace("at: 0s", "at: 12s"),
)


@pytest.fixture(scope="module")
def system() -> simulated.Reader:
    return simulated.run(SCENARIO)


def _trace(system: simulated.Reader, monkeypatch: pytest.MonkeyPatch, *args: str) -> list[str]:
    monkeypatch.setattr(cli_main, "with_client", lambda work: asyncio.run(work(system)))
    result = CliRunner().invoke(cli_main.main, ["trace", "small-a", *args])
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


def test_trace_draws_the_latest_life_of_a_recreated_hyperjob_as_spans(
    system: simulated.Reader, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    shown = _trace(system, monkeypatch)
    assert shown[0].startswith("HyperJob small-a, life 2 of 2")
    names = [row[: shown[5].index("SERVICE")].rstrip() for row in shown[6:]]
    assert "├─ queue: Submitted → Admitted" in names
    assert "├─ job/small-a-job-0 on cluster-a" in names
    assert "│  ├─ schedule on cluster-a: Dispatched → Scheduled" in names
    assert "│  ├─ run: Running → Completed" in names
    assert not any("Deleted" in n or "Removed" in n for n in names)  # the first life's end is not in the second
    first = _trace(system, monkeypatch, "--life", "1")
    assert first[0].startswith("HyperJob small-a, life 1 of 2")
    assert any("Deleted" in row for row in first)


class _Log:
    """A client whose event log holds two lives of ``llm``, published with their traceparents."""

    class bus:  # noqa: N801 - the client's attribute
        @staticmethod
        async def stored(subject: str) -> list[tuple[Delivery, float]]:
            return _life(100.0, FIRST) + _life(200.0, SECOND) if subject == eventlog.SUBJECTS[0] else []


def _trace_llm(monkeypatch: pytest.MonkeyPatch, *args: str) -> list[str]:
    monkeypatch.setattr(cli_main, "with_client", lambda work: asyncio.run(work(_Log())))
    result = CliRunner().invoke(cli_main.main, ["trace", "llm", *args])
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


def test_trace_links_to_a_jaeger_that_answers_and_says_when_none_does(
    monkeypatch: pytest.MonkeyPatch, jaeger: str
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    second = SECOND.split("-")[1]
    assert _trace_llm(monkeypatch, "--jaeger", jaeger)[2] == f"jaeger:   {jaeger}/trace/{second}"
    assert _trace_llm(monkeypatch)[2].startswith("jaeger:   none configured")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")  # no Jaeger beside it
    assert _trace_llm(monkeypatch)[2] == "jaeger:   no Jaeger answers at http://127.0.0.1:16686: no link"
