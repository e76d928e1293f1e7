"""Failover, the child-failure policy, HyperJob commands and plain-job placement."""

from __future__ import annotations

import msgspec
import pytest

from hyperjob import api
from hyperjob.fleetcore import (
    ChildCommand,
    ChildMove,
    ChildWaits,
    ClusterCapacity,
    SetLifecycle,
    SplitPlan,
    Waiting,
    child_failed,
    failover,
    hyperjob_command,
    place_job,
    plain_failover,
    plan_split,
    settle_lifecycle,
)
from tests.unit.fleetcore.fleet_builders import cluster, fleet, job_spec, rjob, task, upstream


def lost(name: str) -> ClusterCapacity:
    """A cluster that went down more than 30 s ago (no Ready node reported since -31 s)."""
    return cluster(name, ready=False, last_report=-31.0)


def hyperjob(policy: str = "FailHyperJob", clusters: list[str] | None = None):
    return upstream("hj", rjob("w", job_spec(task("w", 16)), replicas=2, clusters=clusters), childFailurePolicy=policy)


def placed(hj, clusters) -> SplitPlan:
    plan = plan_split(hj, clusters)
    assert isinstance(plan, SplitPlan), plan
    return plan


def where(plan: SplitPlan) -> dict[str, str]:
    return {c.name: c.cluster for c in plan.children}


def test_children_of_a_silent_cluster_move_keeping_their_names() -> None:
    hj = hyperjob()
    before = fleet(cluster("a", last_report=0.0), cluster("b", last_report=0.0))
    plan = placed(hj, before)
    assert where(plan) == {"hj-w-0": "a", "hj-w-1": "a"}
    later = fleet(cluster("a", last_report=0.0), cluster("b", last_report=40.0))
    moved, decisions = failover(hj, plan, later, now=40.0)
    assert where(moved) == {"hj-w-0": "b", "hj-w-1": "b"}
    assert decisions[0] == ChildMove(child="hj-w-0", from_cluster="a", to_cluster="b", reason="cluster a lost")


def test_a_cluster_down_for_less_than_30s_keeps_its_children() -> None:
    hj = hyperjob()
    plan = placed(hj, fleet(cluster("a"), cluster("b")))
    assert failover(
        hj, plan, fleet(cluster("a", ready=False, last_report=0.0), cluster("b", last_report=29.0)), now=29.0
    ) == (plan, [])


def test_nothing_lost_nothing_moves() -> None:
    hj = hyperjob()
    clusters = fleet(cluster("a", last_report=20.0), cluster("b", last_report=20.0))
    plan = placed(hj, clusters)
    assert failover(hj, plan, clusters, now=40.0) == (plan, [])


def test_no_room_elsewhere_keeps_the_child_where_it_is_with_the_reason_then_moves_it_when_room_appears() -> None:
    hj = hyperjob()
    plan = placed(hj, fleet(cluster("a"), cluster("b")))
    busy = fleet(lost("a"), cluster("b", used_gpus=24))
    waiting, decisions = failover(hj, plan, busy, now=0.0)
    assert waiting == plan  # withdrawn, it would be killed if its cluster came back: it waits there
    assert [type(d) for d in decisions] == [ChildWaits, ChildWaits]
    assert "no eligible cluster can hold it now" in decisions[0].reason
    again, decisions = failover(hj, waiting, fleet(lost("a"), cluster("b")), now=2.0)
    assert where(again) == {"hj-w-0": "b", "hj-w-1": "b"} and len(decisions) == 2


def test_moves_of_one_round_take_their_room_from_one_working_view() -> None:
    """Two HyperJobs failing over in one round never count the same free GPUs twice."""
    first, second = hyperjob(), upstream("hj2", rjob("w", job_spec(task("w", 16)), replicas=2))
    plan1, plan2 = placed(first, fleet(cluster("a"), cluster("b"))), placed(second, fleet(cluster("a"), cluster("b")))
    clusters = fleet(lost("a"), cluster("b"))  # b has room for two 16-GPU children, not four
    working = dict(clusters)
    moved1, _ = failover(first, plan1, clusters, now=0.0, working=working)
    moved2, decisions = failover(second, plan2, clusters, now=0.0, working=working)
    assert where(moved1) == {"hj-w-0": "b", "hj-w-1": "b"}
    assert where(moved2) == {"hj2-w-0": "a", "hj2-w-1": "a"}
    assert all(isinstance(d, ChildWaits) for d in decisions)


def test_a_rate_limited_move_waits_for_a_later_round() -> None:
    hj = hyperjob()
    plan = placed(hj, fleet(cluster("a"), cluster("b")))
    budget = iter([True, False])
    moved, decisions = failover(hj, plan, fleet(lost("a"), cluster("b")), now=0.0, may_move=lambda: next(budget))
    assert where(moved) == {"hj-w-0": "b", "hj-w-1": "a"}
    assert isinstance(decisions[1], ChildWaits) and "rate-limited" in decisions[1].reason


def test_finished_children_are_not_moved() -> None:
    hj = hyperjob()
    plan = placed(hj, fleet(cluster("a"), cluster("b")))
    moved, _ = failover(hj, plan, fleet(lost("a"), cluster("b")), now=0.0, finished={"hj-w-0"})
    assert where(moved) == {"hj-w-0": "a", "hj-w-1": "b"}


def test_failover_respects_cluster_names() -> None:
    hj = hyperjob(clusters=["a", "b"])
    plan = placed(hj, fleet(cluster("a"), cluster("b"), cluster("c")))
    moved, decisions = failover(hj, plan, fleet(lost("a"), cluster("b", used_gpus=32), cluster("c")), now=0.0)
    assert where(moved)["hj-w-0"] == "a" and isinstance(decisions[0], ChildWaits)


PHASES = {"hj-w-0": "Failed", "hj-w-1": "Running"}


def test_child_failure_fails_the_hyperjob_by_default() -> None:
    hj = hyperjob()
    plan = placed(hj, fleet(cluster("a"), cluster("b")))
    _, decisions = child_failed(hj, plan, "hj-w-0", fleet(cluster("a"), cluster("b")), 0.0, PHASES)
    assert decisions == [ChildCommand(child="hj-w-1", action="AbortJob", reason="child hj-w-0 failed (FailHyperJob)")]


def test_child_failure_can_restart_the_whole_hyperjob() -> None:
    hj = hyperjob("RestartHyperJob")
    plan = placed(hj, fleet(cluster("a"), cluster("b")))
    _, decisions = child_failed(hj, plan, "hj-w-0", fleet(cluster("a"), cluster("b")), 0.0, PHASES)
    assert isinstance(decisions[0], SetLifecycle) and decisions[0].lifecycle == "Restarting"
    assert [d.child for d in decisions[1:] if isinstance(d, ChildCommand)] == ["hj-w-0", "hj-w-1"]


def test_child_failure_can_replace_the_child_on_another_cluster() -> None:
    hj = hyperjob("RePlaceChild")
    clusters = fleet(cluster("a"), cluster("b"))
    plan = placed(hj, clusters)
    moved, decisions = child_failed(hj, plan, "hj-w-0", clusters, 0.0, PHASES)
    assert decisions == [
        ChildMove(child="hj-w-0", from_cluster="a", to_cluster="b", reason="child hj-w-0 failed (RePlaceChild)")
    ]
    assert where(moved) == {"hj-w-0": "b", "hj-w-1": "a"}


@pytest.mark.parametrize(
    ("action", "phases", "lifecycle", "commands"),
    [
        pytest.param(
            "suspend", {"x-0": "Running", "x-1": "Completed"}, "Suspended", [("x-0", "AbortJob")], id="suspend"
        ),
        pytest.param("resume", {"x-0": "Aborted", "x-1": "Completed"}, "Resuming", [("x-0", "ResumeJob")], id="resume"),
        pytest.param(
            "abort",
            {"x-0": "Running", "x-1": "Pending"},
            "Active",
            [("x-0", "AbortJob"), ("x-1", "AbortJob")],
            id="abort",
        ),
        pytest.param("restart", {"x-0": "Running"}, "Restarting", [("x-0", "RestartJob")], id="restart"),
    ],
)
def test_hyperjob_commands(action: str, phases: dict, lifecycle: str, commands: list) -> None:
    new, decisions = hyperjob_command(action, phases)  # type: ignore[arg-type]
    assert new == lifecycle
    assert [(d.child, d.action) for d in decisions if isinstance(d, ChildCommand)] == commands


def test_restarting_settles_when_no_child_is_restarting() -> None:
    assert settle_lifecycle("Restarting", {"x-0": "Restarting"}) == "Restarting"
    assert settle_lifecycle("Restarting", {"x-0": "Pending"}) == "Active"


def test_plain_job_goes_where_it_fits_else_where_it_could_reclaim() -> None:
    spec = msgspec.convert(job_spec(task("w", 2, gpus=8)), type=api.JobSpec)
    assert place_job(spec, fleet(cluster("a", used_gpus=24), cluster("b"))) == "b"
    full = fleet(cluster("a", used_gpus=32), cluster("b", used_gpus=30))
    assert place_job(spec, full) == "a"  # most room for one pod, then name: both 0 → a
    assert isinstance(place_job(spec, full, wait_for_fit=True), Waiting)
    # No cluster could ever host it: with one eligible cluster it lands there (Volcano keeps it
    # Pending, as with one cluster); with two, it waits.
    assert place_job(spec, fleet(cluster("a", gpus=4))) == "a"
    assert isinstance(place_job(spec, fleet(cluster("a", gpus=4), cluster("b", gpus=4))), Waiting)


def test_a_plain_job_on_a_lost_cluster_moves_where_it_fits_now() -> None:
    spec = msgspec.convert(job_spec(task("w", 2, gpus=4)), type=api.JobSpec)
    job = api.Job(metadata=api.ObjectMeta(name="j"), spec=spec)
    clusters = {
        "a": cluster("a", last_report=0.0),
        "b": cluster("b", last_report=30.0),
        "c": cluster("c", used_gpus=30, last_report=30.0),
    }
    [move] = plain_failover(job, "j", "a", clusters, now=31.0)
    assert (move.child, move.from_cluster, move.to_cluster) == ("j", "a", "b")
    assert plain_failover(job, "j", "a", clusters, now=31.0, finished=True) == []
    assert plain_failover(job, "j", "b", clusters, now=31.0) == []  # its cluster reports: it stays


def test_resuming_ends_once_no_child_is_aborted_and_shows_no_condition_meanwhile() -> None:
    assert settle_lifecycle("Resuming", {"x-0": "Aborted", "x-1": "Completed"}) == "Resuming"
    assert settle_lifecycle("Resuming", {"x-0": "Restarting", "x-1": "Completed"}) == "Resuming"
    assert settle_lifecycle("Resuming", {"x-0": "Running", "x-1": "Completed"}) == "Active"
