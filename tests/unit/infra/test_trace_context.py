"""One trace per HyperJob, in process: which trace a unit of work joins (``telemetry.spans``), and
the journey ``hyperjob trace`` prints (``cli.journey``)."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hyperjob import events
from hyperjob.bus import Delivery
from hyperjob.cli import journey
from hyperjob.telemetry import spans
from hyperjob.telemetry.spans import ServiceTracing, keys_of, pod_sampled, span_name

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
OTHER = "00-11111111111111111111111111111111-2222222222222222-01"


def _tracer(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(spans, "_tracer", provider.get_tracer("test"))
    return exporter


def _dispatch(child: str = "llm-job-0") -> events.DispatchChild:
    return events.DispatchChild(event_id="d", child=child, cluster="c1", hyperjob="llm", job={})


def test_keys_name_the_hyperjob_first_then_its_jobs() -> None:
    apply = events.ApplyManifest(
        event_id="a", manifest={"kind": "HyperJob", "metadata": {"name": "x", "namespace": "t"}}
    )
    assert keys_of(apply) == ["t/x"]
    assert keys_of(_dispatch()) == ["llm", "llm-job-0"]
    queue = events.QueueChanged(event_id="q", name="global-ai")
    assert keys_of(queue) == []  # a queue's name is no HyperJob's trace


def test_span_names_say_what_the_service_does() -> None:
    admitted = events.OwnerAdmitted(event_id="o", name="llm", queue="q")
    assert span_name("splitter", admitted) == "split"
    assert span_name("status-aggregator", admitted) == "status"
    assert span_name("job-controller", _dispatch()) == "create job"
    assert span_name("x", events.HyperJobDeleted(event_id="h", name="llm")) == "handle HyperJobDeleted"


def test_a_message_handled_joins_its_producers_trace_and_what_it_emits_carries_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    exporter = _tracer(monkeypatch)
    tracing = ServiceTracing("job-controller")
    out = events.JobRemoved(event_id="r", cluster="c1", job="llm-job-0", hyperjob="llm")
    with tracing.handling(_dispatch(), {"traceparent": TRACEPARENT}):
        tracing.note(out.event_id)
    (span,) = exporter.get_finished_spans()
    assert (span.name, format(span.context.trace_id, "032x")) == ("create job", TRACEPARENT.split("-")[1])
    assert span.attributes is not None and span.attributes["hyperjob.name"] == "llm"
    carried = tracing.headers_for(out)
    assert carried is not None and carried["traceparent"].split("-")[2] == format(span.context.span_id, "016x")


def test_a_round_works_in_the_trace_its_object_last_ran_in(monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = _tracer(monkeypatch)
    tracing = ServiceTracing("global-scheduler")
    with tracing.handling(_dispatch(), {"traceparent": TRACEPARENT}):
        pass
    with tracing.span("admit", "llm", queue="q"):
        pass
    summary = events.JobRemoved(event_id="s", cluster="c1", job="llm-job-0")  # built outside any work span
    first, admit = exporter.get_finished_spans()
    assert admit.parent is not None and admit.parent.span_id == first.context.span_id
    carried = tracing.headers_for(summary)
    assert carried is not None and TRACEPARENT.split("-")[1] in carried["traceparent"]


def test_another_trace_does_not_take_over_an_object_but_a_new_request_does(monkeypatch: pytest.MonkeyPatch) -> None:
    _tracer(monkeypatch)
    tracing = ServiceTracing("splitter")
    with tracing.handling(_dispatch(), {"traceparent": TRACEPARENT}):
        pass
    with tracing.handling(_dispatch(), {"traceparent": OTHER}):  # e.g. a report batching two jobs
        pass
    assert _trace(tracing, "llm") == TRACEPARENT.split("-")[1]
    apply = events.ApplyManifest(event_id="a", manifest={"kind": "HyperJob", "metadata": {"name": "llm"}})
    with tracing.handling(apply, {"traceparent": OTHER}):
        pass
    assert _trace(tracing, "llm") == OTHER.split("-")[1]


def _job_state(created: float) -> events.JobState:
    return events.JobState(
        event_id=f"js-{created}", cluster="c1", job="llm-job-0", uid=f"u{created}", version=1, created=created
    )


def test_a_job_created_again_under_its_name_is_a_new_trace_for_the_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = _tracer(monkeypatch)
    tracing = ServiceTracing("cluster-scheduler")
    tracing.learn(_job_state(1.0), {"traceparent": TRACEPARENT})
    tracing.learn(_job_state(1.0), {"traceparent": OTHER})  # the same life, reported in another's batch
    with tracing.span("bind gang", "llm-job-0"):
        pass
    tracing.learn(_job_state(2.0), {"traceparent": OTHER})  # deleted, created again: another life
    with tracing.span("bind gang", "llm-job-0"):
        pass
    first, second = exporter.get_finished_spans()
    assert format(first.context.trace_id, "032x") == TRACEPARENT.split("-")[1]
    assert format(second.context.trace_id, "032x") == OTHER.split("-")[1]


def test_a_hyperjob_submitted_again_after_its_deletion_is_a_new_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    _tracer(monkeypatch)
    tracing = ServiceTracing("global-scheduler")

    def submitted(created: float) -> events.OwnerSubmitted:
        return events.OwnerSubmitted(event_id=f"s-{created}", name="llm", queue="q", request={}, created=created)

    with tracing.handling(submitted(1.0), {"traceparent": TRACEPARENT}):
        pass
    with tracing.handling(submitted(1.0), {"traceparent": OTHER}):  # a re-submission of the same life
        pass
    assert _trace(tracing, "llm") == TRACEPARENT.split("-")[1]
    with tracing.handling(submitted(2.0), {"traceparent": OTHER}):
        pass
    assert _trace(tracing, "llm") == OTHER.split("-")[1]


def _phase(new: str) -> events.JobPhaseChanged:
    return events.JobPhaseChanged(event_id=f"p-{new}", cluster="c1", job="llm-job-0", hyperjob="llm", old="", new=new)


def test_a_phase_the_global_scheduler_only_notes_gets_no_span_and_what_it_emits_joins_the_producers_trace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    exporter = _tracer(monkeypatch)
    tracing = ServiceTracing("global-scheduler")
    out = events.JobRemoved(event_id="r", cluster="c1", job="llm-job-0", hyperjob="llm")
    with tracing.handling(_phase("Running"), {"traceparent": TRACEPARENT}) as span:
        assert not span.is_recording()
        tracing.note(out.event_id)
    assert exporter.get_finished_spans() == ()
    carried = tracing.headers_for(out)
    assert carried is not None and carried["traceparent"] == TRACEPARENT


def test_the_splitter_notes_a_childs_progress_but_traces_its_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = _tracer(monkeypatch)
    tracing = ServiceTracing("splitter")
    with tracing.handling(_phase("Running"), {"traceparent": TRACEPARENT}):
        pass
    with tracing.handling(_phase("Failed"), {"traceparent": TRACEPARENT}):
        pass
    assert [s.name for s in exporter.get_finished_spans()] == ["child phase"]
    assert spans.only_noted("status-aggregator", _phase("Running"))  # its status joins the trace all the same
    assert not spans.only_noted("status-aggregator", _phase("Completed"))  # the HyperJob's end keeps its span


def _trace(tracing: ServiceTracing, key: str) -> str:
    headers = tracing.headers_for(events.HyperJobDeleted(event_id=f"probe-{key}", name=key))
    assert headers is not None
    return headers["traceparent"].split("-")[1]


def test_pod_sampling_follows_the_ratio_and_is_the_same_everywhere() -> None:
    pods = [f"llm-job-0-worker-{i}" for i in range(2000)]
    sampled = [p for p in pods if pod_sampled(p, {"HYPERJOB_TRACE_POD_SAMPLE": "0.1"})]
    assert 100 < len(sampled) < 300
    assert sampled == [p for p in pods if pod_sampled(p, {"HYPERJOB_TRACE_POD_SAMPLE": "0.1"})]
    assert not any(pod_sampled(p, {"HYPERJOB_TRACE_POD_SAMPLE": "0"}) for p in pods)
    assert all(pod_sampled(p, {"HYPERJOB_TRACE_POD_SAMPLE": "1"}) for p in pods)


def _stored(message: events.Message, at: float, traceparent: str = TRACEPARENT) -> tuple[Delivery, float]:
    return Delivery(subject="x", data=events.encode(message), headers={"traceparent": traceparent}), at


def test_the_journey_is_the_hyperjobs_steps_in_order_with_its_trace_id() -> None:
    stored = [
        _stored(events.OwnerAdmitted(event_id="2", producer="global-scheduler", name="llm", queue="q"), 2.0),
        _stored(
            events.OwnerSubmitted(event_id="1", producer="splitter", name="llm", queue="q", request={}, created=0), 1.0
        ),
        _stored(events.OwnerAdmitted(event_id="3", producer="global-scheduler", name="other", queue="q"), 1.5, OTHER),
        _stored(
            events.JobPhaseChanged(
                event_id="4",
                producer="job-controller",
                cluster="c1",
                job="llm-job-0",
                hyperjob="llm",
                old="",
                new="Running",
            ),
            5.0,
        ),
    ]
    found = journey.steps(stored, "llm")
    assert [(s.service, s.reason) for s in found] == [
        ("splitter", "Submitted"),
        ("global-scheduler", "Admitted"),
        ("job-controller", "Running"),
    ]
    shown = journey.render(found, "llm")
    assert f"trace id: {TRACEPARENT.split('-')[1]}" in shown
    rows = shown.splitlines()[5:]
    assert [r.split()[:2] for r in rows[:3]] == [["hyperjob/llm", "-"], ["├─", "queue:"], ["└─", "job/llm-job-0"]]
    assert "1.000s" in rows[1] and rows[2].index("◆") > rows[1].index("█")  # the waterfall moves right with time
