"""Data locality (issue 28, what to build 4): a HyperJob names the data sets it reads
(``spec.dataSets``), clusters declare the ones they hold (and their bandwidth to where the others
live), and placement prefers the clusters that hold more of them, then the better linked, among
those where the job fits (after feasibility, after preferred weights)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from hyperjob import api, events
from hyperjob.cli.config import load_config
from hyperjob.cli.up import _cluster_env
from hyperjob.fleetcore import ClusterCapacity, SplitPlan, plan_split
from hyperjob.fleetcore.affinity import data_nearness
from hyperjob.records.capacity import cluster_capacity
from hyperjob.servicekit.config import load_settings
from hyperjob.services.cluster_scheduler.config import Settings
from tests.unit.fleetcore.fleet_builders import cluster, conceptual, fleet, job_spec, rjob, task, upstream


def holding(c: ClusterCapacity, *data_sets: str) -> ClusterCapacity:
    return msgspec.structs.replace(c, data_sets=data_sets)


# compute is the roomiest and holds nothing; lake holds both data sets, shelf one.
FLEET = fleet(
    cluster("compute", nodes=8),
    holding(cluster("lake", nodes=1, labels={"tier": "spot"}), "imagenet", "c4"),
    holding(cluster("shelf", nodes=2, labels={"tier": "reserved"}), "c4"),
)


def placement(gpus: int, split: dict[str, Any] | None = None, **spec: Any) -> dict[str, int]:
    hyperjob = conceptual("hj", job_spec(task("w", gpus)), split or {"mode": "auto"}, **spec)
    result = plan_split(hyperjob, FLEET)
    assert isinstance(result, SplitPlan), result
    return result.placement


def test_without_data_sets_auto_takes_the_roomiest() -> None:
    assert placement(8) == {"compute": 8}


def test_the_cluster_holding_more_of_the_data_is_preferred() -> None:
    assert placement(8, dataSets=["imagenet", "c4"]) == {"lake": 8}
    assert placement(8, dataSets=["c4"]) == {"shelf": 8}  # lake and shelf hold it: shelf has more room


def test_feasibility_comes_first() -> None:
    assert placement(16, dataSets=["imagenet"]) == {"compute": 16}  # lake holds 8 GPUs, one cluster holds 16


def test_preferred_weights_come_before_the_data() -> None:
    reserved = {"weight": 10, "preference": {"labelSelector": {"matchLabels": {"tier": "reserved"}}}}
    assert placement(8, dataSets=["imagenet", "c4"], clusterAffinity={"preferred": [reserved]}) == {"shelf": 8}


def test_a_fan_out_goes_to_the_data_first() -> None:
    hyperjob = upstream("hj", rjob("w", job_spec(task("w", 8)), replicas=1), dataSets=["imagenet"])
    result = plan_split(hyperjob, FLEET)
    assert isinstance(result, SplitPlan)
    assert result.placement == {"lake": 8}


def linked(c: ClusterCapacity, **gbps: float) -> ClusterCapacity:
    return msgspec.structs.replace(c, data_links=gbps)


def test_of_clusters_holding_as_much_the_one_with_the_fastest_slowest_link_is_preferred() -> None:
    wanted = {"imagenet", "c4"}
    assert data_nearness(wanted, holding(cluster("a"), "imagenet", "c4")) == (2, float("inf"))
    assert data_nearness(wanted, linked(holding(cluster("a"), "c4"), imagenet=40)) == (1, 40.0)
    assert data_nearness(wanted, linked(cluster("a"), imagenet=400, c4=10)) == (0, 10.0)  # reading crosses both
    assert data_nearness(wanted, linked(cluster("a"), imagenet=400)) == (0, 0.0)  # no link to c4
    links = fleet(cluster("compute", nodes=8), linked(cluster("far", nodes=2), imagenet=10),
                  linked(cluster("near", nodes=1), imagenet=400))  # fmt: skip
    hyperjob = conceptual("hj", job_spec(task("w", 8)), {"mode": "auto"}, dataSets=["imagenet"])
    result = plan_split(hyperjob, links)
    assert isinstance(result, SplitPlan) and result.placement == {"near": 8}


def test_holding_a_data_set_comes_before_any_link_to_it() -> None:
    fleet_ = fleet(linked(cluster("linked", nodes=4), imagenet=1000), holding(cluster("holds", nodes=1), "imagenet"))
    hyperjob = conceptual("hj", job_spec(task("w", 8)), {"mode": "auto"}, dataSets=["imagenet"])
    result = plan_split(hyperjob, fleet_)
    assert isinstance(result, SplitPlan) and result.placement == {"holds": 8}


def test_data_sets_and_links_travel_from_the_up_config_to_the_capacity_fleetcore_reads(tmp_path: Path) -> None:
    path = tmp_path / "up.yaml"
    path.write_text("clusters:\n- name: a\n  dataSets: [imagenet]\n  dataLinks: {c4: 100}\n")
    config = load_config(str(path)).clusters[0]
    env = {k: v for k, v in _cluster_env(config, "1s").items() if k.startswith("CLUSTER_SCHEDULER_")}
    settings = load_settings(Settings, "CLUSTER_SCHEDULER", environ=env)
    report = events.ClusterCapacityReported(
        event_id="e", cluster="a", allocatable={}, free={}, nodes=0, ready_nodes=0,
        data_sets=settings.data_sets, data_links=settings.data_links,
    )  # fmt: skip
    capacity = cluster_capacity(report, 0.0)
    assert (capacity.data_sets, capacity.data_links) == (("imagenet",), {"c4": 100.0})


@pytest.mark.parametrize("data_sets", ["imagenet", [1], [""], ["c4", "c4"]])
def test_malformed_data_sets_are_refused_naming_the_field(data_sets: Any) -> None:
    with pytest.raises(api.ManifestError, match="dataSets"):
        conceptual("hj", job_spec(task("w", 2)), {}, dataSets=data_sets)
