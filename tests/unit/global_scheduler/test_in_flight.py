"""What the global scheduler dispatched and no cluster summary shows yet takes room (issue 28, why 1)."""

from __future__ import annotations

import msgspec
import pytest

from hyperjob import api, fleetcore, records
from hyperjob.services.global_scheduler import domain

GPU = "nvidia.com/gpu"


def cluster(name: str, used_gpus: int = 0) -> fleetcore.ClusterCapacity:
    """One node of 64 cpu and 8 GPUs, ``used_gpus`` of them (and a cpu each) taken."""
    alloc = {"cpu": 64.0, GPU: 8.0, "pods": 110.0}
    free = {"cpu": 64.0 - used_gpus, GPU: 8.0 - used_gpus, "pods": 110.0 - used_gpus}
    node = fleetcore.NodeCapacity(name=f"{name}-n0", free=free, allocatable=alloc)
    return fleetcore.ClusterCapacity(name=name, free=free, allocatable=alloc, nodes=(node,))


def fleet(*clusters: fleetcore.ClusterCapacity) -> dict[str, fleetcore.ClusterCapacity]:
    return {c.name: c for c in clusters}


def _job(gpus: int) -> dict[str, object]:
    container = {"name": "t", "image": "x", "resources": {"requests": {"cpu": "1", GPU: "1"}}}
    job = api.decode(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "j"},
            "spec": {"tasks": [{"name": "t", "replicas": gpus, "template": {"spec": {"containers": [container]}}}]},
        }
    )
    return api.encode(job)


def sent(child: str, at: float, **fields: object) -> records.PlacementDoc:
    base = records.PlacementDoc(
        child=child, owner=child, plain=True, job=_job(8), state="Dispatched", cluster="a", dispatched_at=at
    )
    return msgspec.structs.replace(base, **fields)


def free_gpus(capacity: dict[str, fleetcore.ClusterCapacity]) -> dict[str, float]:
    return {name: c.free[GPU] for name, c in capacity.items()}


def test_a_child_sent_lately_takes_its_room_until_it_runs() -> None:
    live = fleet(cluster("a"), cluster("b"))
    taken = domain.InFlight().taken(dict(live), [sent("x", at=10.0)], since=0.0)
    assert free_gpus(taken) == {"a": 0.0, "b": 8.0}


@pytest.mark.parametrize(
    "placement",
    [
        sent("x", at=10.0, running=True),
        sent("x", at=10.0, finished=True),
        sent("x", at=10.0, state="Waiting"),
        sent("x", at=-1.0),  # sent before ``since``: its summary has had time to count it
    ],
    ids=["running", "finished", "not-sent", "settled"],
)
def test_a_child_the_summary_counts_or_that_was_not_sent_takes_nothing(placement: records.PlacementDoc) -> None:
    live = fleet(cluster("a"))
    assert free_gpus(domain.InFlight().taken(dict(live), [placement], since=0.0)) == {"a": 8.0}


def test_a_child_the_summary_already_counts_is_not_taken_twice() -> None:
    live = fleet(cluster("a", used_gpus=8))
    assert free_gpus(domain.InFlight().taken(dict(live), [sent("x", at=10.0)], since=0.0)) == {"a": 0.0}


def waiting_on(cluster: str) -> records.PlacementDoc:
    return records.PlacementDoc(child="one-job-0", owner="one", job=_job(8), clusters=[cluster])


def test_a_planned_child_that_cannot_fit_its_cluster_learns_of_another_with_room() -> None:
    """Why 1, second half: a child does not wait for ever where it was planned while another
    cluster could start it now."""
    working = fleet(cluster("a", used_gpus=8), cluster("b"))
    assert domain.room_elsewhere(waiting_on("a"), working, 0.0) == "b"


@pytest.mark.parametrize(
    "working",
    [fleet(cluster("a", used_gpus=8), cluster("b", used_gpus=1)), fleet(cluster("a", used_gpus=8))],
    ids=["no-other-cluster-has-room", "no-other-cluster"],
)
def test_no_room_elsewhere_keeps_the_child_where_it_was_planned(
    working: dict[str, fleetcore.ClusterCapacity],
) -> None:
    assert domain.room_elsewhere(waiting_on("a"), working, 0.0) == ""
