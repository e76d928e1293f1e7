"""Manifests in ``create`` events are admitted as ``hyperjob apply`` would; rejections are events."""

from __future__ import annotations

import pytest

from hyperjob import simulator

HEAD = """\
apiVersion: hyperjob.io/v1alpha1
kind: Scenario
metadata: {name: admission}
spec:
  clusters:
  - name: cluster-a
    nodes: [{name: n, allocatable: {cpu: "4", memory: 8Gi}}]
  queues:
  - {apiVersion: scheduling.volcano.sh/v1beta1, kind: Queue, metadata: {name: shut}, spec: {state: Closed}}
  - {apiVersion: scheduling.volcano.sh/v1beta1, kind: Queue, metadata: {name: parent}}
  - {apiVersion: scheduling.volcano.sh/v1beta1, kind: Queue, metadata: {name: leaf}, spec: {parent: parent}}
  events:
  - at: 1s
    create:
"""

JOB = """\
      apiVersion: batch.volcano.sh/v1alpha1
      kind: Job
      metadata: {name: j}
      spec:
        queue: QUEUE
        tasks:
        - name: w
          replicas: 1
          template:
            spec:
              containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
"""

HYPERJOB = """\
      apiVersion: batch.volcano.sh/v1alpha1
      kind: HyperJob
      metadata: {name: h}
      spec:
        template:
          apiVersion: batch.volcano.sh/v1alpha1
          kind: Job
          spec:
            tasks:
            - name: t
              replicas: 4
              template:
                spec:
                  containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
        splitPolicy:
          strategy: ByCluster
          clusters: CLUSTERS
"""

UPSTREAM = """\
      apiVersion: training.volcano.sh/v1alpha1
      kind: HyperJob
      metadata: {name: u}
      spec:
        replicatedJobs:
        - name: r
          clusterNames: [venus]
          templateSpec:
            tasks:
            - name: t
              replicas: 1
              template:
                spec:
                  containers: [{name: c, image: x}]
"""

CASES = [
    ("closed-queue", JOB.replace("QUEUE", "shut"), "j", "$.spec.queue", "Closed"),
    ("missing-queue", JOB.replace("QUEUE", "nowhere"), "j", "$.spec.queue", "does not exist"),
    ("non-leaf-queue", JOB.replace("QUEUE", "parent"), "j", "$.spec.queue", "leaf"),
    (
        "unknown-field",
        JOB.replace("QUEUE", "leaf").replace("        tasks:", "        colour: red\n        tasks:"),
        "j",
        "$.spec",
        "unknown field",
    ),
    (
        "negative-replicas",
        JOB.replace("QUEUE", "leaf").replace("replicas: 1", "replicas: -1"),
        "j",
        "$.spec.tasks[0].replicas",
        "",
    ),
    (
        "unknown-cluster",
        HYPERJOB.replace("CLUSTERS", "[{name: cluster-a, replicas: 2}, {name: mars, replicas: 2}]"),
        "h",
        "mars",
        "does not exist",
    ),
    (
        "counts-do-not-add-up",
        HYPERJOB.replace("CLUSTERS", "[{name: cluster-a, replicas: 3}]"),
        "h",
        "splitPolicy.clusters",
        "add up to 3",
    ),
    (
        "conceptual-template-queue",
        HYPERJOB.replace("CLUSTERS", "[{name: cluster-a, replicas: 4}]").replace(
            "            tasks:", "            queue: shut\n            tasks:"
        ),
        "h",
        "$.spec.template.spec.queue",
        "Closed",
    ),
    (
        "queue-parent-missing",
        "      {apiVersion: scheduling.volcano.sh/v1beta1, kind: Queue, metadata: {name: q},"
        " spec: {parent: nowhere}}\n",
        "q",
        "$.spec.parent",
        "'nowhere' does not exist",
    ),
    ("upstream-cluster-names", UPSTREAM, "u", "$.spec.replicatedJobs[0].clusterNames[0]", "'venus' does not exist"),
]


@pytest.mark.parametrize(("manifest", "name", "where", "what"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_rejected_manifest_is_an_event_and_changes_nothing(manifest: str, name: str, where: str, what: str) -> None:
    result = simulator.run(HEAD + manifest + "  until: 5s\n")
    rejected = [e for e in result["events"] if e["type"] == "Rejected"]
    assert len(rejected) == 1
    assert rejected[0]["object"] == name
    assert rejected[0]["time"] == 1.0
    assert where in rejected[0]["reason"] and what in rejected[0]["reason"]
    assert result["jobs"] == [] and result["hyperJobs"] == [] and result["pods"] == []
    assert [e["type"] for e in result["events"]] == ["Rejected"]


def test_job_in_a_leaf_queue_is_admitted() -> None:
    result = simulator.run(HEAD + JOB.replace("QUEUE", "leaf") + "  until: 5s\n")
    assert [e for e in result["events"] if e["type"] == "Rejected"] == []
    assert [(j["name"], j["phase"]) for j in result["jobs"]] == [("j", "Running")]


def test_implicit_default_queue_exists_in_every_cluster() -> None:
    result = simulator.run(HEAD + JOB.replace("QUEUE", "default") + "  until: 5s\n")
    assert {q["name"] for q in result["queues"]} >= {"default", "root", "leaf", "parent", "shut"}
    assert result["jobs"][0]["phase"] == "Running"
