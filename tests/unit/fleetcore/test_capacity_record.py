"""The fleet's capacity record (``records.Capacity``, the splitter's and the global-scheduler's)
keeps each cluster's newest summary by the cluster's own time: a summary redelivered or held up on
the bus arrives after a newer one and must not put back room that is taken since."""

from __future__ import annotations

from hyperjob import events
from hyperjob.records.capacity import Capacity

GPU = "nvidia.com/gpu"


def summary(at: float, free_gpus: float, ready: int = 1, cluster: str = "c") -> events.ClusterCapacityReported:
    return events.ClusterCapacityReported(
        event_id=f"{cluster}-{at}-{free_gpus}",
        occurred_at=at,
        producer="cluster-scheduler",
        cluster=cluster,
        allocatable={GPU: 8.0},
        free={GPU: free_gpus},
        nodes=1,
        ready_nodes=ready,
    )


def test_an_older_summary_arriving_after_a_newer_one_changes_nothing() -> None:
    capacity = Capacity()
    assert capacity.report(summary(10.0, free_gpus=8.0), arrived=100.0)
    assert capacity.report(summary(20.0, free_gpus=0.0), arrived=101.0)  # a job took the cluster
    assert not capacity.report(summary(10.0, free_gpus=8.0), arrived=102.0)  # the first, redelivered
    assert capacity.clusters["c"].free == {GPU: 0.0}
    assert capacity.clusters["c"].last_report == 101.0  # an old word is no new sign of life


def test_an_older_summary_without_a_ready_node_does_not_mark_the_cluster_unready() -> None:
    capacity = Capacity()
    capacity.report(summary(20.0, free_gpus=8.0), arrived=100.0)
    capacity.report(summary(10.0, free_gpus=0.0, ready=0), arrived=101.0)
    assert capacity.clusters["c"].ready and capacity.unready == set()


def test_summaries_of_equal_time_are_kept_in_arrival_order() -> None:
    capacity = Capacity()
    capacity.report(summary(10.0, free_gpus=8.0), arrived=100.0)
    assert capacity.report(summary(10.0, free_gpus=4.0), arrived=101.0)
    assert capacity.clusters["c"].free == {GPU: 4.0} and capacity.clusters["c"].last_report == 101.0


def test_a_late_summary_still_counts_as_the_fleet_heard_and_other_clusters_keep_theirs() -> None:
    capacity = Capacity()
    capacity.report(summary(20.0, free_gpus=0.0, cluster="a"), arrived=100.0)
    capacity.report(summary(5.0, free_gpus=8.0, cluster="b"), arrived=104.0)  # b's clock is its own
    capacity.report(summary(15.0, free_gpus=8.0, cluster="a"), arrived=106.0)
    assert capacity.clusters["a"].free == {GPU: 0.0} and capacity.clusters["b"].free == {GPU: 8.0}
    assert capacity.newest == 106.0  # the bus delivers: nobody's silence grows meanwhile
