"""Every message round-trips through the decoders the services build, and ids are deterministic."""

import typing

import msgspec
import pytest

from hyperjob import events
from hyperjob.events import subjects


def sample(message_type: type[events.Message]) -> events.Message:
    """An instance with every required field filled with a value of its type."""
    values = {"str": "x", "int": 3, "float": 1.5, "bool": True}
    kwargs = {}
    for field in msgspec.structs.fields(message_type):
        if field.required:
            kind = getattr(field.type, "__name__", "")
            if kind in values:
                kwargs[field.name] = values[kind]
            elif "dict" in str(field.type):
                kwargs[field.name] = (
                    {"cpu": 1.0} if "float" in str(field.type) else {"k": {"v": 1}} if "Any" in str(field.type) else {}
                )
            elif "list" in str(field.type):
                kwargs[field.name] = []
            elif typing.get_origin(field.type) is typing.Literal:
                kwargs[field.name] = typing.get_args(field.type)[0]
            else:
                kwargs[field.name] = "x"
    return message_type(**kwargs)


@pytest.mark.parametrize("message_type", events.ALL_MESSAGES, ids=lambda t: t.__name__)
def test_message_round_trips_through_the_catalogue_decoder(message_type):
    message = sample(message_type)
    decoder = events.decoder(*events.ALL_MESSAGES)
    assert decoder.decode(events.encode(message)) == message


def test_tags_are_unique_and_versioned():
    tags = [msgspec.inspect.type_info(t).tag for t in events.ALL_MESSAGES]
    assert len(tags) == len(set(tags))
    assert all(tag.rsplit(".", 1)[-1].startswith("v") for tag in tags)


def test_a_decoder_for_some_types_rejects_the_others():
    decoder = events.decoder(events.PodsBound)
    other = sample(events.StartPods)
    with pytest.raises(msgspec.ValidationError):
        decoder.decode(events.encode(other))


V1_PHASE = events.JobPhaseChangedV1(
    event_id="e1",
    occurred_at=2.5,
    producer="job-controller",
    correlation_id="r1",
    cluster="c1",
    job="train-w-0",
    hyperjob="train",
    replicated_job="w",
    old="Pending",
    new="Running",
    reason="pods running",
    attempt=2,
    retry_count=1,
    running=6,
    pending=1,
    terminating=1,
    unknown=3,
)


def test_a_v1_phase_message_is_read_as_the_current_form():
    phase = events.decoder(events.JobPhaseChanged, events.PodsBound).decode(events.encode(V1_PHASE))
    assert phase == events.JobPhaseChanged(
        event_id="e1",
        occurred_at=2.5,
        producer="job-controller",
        correlation_id="r1",
        cluster="c1",
        job="train-w-0",
        hyperjob="train",
        replicated_job="w",
        old="Pending",
        new="Running",
        reason="pods running",
        attempt=2,
        retry_count=1,
        counts=events.PodCounts(pending=1, running=6, terminating=1, unknown=3),
    )


def test_the_catalogue_decoder_reads_retired_tags_too():
    assert isinstance(events.decoder(*events.ALL_MESSAGES).decode(events.encode(V1_PHASE)), events.JobPhaseChanged)


def test_a_retired_form_is_read_only_where_its_current_form_is_handled():
    with pytest.raises(msgspec.ValidationError):
        events.decoder(events.PodsBound).decode(events.encode(V1_PHASE))


def test_the_decoders_union_covers_the_retired_forms_it_reads():
    union = typing.get_args(events.decoder(events.JobPhaseChanged).type)
    assert set(union) == {events.JobPhaseChanged, events.JobPhaseChangedV1}


def test_pod_counts_sum_every_counter():
    parts = [events.PodCounts(pending=1, unknown=2), events.PodCounts(running=3, failed=1, unknown=1)]
    assert events.PodCounts.summed(parts) == events.PodCounts(pending=1, running=3, failed=1, unknown=3)
    assert events.PodCounts.summed([]) == events.PodCounts()


def test_derived_ids_are_deterministic_and_distinct_per_step():
    assert events.derive_id("e1", "bind") == events.derive_id("e1", "bind")
    assert events.derive_id("e1", "bind") != events.derive_id("e1", "start")
    assert events.new_request_id() != events.new_request_id()


def test_every_subject_belongs_to_exactly_one_stream():
    routed = [
        subjects.APPLY,
        subjects.PLACE_CHILDREN,
        subjects.dispatch("a"),
        subjects.pods_bound("a"),
        subjects.capacity("a"),
        subjects.job_phase("a"),
        subjects.start_pods("a"),
        subjects.pod_phases("a"),
        subjects.heartbeat("a", "n"),
        subjects.dlq("x"),
        subjects.result("r"),
        subjects.queue_config("q"),
        subjects.job_state("a", "j.x", 0),
        subjects.node_status("a", "n"),
        subjects.HYPERJOB_SPEC,
        "state.splitter.hyperjob.x",
    ]
    for subject in routed:
        owners = [s.name for s in subjects.STREAMS if any(_matches(p, subject) for p in s.subjects)]
        assert len(owners) == 1, (subject, owners)


def _matches(pattern: str, subject: str) -> bool:
    p, s = pattern.split("."), subject.split(".")
    for i, token in enumerate(p):
        if token == ">":
            return len(s) > i
        if i >= len(s) or (token != "*" and token != s[i]):
            return False
    return len(p) == len(s)


def test_names_with_dots_stay_one_subject_token():
    assert subjects.job_state("c", "my.job", 2) == "jobstate.c.my%2Ejob.2"
    assert subjects.token("a%b.c") == "a%25b%2Ec"


def test_each_request_subject_carries_its_own_request_type_in_every_namespace_form() -> None:
    for request_type in (events.ApplyManifest, events.DeleteObject, events.CommandHyperJob, events.CommandObject):
        for subject in (request_type.subject, subjects.in_namespace(request_type.subject, "team-a")):
            assert events.request_type_on(subject) is request_type, subject
    assert events.request_type_on("hj.result.abc") is None and events.request_type_on("hj.manifest") is None
    assert events.request_type_on("hj.manifest.applyx.team-a") is None  # a token, not a prefix
