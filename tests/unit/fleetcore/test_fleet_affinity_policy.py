"""Cluster choice as a policy, the soft and the spreading parts (issue 28, what to build 3):
``clusterAffinity.preferred`` terms with weights order the clusters where the job fits, and
``clusterAffinity.spreadConstraints`` (Karmada's) bound how many label values a plan spans."""

from __future__ import annotations

from typing import Any

import pytest

from hyperjob import api
from hyperjob.fleetcore import SplitPlan, Waiting, plan_split
from tests.unit.fleetcore.fleet_builders import cluster, conceptual, fleet, job_spec, rjob, task, upstream

# Three regions; us-1 is the roomiest (8 nodes), the others hold 4 nodes × 8 GPUs.
REGIONS = fleet(
    cluster("eu-1", labels={"region": "eu", "tier": "spot"}),
    cluster("eu-2", labels={"region": "eu", "tier": "reserved"}),
    cluster("us-1", nodes=8, labels={"region": "us", "tier": "spot"}),
    cluster("ap-1", labels={"region": "ap", "tier": "reserved"}),
)


def plan(affinity: dict[str, Any], gpus: int, split: dict[str, Any] | None = None) -> SplitPlan | Waiting:
    hyperjob = conceptual("hj", job_spec(task("w", gpus)), split or {"mode": "auto"}, clusterAffinity=affinity)
    return plan_split(hyperjob, REGIONS)


def placement(result: SplitPlan | Waiting) -> dict[str, int]:
    assert isinstance(result, SplitPlan), result
    return result.placement


def reserved(weight: int) -> dict[str, Any]:
    return {"weight": weight, "preference": {"labelSelector": {"matchLabels": {"tier": "reserved"}}}}


def test_without_preference_auto_takes_the_roomiest_cluster() -> None:
    assert placement(plan({}, 8)) == {"us-1": 8}


def test_a_preferred_term_wins_over_room_when_the_preferred_cluster_fits() -> None:
    assert placement(plan({"preferred": [reserved(50)]}, 8)) == {"ap-1": 8}  # ap-1 before eu-2: the name


def test_weights_add_up_and_the_heaviest_sum_wins() -> None:
    by_name = {"weight": 30, "preference": {"clusterNames": ["eu-2"]}}
    assert placement(plan({"preferred": [reserved(50), by_name]}, 8)) == {"eu-2": 8}
    by_name_heavier = {"weight": 90, "preference": {"clusterNames": ["eu-1"]}}
    assert placement(plan({"preferred": [reserved(50), by_name_heavier]}, 8)) == {"eu-1": 8}


def test_a_preference_never_beats_feasibility() -> None:
    # 48 GPUs: no 32-GPU preferred cluster holds it alone; the fewest clusters still win (us-1 alone).
    assert placement(plan({"preferred": [reserved(100)]}, 48)) == {"us-1": 48}


def test_a_preference_orders_the_fan_out_children() -> None:
    hyperjob = upstream("hj", rjob("w", job_spec(task("w", 8)), replicas=1))
    rj = api.ReplicatedJob(
        name="w",
        template_spec=hyperjob.spec.replicated_jobs[0].template_spec,
        cluster_affinity=api.ClusterAffinity(
            preferred=[api.PreferredClusterTerm(weight=10, preference=api.ClusterTerm(cluster_names=["eu-1"]))]
        ),
    )
    spec = api.HyperJobSpec(replicated_jobs=[rj])
    result = plan_split(api.HyperJob(metadata=hyperjob.metadata, spec=spec), REGIONS)
    assert placement(result) == {"eu-1": 8}


def regions_of(result: SplitPlan | Waiting) -> set[str]:
    return {REGIONS[c].labels["region"] for c in placement(result)}


def test_spread_min_groups_spans_that_many_regions_though_one_cluster_could_hold_it() -> None:
    result = plan({"spreadConstraints": [{"spreadByLabel": "region", "minGroups": 2}]}, 16)
    assert len(regions_of(result)) == 2
    assert sum(placement(result).values()) == 16


def test_spread_by_field_region_reads_the_region_label() -> None:
    result = plan({"spreadConstraints": [{"spreadByField": "region", "minGroups": 3}]}, 24)
    assert regions_of(result) == {"eu", "us", "ap"}


def test_spread_max_groups_keeps_a_static_split_in_one_region() -> None:
    affinity = {
        "labelSelector": {"matchExpressions": [{"key": "region", "operator": "In", "values": ["eu", "ap"]}]},
        "spreadConstraints": [{"spreadByLabel": "region", "maxGroups": 1}],
    }
    assert len(regions_of(plan({**affinity, "spreadConstraints": []}, 16, {"mode": "static"}))) == 2
    result = plan(affinity, 16, {"mode": "static"})
    assert placement(result) == {"ap-1": 16}  # the first region in eligible order, whole


def test_spread_min_groups_splits_a_fan_out_over_regions() -> None:
    template = job_spec(task("w", 8))
    affinity = {"spreadConstraints": [{"spreadByLabel": "region", "minGroups": 2}]}
    hyperjob = upstream("hj", {**rjob("w", template, replicas=2), "clusterAffinity": affinity})
    assert len(regions_of(plan_split(hyperjob, REGIONS))) == 2  # packed on us-1 without it


def test_a_spread_no_fleet_can_meet_waits_saying_which_constraint() -> None:
    result = plan({"spreadConstraints": [{"spreadByLabel": "region", "minGroups": 4}]}, 8, {"mode": "static"})
    assert isinstance(result, Waiting)
    assert "spreadConstraints[0]: needs at least 4 region value(s)" in result.reason


def test_a_cluster_without_the_spread_label_is_not_eligible() -> None:
    clusters = {**REGIONS, "bare": cluster("bare", nodes=16)}
    hyperjob = conceptual(
        "hj",
        job_spec(task("w", 8)),
        {"mode": "auto"},
        clusterAffinity={"spreadConstraints": [{"spreadByLabel": "region"}]},
    )
    assert "bare" not in placement(plan_split(hyperjob, clusters))


@pytest.mark.parametrize(
    ("affinity", "field", "reason"),
    [
        ({"preferred": [reserved(0)]}, "clusterAffinity.preferred[0].weight", "between 1 and 100"),
        ({"preferred": [reserved(101)]}, "clusterAffinity.preferred[0].weight", "between 1 and 100"),
        ({"preferred": [{"weight": 5, "preference": {"labelSelector": {"matchExpressions": [
            {"key": "tier", "operator": "In"}]}}}]},
         "clusterAffinity.preferred[0].preference.labelSelector.matchExpressions[0].values", "needs at least one"),
        ({"spreadConstraints": [{"minGroups": 2}]},
         "clusterAffinity.spreadConstraints[0].spreadByLabel", "exactly one"),
        ({"spreadConstraints": [{"spreadByLabel": "region", "spreadByField": "zone"}]},
         "clusterAffinity.spreadConstraints[0].spreadByLabel", "exactly one"),
        ({"spreadConstraints": [{"spreadByLabel": "region", "minGroups": 0}]},
         "clusterAffinity.spreadConstraints[0].minGroups", "at least 1"),
        ({"spreadConstraints": [{"spreadByLabel": "region", "minGroups": 3, "maxGroups": 2}]},
         "clusterAffinity.spreadConstraints[0].maxGroups", "less than minGroups 3"),
        ({"spreadConstraints": [{"spreadByField": "planet"}]}, "spreadByField", ""),
    ],
    ids=["weight-0", "weight-101", "preferred-selector", "no-label", "both", "min-0", "max-below-min", "bad-field"],
)  # fmt: skip
def test_a_malformed_preference_or_spread_is_refused_naming_its_field(
    affinity: dict[str, Any], field: str, reason: str
) -> None:
    with pytest.raises(api.ManifestError) as caught:
        conceptual("hj", job_spec(task("w", 2)), {}, clusterAffinity=affinity)
    assert field in str(caught.value)
    assert reason in str(caught.value)
