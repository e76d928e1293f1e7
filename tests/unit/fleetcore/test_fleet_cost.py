"""Cost as a policy (issue 28, what to build 4): clusters declare their price per resource-hour,
``splitPolicy.prefer: cost`` chooses among the plans that fit the one whose whole job costs least,
and the plan's estimated cost per hour is known (``plan_cost``) for ``describe``."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from hyperjob import api, fleetcore
from hyperjob.fleetcore import ClusterCapacity, SplitPlan, Waiting, plan_cost, plan_split, pod_cost
from tests.unit.fleetcore.fleet_builders import GI, cluster, conceptual, fleet, job_spec, task

GPU = "nvidia.com/gpu"


def priced(c: ClusterCapacity, gpu: float | None) -> ClusterCapacity:
    return msgspec.structs.replace(c, prices={} if gpu is None else {GPU: gpu})


# cheap: 1 node × 8 GPUs at 1/h; mid: 2 × 8 at 2/h; pricey: 4 × 8 at 4/h (the roomiest).
FLEET = fleet(
    priced(cluster("cheap", nodes=1), 1.0), priced(cluster("mid", nodes=2), 2.0), priced(cluster("pricey"), 4.0)
)


def plan(gpus: int, split: dict[str, Any], clusters: dict[str, ClusterCapacity] = FLEET, **spec: Any) -> SplitPlan:
    result = plan_split(conceptual("hj", job_spec(task("w", gpus, cpu="1")), split, **spec), clusters)
    assert isinstance(result, SplitPlan), result
    return result


def test_a_pod_costs_its_request_at_the_clusters_prices() -> None:
    request = {"cpu": 4.0, "memory": 16 * GI, GPU: 2.0, "pods": 1.0}
    assert pod_cost(request, {"cpu": 0.5, "memory": 0.25, GPU: 3.0}) == 4 * 0.5 + 16 * 0.25 + 2 * 3.0
    assert pod_cost(request, {}) == fleetcore.cost.UNPRICED  # no prices: no known cost


def test_auto_alone_takes_the_roomiest_cluster_prefer_cost_the_cheapest_plan() -> None:
    assert plan(16, {"mode": "auto"}).placement == {"pricey": 16}
    assert plan(16, {"mode": "auto", "prefer": "cost"}).placement == {"cheap": 8, "mid": 8}  # 24/h, mid alone 32/h


def test_the_cheapest_plan_honours_max_domains() -> None:
    assert plan(16, {"mode": "auto", "prefer": "cost"}, maxDomains=1).placement == {"mid": 16}


def test_the_cheapest_plan_honours_spread_constraints() -> None:
    clusters = fleet(
        priced(cluster("cheap", nodes=1, labels={"region": "eu"}), 1.0),
        priced(cluster("mid", nodes=2, labels={"region": "eu"}), 2.0),
        priced(cluster("pricey", labels={"region": "us"}), 4.0),
    )
    spread = {"spreadConstraints": [{"spreadByLabel": "region", "minGroups": 2}]}
    result = plan(16, {"mode": "auto", "prefer": "cost"}, clusters, clusterAffinity=spread)
    # One GPU in us meets the spread; the rest stays in eu where it is cheap: 8 + 14 + 4 = 26/h.
    assert result.placement == {"cheap": 8, "mid": 7, "pricey": 1}


def test_a_cluster_without_prices_comes_after_every_priced_one() -> None:
    clusters = {**FLEET, "unknown": priced(cluster("unknown", nodes=8), None)}
    assert plan(8, {"mode": "auto", "prefer": "cost"}, clusters).placement == {"cheap": 8}


def test_a_job_no_plan_can_hold_waits_with_the_room_it_saw() -> None:
    result = plan_split(conceptual("hj", job_spec(task("w", 64)), {"mode": "auto", "prefer": "cost"}), FLEET)
    assert isinstance(result, Waiting)
    assert "needs 64 replicas" in result.reason


def test_plan_cost_is_the_whole_jobs_price_per_hour() -> None:
    hyperjob = conceptual("hj", job_spec(task("w", 16, cpu="1")), {"mode": "auto", "prefer": "cost"})
    result = plan(16, {"mode": "auto", "prefer": "cost"})
    children = [(c.replicated_job, c.cluster, c.tasks) for c in result.children]
    prices = {name: c.prices for name, c in FLEET.items()}
    assert plan_cost(hyperjob, children, prices) == 8 * 1.0 + 8 * 2.0
    assert plan_cost(hyperjob, children, {**prices, "mid": {}}) is None  # a cluster without prices
    assert plan_cost(hyperjob, [], prices) is None  # not planned


@pytest.mark.parametrize(
    ("split", "reason"),
    [
        ({"prefer": "cost"}, "set mode: auto"),
        ({"mode": "static", "prefer": "cost"}, "set mode: auto"),
        ({"mode": "auto", "prefer": "speed"}, ""),
    ],
    ids=["no-mode", "static", "unknown"],
)
def test_a_malformed_prefer_is_refused_naming_the_field(split: dict[str, Any], reason: str) -> None:
    with pytest.raises(api.ManifestError) as caught:
        conceptual("hj", job_spec(task("w", 2)), split)
    assert "splitPolicy.prefer" in str(caught.value)
    assert reason in str(caught.value)
