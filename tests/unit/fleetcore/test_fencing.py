"""Fencing (issue 33): a child moves only once its cluster's fleet lease has surely lapsed, and never
off a cluster whose control plane hung while its nodes still report."""

from __future__ import annotations

import msgspec
import pytest

from hyperjob import api
from hyperjob.fleetcore import (
    CLUSTER_SILENCE_TIMEOUT,
    FLEET_LEASE,
    LEASE_CHECK_PERIOD,
    LEASE_MARGIN,
    ChildMove,
    ChildWaits,
    SplitPlan,
    control_plane_hung,
    failover,
    hung_reason,
    move_after,
    plain_failover,
    plan_split,
)
from tests.unit.fleetcore.fleet_builders import cluster, fleet, job_spec, rjob, task, upstream


def hyperjob():
    return upstream("hj", rjob("w", job_spec(task("w", 16)), replicas=2))


def placed_on_a(hj) -> SplitPlan:
    plan = plan_split(hj, fleet(cluster("a"), cluster("b")))
    assert isinstance(plan, SplitPlan) and {c.cluster for c in plan.children} == {"a"}
    return plan


def test_the_fleet_waits_the_lease_and_its_margin_before_a_silent_cluster_is_lost() -> None:
    assert CLUSTER_SILENCE_TIMEOUT == move_after() == FLEET_LEASE + LEASE_MARGIN
    # The margin covers at least the job-controller's check, so the pods are stopped before a move.
    assert LEASE_MARGIN >= LEASE_CHECK_PERIOD


def test_a_margin_that_cannot_cover_the_lease_check_is_refused() -> None:
    with pytest.raises(ValueError, match="margin"):
        move_after(20.0, LEASE_CHECK_PERIOD / 2)
    with pytest.raises(ValueError, match="lease"):
        move_after(0.0, 10.0)
    assert move_after(5.0, 3.0) == 8.0


def test_no_child_moves_while_its_cluster_may_still_hold_its_lease() -> None:
    hj = hyperjob()
    plan = placed_on_a(hj)
    silent_since_0 = fleet(cluster("a", last_report=0.0), cluster("b", last_report=FLEET_LEASE + 5.0))
    # The lease lapsed on the cluster at 20 s, but its pods may still be stopping: nothing moves.
    assert failover(hj, plan, silent_since_0, now=FLEET_LEASE + 5.0) == (plan, [])
    later = fleet(cluster("a", last_report=0.0), cluster("b", last_report=move_after() + 0.5))
    _, decisions = failover(hj, plan, later, now=move_after() + 0.5)
    assert [type(d) for d in decisions] == [ChildMove, ChildMove]


def test_a_silent_control_plane_whose_nodes_report_is_hung_not_lost() -> None:
    a = cluster("a", last_report=0.0)
    now = move_after() + 5.0
    assert control_plane_hung(a, nodes_heard=now - 1.0, now=now)
    assert not control_plane_hung(a, nodes_heard=None, now=now)  # nodes never heard: lost
    assert not control_plane_hung(a, nodes_heard=now - move_after() - 1.0, now=now)  # nodes silent too
    assert not control_plane_hung(cluster("a", last_report=now - 1.0), nodes_heard=now, now=now)  # not silent


def test_children_of_a_hung_control_plane_stay_and_say_why() -> None:
    hj = hyperjob()
    plan = placed_on_a(hj)
    now = move_after() + 15.0
    clusters = fleet(cluster("a", last_report=0.0), cluster("b", last_report=now))
    kept, decisions = failover(hj, plan, clusters, now=now, nodes_heard={"a": now - 2.0})
    assert kept == plan
    assert decisions == [ChildWaits(child=c.name, cluster="a", reason=hung_reason("a")) for c in plan.children]
    assert "hung, not lost" in hung_reason("a")
    # Its nodes fall silent too: the whole cluster is lost, and the children move.
    moved, decisions = failover(hj, plan, clusters, now=now, nodes_heard={"a": now - move_after() - 1.0})
    assert {c.cluster for c in moved.children} == {"b"}
    assert all(isinstance(d, ChildMove) for d in decisions)


def test_a_plain_job_on_a_hung_control_plane_stays() -> None:
    spec = msgspec.convert(job_spec(task("w", 2, gpus=4)), type=api.JobSpec)
    job = api.Job(metadata=api.ObjectMeta(name="p"), spec=spec)
    now = move_after() + 1.0
    clusters = fleet(cluster("a", last_report=0.0), cluster("b", last_report=now))
    assert plain_failover(job, "p", "a", clusters, now, nodes_heard={"a": now}) == [
        ChildWaits(child="p", cluster="a", reason=hung_reason("a"))
    ]
    assert [type(d) for d in plain_failover(job, "p", "a", clusters, now)] == [ChildMove]


def test_a_control_plane_that_reports_no_ready_node_is_not_hung_but_lost() -> None:
    now = move_after() + 5.0
    # Its summaries go on (no Ready node): the control plane answers, so the cluster is lost.
    reporting = msgspec.structs.replace(cluster("a", ready=False, last_report=0.0), last_summary=now - 1.0)
    assert not control_plane_hung(reporting, nodes_heard=now, now=now)
