"""aggregate_status: upstream's shape, conditions only when every child is terminal, sticky, phases."""

from __future__ import annotations

import msgspec
import pytest

from hyperjob.fleetcore import ChildStatus, aggregate_status
from tests.unit.fleetcore.fleet_builders import job_spec, rjob, task, upstream

HJ = upstream("hj", rjob("w", job_spec(task("w", 8)), replicas=2), generation=3)
HJ_MIN1 = upstream("hj", rjob("w", job_spec(task("w", 8)), replicas=2), minAvailable=1)
HJ_REPLACE = upstream("hj", rjob("w", job_spec(task("w", 8)), replicas=2), childFailurePolicy="RePlaceChild")


def kids(*phases: str) -> list[ChildStatus]:
    return [
        ChildStatus(
            name=f"hj-w-{i}",
            replicated_job="w",
            cluster="a" if i == 0 else "b",
            phase=p,
            replicas=8,
            running=8 if p == "Running" else 0,
            succeeded=8 if p == "Completed" else 0,
            failed=1 if p == "Failed" else 0,
            pending=8 if p == "Pending" else 0,
        )
        for i, p in enumerate(phases)
    ]


@pytest.mark.parametrize(
    ("hj", "phases", "kwargs", "phase", "condition"),
    [
        pytest.param(HJ, ("Pending", "Pending"), {"admitted": False}, "Pending", None, id="not-admitted"),
        pytest.param(HJ, ("Pending", "Pending"), {}, "Admitted", None, id="admitted-placing"),
        pytest.param(HJ, ("Running", "Pending"), {}, "Admitted", None, id="below-min-available"),
        pytest.param(HJ_MIN1, ("Running", "Pending"), {}, "Running", None, id="min-available-1-running"),
        pytest.param(HJ, ("Running", "Running"), {}, "Running", None, id="all-running"),
        pytest.param(HJ, ("Completed", "Running"), {}, "Running", None, id="one-done-no-condition-yet"),
        pytest.param(
            HJ,
            ("Completed", "Completed"),
            {},
            "Completed",
            ("Completed", "AllChildVCJobsCompleted"),
            id="all-completed",
        ),
        pytest.param(HJ, ("Failed", "Running"), {}, "Failed", None, id="failed-child-others-still-aborting"),
        pytest.param(
            HJ, ("Failed", "Aborted"), {}, "Failed", ("Failed", "SomeChildVCJobsUnsuccessful"), id="failed-all-terminal"
        ),
        pytest.param(HJ_REPLACE, ("Failed", "Running"), {}, "Admitted", None, id="replace-policy-not-failed"),
        pytest.param(
            HJ, ("Aborted", "Aborted"), {"lifecycle": "Suspended"}, "Suspended", None, id="suspended-no-condition"
        ),
        pytest.param(HJ, ("Running", "Running"), {"lifecycle": "Restarting"}, "Restarting", None, id="restarting"),
        pytest.param(HJ, ("Running", "Running"), {"lifecycle": "Terminating"}, "Terminating", None, id="terminating"),
    ],
)
def test_phase_and_conditions(hj, phases: tuple, kwargs: dict, phase: str, condition: tuple | None) -> None:
    status = aggregate_status(hj, kids(*phases), **kwargs)
    assert status.phase == phase
    assert [(c.type, c.reason) for c in status.conditions] == ([condition] if condition else [])


def test_conditions_are_sticky() -> None:
    done = aggregate_status(HJ, kids("Completed", "Completed"), now=10.0)
    later = aggregate_status(HJ, kids("Completed", "Failed"), previous=done, now=20.0)
    assert later.phase == "Completed" and later.conditions == done.conditions
    assert later.conditions[0].last_transition_time == 10.0


def test_upstream_shape_with_counts_placement_and_generation() -> None:
    status = aggregate_status(HJ, kids("Running", "Pending"), waiting_reason="cluster b lacks nvidia.com/gpu")
    encoded = msgspec.to_builtins(status)
    assert encoded["splitCount"] == 2 and encoded["observedGeneration"] == 3
    assert encoded["placement"] == {"a": 8, "b": 8}
    assert encoded["waitingReason"] == "cluster b lacks nvidia.com/gpu"
    (rj,) = encoded["replicatedJobsStatus"]
    assert rj["name"] == "w" and rj["running"] == 8 and rj["pending"] == 8
    assert rj["jobStates"]["hj-w-0"]["phase"] == "Running"


def test_a_replicated_jobs_status_encodes_exactly_as_upstreams() -> None:
    """name, jobStates, then the counters (shared ``PodCounts``) in upstream's order."""
    children = [msgspec.structs.replace(k, terminating=1, unknown=2) for k in kids("Running", "Completed")]
    (replicated,) = aggregate_status(HJ, children).replicated_jobs_status
    assert msgspec.json.encode(replicated) == (
        b'{"name":"w","jobStates":{'
        b'"hj-w-0":{"phase":"Running","reason":"","message":"","lastTransitionTime":0.0},'
        b'"hj-w-1":{"phase":"Completed","reason":"","message":"","lastTransitionTime":0.0}},'
        b'"pending":0,"running":8,"succeeded":8,"failed":0,"terminating":2,"unknown":4}'
    )


def test_a_child_status_stored_before_the_counters_were_shared_reads_the_same() -> None:
    stored = (
        b'{"name":"hj-w-0","replicated_job":"w","cluster":"a","phase":"Running","reason":"r","message":"",'
        b'"last_transition_time":2.5,"replicas":8,"pending":1,"running":7,"succeeded":0,"failed":0,'
        b'"terminating":0,"unknown":0}'
    )
    child = msgspec.json.decode(stored, type=ChildStatus)
    assert (child.name, child.replicas, child.pending, child.running) == ("hj-w-0", 8, 1, 7)
    assert msgspec.json.encode(child) == stored


def test_waiting_reason_is_dropped_once_running() -> None:
    assert aggregate_status(HJ, kids("Running", "Running"), waiting_reason="x").waiting_reason == ""


def test_a_waiting_child_says_why_its_hyperjob_waits_until_it_runs() -> None:
    why = "32/32 tasks in gang unschedulable: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu"
    waiting = [msgspec.structs.replace(k, message=why if k.cluster == "b" else "") for k in kids("Running", "Pending")]
    status = aggregate_status(HJ, waiting)
    assert (status.phase, status.waiting_reason) == ("Admitted", f"child hj-w-1 on cluster b: {why}")
    assert aggregate_status(HJ, waiting, waiting_reason="queue q is full").waiting_reason == "queue q is full"
    running = [msgspec.structs.replace(k, phase="Running") for k in waiting]
    assert aggregate_status(HJ, running).waiting_reason == ""  # a message left on a running child is stale
    done = [msgspec.structs.replace(k, phase="Completed", succeeded=8) for k in waiting]
    assert aggregate_status(HJ, done).waiting_reason == ""
