"""What renews a cluster's fleet lease (issue 33): the cluster's own time on its latest summary with a
Ready node, or on a live node's beat while its control plane does not say that no node is Ready."""

from __future__ import annotations

from hyperjob import events
from hyperjob.records.capacity import Capacity


def summary(at: float, ready: int = 1) -> events.ClusterCapacityReported:
    return events.ClusterCapacityReported(
        event_id=f"s{at}",
        occurred_at=at,
        producer="t",
        cluster="c",
        allocatable={},
        free={},
        nodes=1,
        ready_nodes=ready,
    )


def beat(at: float, silent: list[str] | None = None) -> events.AgentHeartbeat:
    return events.AgentHeartbeat(
        event_id=f"b{at}", occurred_at=at, producer="t", cluster="c", agent="a", nodes=1, silent=silent or []
    )


def test_summaries_and_beats_renew_the_lease_from_the_clusters_own_clock() -> None:
    capacity = Capacity()
    capacity.report(summary(5.0), arrived=100.0)
    assert capacity.basis == {"c": 5.0}  # the cluster's time, not the arrival
    capacity.beat(beat(7.0), arrived=102.0)  # its control plane hangs, its node beats on
    assert capacity.basis == {"c": 7.0} and capacity.nodes_heard == {"c": 102.0}
    capacity.beat(beat(6.0), arrived=103.0)  # a late beat never shortens it
    assert capacity.basis == {"c": 7.0}


def test_no_ready_node_said_by_the_control_plane_stops_the_beats_from_renewing_it() -> None:
    capacity = Capacity()
    capacity.report(summary(5.0), arrived=100.0)
    capacity.report(summary(9.0, ready=0), arrived=104.0)
    capacity.beat(beat(10.0), arrived=105.0)
    assert capacity.basis == {"c": 5.0}
    capacity.report(summary(12.0), arrived=107.0)
    assert capacity.basis == {"c": 12.0}


def test_a_beat_whose_nodes_are_all_silent_is_no_sign_of_life() -> None:
    capacity = Capacity()
    capacity.beat(beat(3.0, silent=["n1"]), arrived=50.0)
    assert capacity.basis == {} and capacity.nodes_heard == {}
