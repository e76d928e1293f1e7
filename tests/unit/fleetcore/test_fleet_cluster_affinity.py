"""Cluster choice as a policy (issue 28, what to build 3): Karmada's ``clusterAffinity`` per
replicated job (``clusterNames``, ``exclude``, ``labelSelector`` with ``matchLabels`` and
``matchExpressions`` In / NotIn / Exists / DoesNotExist); the cluster-selector annotation still works."""

from __future__ import annotations

from typing import Any

import pytest

from hyperjob import api
from hyperjob.fleetcore import CLUSTER_SELECTOR_ANNOTATION, eligible_clusters
from tests.unit.fleetcore.fleet_builders import cluster, conceptual, fleet, job_spec, task

CLUSTERS = fleet(
    cluster("eu-1", labels={"region": "eu", "provider": "cheap"}),
    cluster("eu-2", labels={"region": "eu", "provider": "acme", "gdpr": "yes"}),
    cluster("us-1", labels={"region": "us", "provider": "acme"}),
    cluster("bare"),
)


def eligible(affinity: dict[str, Any] | None, **metadata: Any) -> list[str]:
    spec: dict[str, Any] = {"clusterAffinity": affinity} if affinity is not None else {}
    hyperjob = conceptual("hj", job_spec(task("w", 2)), {}, **spec)
    if metadata:
        hyperjob = api.normalize(hyperjob)
        hyperjob = type(hyperjob)(
            api_version=hyperjob.api_version,
            metadata=api.ObjectMeta(name="hj", annotations=metadata),
            spec=hyperjob.spec,
        )
    return eligible_clusters(hyperjob, hyperjob.spec.replicated_jobs[0], CLUSTERS)


@pytest.mark.parametrize(
    ("affinity", "expected"),
    [
        (None, ["bare", "eu-1", "eu-2", "us-1"]),
        ({"clusterNames": ["us-1", "eu-1"]}, ["eu-1", "us-1"]),
        ({"exclude": ["eu-1", "bare"]}, ["eu-2", "us-1"]),
        ({"labelSelector": {"matchLabels": {"region": "eu"}}}, ["eu-1", "eu-2"]),
        ({"labelSelector": {"matchExpressions": [{"key": "region", "operator": "In", "values": ["us", "eu"]}]}},
         ["eu-1", "eu-2", "us-1"]),
        ({"labelSelector": {"matchExpressions": [{"key": "provider", "operator": "NotIn", "values": ["cheap"]}]}},
         ["bare", "eu-2", "us-1"]),  # a cluster without the label is not in
        ({"labelSelector": {"matchExpressions": [{"key": "gdpr", "operator": "Exists"}]}}, ["eu-2"]),
        ({"labelSelector": {"matchExpressions": [{"key": "region", "operator": "DoesNotExist"}]}}, ["bare"]),
        ({"exclude": ["eu-2"], "labelSelector": {"matchLabels": {"region": "eu"}}}, ["eu-1"]),
    ],
    ids=["none", "cluster-names", "exclude", "match-labels", "in", "not-in", "exists", "does-not-exist", "both"],
)  # fmt: skip
def test_cluster_affinity_chooses_the_eligible_clusters(affinity: dict[str, Any] | None, expected: list[str]) -> None:
    assert sorted(eligible(affinity)) == expected


def test_the_cluster_selector_annotation_keeps_working_beside_an_affinity() -> None:
    assert eligible(None, **{CLUSTER_SELECTOR_ANNOTATION: "provider=acme"}) == ["eu-2", "us-1"]


@pytest.mark.parametrize(
    ("expression", "reason"),
    [
        ({"key": "region", "operator": "In"}, "operator In needs at least one value"),
        ({"key": "region", "operator": "Exists", "values": ["eu"]}, "operator Exists takes no values"),
    ],
    ids=["in-without-values", "exists-with-values"],
)
def test_a_malformed_selector_is_refused_naming_its_field(expression: dict[str, Any], reason: str) -> None:
    affinity = {"labelSelector": {"matchExpressions": [expression]}}
    with pytest.raises(api.ManifestError) as caught:
        conceptual("hj", job_spec(task("w", 2)), {}, clusterAffinity=affinity)
    assert "clusterAffinity.labelSelector.matchExpressions[0].values" in str(caught.value)
    assert reason in str(caught.value)


def test_an_unknown_operator_is_refused_naming_its_field() -> None:
    affinity = {"labelSelector": {"matchExpressions": [{"key": "region", "operator": "Gt", "values": ["1"]}]}}
    with pytest.raises(api.ManifestError) as caught:
        conceptual("hj", job_spec(task("w", 2)), {}, clusterAffinity=affinity)
    assert "operator" in str(caught.value)
