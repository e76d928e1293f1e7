"""Events from the event log (``hyperjob get events``, ``describe``'s Events): what each message
says about which object, repeats folded with a count, and the choice of one object's events."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from click.testing import CliRunner

from hyperjob import events
from hyperjob.cli import views
from hyperjob.cli.main import main
from hyperjob.client import eventlog
from hyperjob.services.status_aggregator.domain import waiting_reason_code

_ids = itertools.count()


def msg(type_: type[events.Message], **fields: Any) -> events.Message:
    return type_(event_id=f"e{next(_ids)}", **fields)


def story() -> list[tuple[Any, float]]:
    """A HyperJob that waits for its queue, is admitted, runs a child on c1 that loses a node and
    moves to c2."""
    pods = [events.PodRef(pod="train-w-0-0", uid="u1", node="n3", reason="nodeDown")]
    return [
        (msg(events.OwnerSubmitted, name="train", queue="gpu", request={"nvidia.com/gpu": 16}, created=1.0), 10.0),
        (msg(events.ChildPlacementWaiting, child="", hyperjob="train", reason="queue gpu is full: 16 asked"), 11.0),
        (msg(events.ChildPlacementWaiting, child="", hyperjob="train", reason="queue gpu is full: 16 asked"), 12.0),
        (msg(events.OwnerAdmitted, name="train", queue="gpu"), 20.0),
        (msg(events.DispatchChild, child="train-w-0", cluster="c1", hyperjob="train", job={}), 21.0),
        (msg(events.HyperJobStatusChanged, name="train", phase="Admitted", status={}), 21.5),
        (msg(events.PodGroupPhaseChanged, cluster="c1", job="train-w-0", phase="Pending", reason="0/4 nodes"), 22.0),
        (
            msg(events.JobPhaseChanged, cluster="c1", job="train-w-0", hyperjob="train", old="Pending", new="Running"),
            30,
        ),
        (msg(events.HyperJobStatusChanged, name="train", phase="Running", status={}), 31.0),
        (msg(events.HyperJobStatusChanged, name="train", phase="Running", status={"restarts": 0}), 32.0),
        (msg(events.PodsEvicted, cluster="c1", job="train-w-0", pods=pods), 40.0),
        (msg(events.MoveChild, child="train-w-0", to_cluster="c2", reason="cluster c1 lost"), 41.0),
        (msg(events.NodeStatus, cluster="c1", node="n3", allocatable={}, ready=False, reason="node-down"), 42.0),
        (msg(events.OwnerSubmitted, name="other", queue="cpu", request={"cpu": 1.0}, created=1.0), 50.0),
    ]


def test_each_message_is_an_event_on_the_objects_it_concerns() -> None:
    found = eventlog.derive(story())
    shown = {(e.object, e.type, e.reason) for e in found}
    assert ("hyperjob/train", "Normal", "Submitted") in shown
    assert ("queue/gpu", "Normal", "Submitted") in shown
    assert ("hyperjob/train", "Warning", "QueueLimit") in shown
    assert ("queue/gpu", "Warning", "QueueLimit") in shown  # the queue it waits for says so too
    assert ("hyperjob/train", "Normal", "Admitted") in shown
    assert ("job/train-w-0", "Normal", "Dispatched") in shown
    assert ("podgroup/train-w-0", "Warning", "Unschedulable") in shown  # Volcano's condition
    assert ("job/train-w-0", "Normal", "Running") in shown
    assert ("job/train-w-0", "Warning", "Evicted") in shown
    assert ("node/n3", "Warning", "Evicted") in shown
    assert ("job/train-w-0", "Warning", "Failover") in shown
    assert ("node/n3", "Warning", "NodeNotReady") in shown


def test_repeats_fold_into_one_event_with_a_count_and_status_news_only_on_a_phase_change() -> None:
    found = eventlog.derive(story())
    waiting = [e for e in found if e.object == "hyperjob/train" and e.reason == "QueueLimit"]
    assert len(waiting) == 1
    assert (waiting[0].count, waiting[0].first, waiting[0].last) == (2, 11.0, 12.0)
    running = [e for e in found if e.object == "hyperjob/train" and e.reason == "Running"]
    assert len(running) == 1 and running[0].count == 1  # the second status only changed counts
    assert running[0].message == "phase Admitted → Running"
    assert [e.last for e in found] == sorted(e.last for e in found)  # oldest first


def test_a_hyperjobs_events_include_its_childrens_and_a_kind_filters() -> None:
    found = eventlog.derive(story())
    mine = eventlog.about(found, "hyperjob/train")
    objects = {e.object for e in mine}
    assert {"hyperjob/train", "job/train-w-0", "podgroup/train-w-0"} <= objects
    assert not any(o.startswith("queue/") or o == "hyperjob/other" for o in objects)
    # A Job's events hold its podgroup's (named after it): why it waits.
    assert {e.object for e in eventlog.about(found, "job/train-w-0")} == {"job/train-w-0", "podgroup/train-w-0"}
    assert {e.object for e in eventlog.about(found, "queue/gpu")} == {"queue/gpu"}
    assert {e.object for e in eventlog.about(found, "n3")} == {"node/n3"}
    with pytest.raises(ValueError, match="not 'pods'"):
        eventlog.about(found, "pods/x")


def test_event_rows_show_type_reason_object_message_age_and_count() -> None:
    found = eventlog.derive(story())
    items = [eventlog.item(e, 100.0) for e in eventlog.about(found, "hyperjob/train")]
    assert len({i["name"] for i in items}) == len(items)  # -w tells them apart
    header, rows = views.event_rows(items, wide=True)
    assert header == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE", "CLUSTER", "FIRST SEEN", "COUNT"]
    waiting = next(r for r in rows if r[2] == "QueueLimit")
    assert waiting[1] == "Warning" and waiting[3] == "hyperjob/train" and waiting[-1] == "2"
    assert waiting[4] == "queue gpu is full: 16 asked"  # the count is a column, not in the message


def test_an_undecodable_message_is_not_an_event() -> None:
    class Stored:
        def __init__(self, data: bytes) -> None:
            self.data = data

    good = events.encode(msg(events.OwnerAdmitted, name="a", queue="q"))
    decoded = list(eventlog.decoded([(Stored(b"{not json"), 1.0), (Stored(good), 2.0)]))
    assert [type(m).__name__ for m, _ in decoded] == ["OwnerAdmitted"]


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("queue gpu is Closed", "QueueLimit"),
        ("fleet nvidia.com/gpu: 128 requested, 64 not yet promised", "QueueLimit"),
        ("replicatedJob w: cluster c1 lacks nvidia.com/gpu (asks 128, free 24)", "Unschedulable"),
        ("no cluster fits the whole gang now", "GangNotHeld"),
        ("cross-cluster gang: 1/2 reservations held within 60s; missing g-w-1 on c2", "GangNotHeld"),
        ("replicatedJob w: child gang-w-1: cluster c2 lacks nvidia.com/gpu: needs 8, free 0", "Unschedulable"),
        ("replicatedJob w: child g-w-0: inadmissible: cluster c1 can never hold it", "Inadmissible"),
        (
            "child g-w-0 on cluster c1: 8 pods evicted from NotReady node(s) n3; 8/32 tasks in gang unschedulable",
            "NodeFault",
        ),
        ("train-w-0: cluster c2 is not live", "ClusterLost"),
        ("child train-w-0: a job of that name already exists", "NameConflict"),
        ("something new", "Waiting"),
        ("", ""),
    ],
)
def test_waiting_messages_have_a_reason_code(text: str, code: str) -> None:
    assert waiting_reason_code(text) == code


def test_describe_takes_jobs_queues_and_nodes() -> None:
    result = CliRunner().invoke(main, ["describe", "--help"])
    for kind in ("hyperjob", "job", "queue", "node", "jobflow"):
        assert kind in result.output


def test_a_hyperjob_that_waits_on_for_a_new_reason_gets_an_event_and_a_node_fault_is_named() -> None:
    why = "child t-w-0 on cluster c1: 8 pods evicted from NotReady node(s) n3; 8/32 tasks in gang unschedulable: x"
    found = eventlog.derive(
        [
            (msg(events.HyperJobStatusChanged, name="t", phase="Admitted", status={}), 1.0),
            (msg(events.HyperJobStatusChanged, name="t", phase="Admitted", status={"waitingReason": why}), 2.0),
            (msg(events.HyperJobStatusChanged, name="t", phase="Admitted", status={"waitingReason": why}), 3.0),
            (msg(events.PodGroupPhaseChanged, cluster="c1", job="t-w-0", phase="Unknown", reason=why[27:]), 4.0),
        ]
    )
    shown = [(e.object, e.type, e.reason, e.message, e.count) for e in found]
    assert ("hyperjob/t", "Warning", "NodeFault", why, 1) in shown  # once: the same reason again is no news
    assert ("podgroup/t-w-0", "Warning", "NodeFault", why[27:], 1) in shown
    assert waiting_reason_code("inadmissible: no cluster can ever hold it: ...") == "Inadmissible"
    assert waiting_reason_code("child c on cluster b: 1/1 tasks in gang unschedulable: queue q: 0/4 nodes") == (
        "Unschedulable"
    )
