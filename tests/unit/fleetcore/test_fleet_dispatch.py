"""Dispatch strategies (issue 28, what to build 5), as Kueue's MultiKueue has them: ``AllAtOnce``
(the default: every eligible cluster) and ``Incremental`` (the best ``initialClusters`` first,
``widenBy`` more each ``widenAfter`` the HyperJob has waited)."""

from __future__ import annotations

from typing import Any

import pytest

from hyperjob import api
from hyperjob.fleetcore import SplitPlan, Waiting, plan_split
from tests.unit.fleetcore.fleet_builders import cluster, conceptual, fleet, job_spec, task

# a is full; b and c have room, c the most; the job prefers a.
FLEET = fleet(cluster("a", used_gpus=32), cluster("b", nodes=2), cluster("c"))
PREFER_A = {"preferred": [{"weight": 50, "preference": {"clusterNames": ["a"]}}]}


def plan(dispatch: dict[str, Any] | None, waited: float | None) -> SplitPlan | Waiting:
    spec: dict[str, Any] = {"clusterAffinity": PREFER_A}
    if dispatch is not None:
        spec["dispatch"] = dispatch
    hyperjob = conceptual("hj", job_spec(task("w", 8)), {"mode": "auto"}, **spec)
    return plan_split(hyperjob, FLEET, waited=waited)


INCREMENTAL = {"strategy": "Incremental", "initialClusters": 1, "widenBy": 1, "widenAfter": "30s"}


def test_all_at_once_is_the_default_and_a_full_preferred_cluster_is_passed_over() -> None:
    result = plan(None, waited=0.0)
    assert isinstance(result, SplitPlan)
    assert result.placement == {"c": 8}


def test_incremental_tries_only_the_best_cluster_first_and_says_so() -> None:
    result = plan(INCREMENTAL, waited=29.0)
    assert isinstance(result, Waiting)
    assert "room now: a 0 (" in result.reason
    assert "dispatch Incremental: 1 of 3 eligible clusters tried so far" in result.reason


def test_incremental_widens_by_one_cluster_after_each_timeout_in_placements_order() -> None:
    # a and b are full and preferred (a most); c has room but comes last.
    clusters = fleet(cluster("a", used_gpus=32), cluster("b", used_gpus=32), cluster("c"))
    affinity = {"preferred": [*PREFER_A["preferred"], {"weight": 10, "preference": {"clusterNames": ["b"]}}]}
    hyperjob = conceptual(
        "hj", job_spec(task("w", 8)), {"mode": "auto"}, clusterAffinity=affinity, dispatch=INCREMENTAL
    )
    reasons = [plan_split(hyperjob, clusters, waited=w) for w in (0.0, 30.0, 59.0, 60.0)]
    assert [r.reason.split("(dispatch ")[-1] for r in reasons[:3] if isinstance(r, Waiting)] == [
        "Incremental: 1 of 3 eligible clusters tried so far)",
        "Incremental: 2 of 3 eligible clusters tried so far)",
        "Incremental: 2 of 3 eligible clusters tried so far)",
    ]
    assert isinstance(reasons[3], SplitPlan) and reasons[3].placement == {"c": 8}
    all_three_first = {**INCREMENTAL, "initialClusters": 3}
    assert isinstance(plan(all_three_first, waited=0.0), SplitPlan)


def test_without_waited_incremental_weighs_every_cluster() -> None:
    # What could ever be placed (the admission's inadmissible check) is not narrowed.
    assert isinstance(plan(INCREMENTAL, waited=None), SplitPlan)


@pytest.mark.parametrize(
    ("dispatch", "field"),
    [
        ({"strategy": "Eventually"}, "dispatch.strategy"),
        ({"strategy": "Incremental", "initialClusters": 0}, "dispatch.initialClusters"),
        ({"strategy": "Incremental", "widenBy": 0}, "dispatch.widenBy"),
        ({"strategy": "Incremental", "widenAfter": "soon"}, "dispatch.widenAfter"),
        ({"strategy": "Incremental", "widenAfter": "0s"}, "dispatch.widenAfter"),
    ],
    ids=["strategy", "initial-0", "widen-by-0", "widen-after-bad", "widen-after-0"],
)
def test_a_malformed_dispatch_is_refused_naming_the_field(dispatch: dict[str, Any], field: str) -> None:
    with pytest.raises(api.ManifestError, match=field.replace(".", r"\.")):
        conceptual("hj", job_spec(task("w", 2)), {}, dispatch=dispatch)
