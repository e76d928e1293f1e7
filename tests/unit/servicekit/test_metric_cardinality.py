"""No metric label's values grow with the requests served (issue 32, item 3): the services run
twice the traffic through the simulator (the real services, one process, the process's registry)
and every label of every series keeps the values it had; a per-cluster service labels every
series with its cluster."""

from __future__ import annotations

import asyncio
import inspect
import logging

import pytest
import structlog
from prometheus_client import Counter, generate_latest

from hyperjob.events import subjects
from hyperjob.servicekit import metrics
from hyperjob.servicekit.metrics import REGISTRY, ServiceRegistry, label_every_series, subject_label
from hyperjob.services.cluster_scheduler.config import Settings as SchedulerSettings
from hyperjob.simulator.engine import Engine
from hyperjob.simulator.scenario import load


def traffic(prefix: str, count: int) -> str:
    """``count`` plain Jobs and ``count`` HyperJobs, in two namespaces, named after ``prefix``."""
    head = """\
apiVersion: hyperjob.io/v1alpha1
kind: Scenario
metadata: {name: traffic}
spec:
  clusters:
  - name: cluster-a
    nodes: [{name: n, allocatable: {cpu: "64", memory: 64Gi}}]
  events:
"""
    body = ""
    for i in range(count):
        namespace = ("default", "team-b")[i % 2]
        pod = (
            "template: {metadata: {annotations: {hyperjob.io/sim-duration: 5s}}, spec: {restartPolicy: Never,"
            ' containers: [{name: m, image: busybox, resources: {requests: {cpu: "1"}}}]}}'
        )
        body += f"""\
  - at: {i}s
    create:
      apiVersion: batch.volcano.sh/v1alpha1
      kind: Job
      metadata: {{name: {prefix}-job-{i}, namespace: {namespace}}}
      spec: {{tasks: [{{name: w, replicas: 1, {pod}}}]}}
  - at: {i}s
    create:
      apiVersion: batch.volcano.sh/v1alpha1
      kind: HyperJob
      metadata: {{name: {prefix}-hj-{i}, namespace: {namespace}}}
      spec:
        template:
          apiVersion: batch.volcano.sh/v1alpha1
          kind: Job
          spec: {{tasks: [{{name: w, replicas: 1, {pod}}}]}}
        splitPolicy: {{strategy: ByCluster, clusters: [{{name: cluster-a, replicas: 1}}]}}
"""
    return head + body + "  until: 60s\n"


def label_values() -> dict[tuple[str, str], set[str]]:
    found: dict[tuple[str, str], set[str]] = {}
    for family in REGISTRY.collect():
        for sample in family.samples:
            for label, value in sample.labels.items():
                found.setdefault((family.name, label), set()).add(value)
    return found


def run(text: str) -> None:
    structlog.configure(
        logger_factory=structlog.ReturnLoggerFactory(),
        wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL),
    )
    try:
        asyncio.run(Engine(load(text)).run())
    finally:
        structlog.reset_defaults()


def test_no_label_grows_with_the_requests_served() -> None:
    run(traffic("first", 3))
    before = label_values()
    run(traffic("second", 6))  # twice the requests, every object new
    after = label_values()

    grown = {key: sorted(after[key] - before.get(key, set())) for key in after if after[key] - before.get(key, set())}
    assert grown == {}
    assert {"hj.result.*", "hj.manifest.apply"} <= before[("hyperjob_bus_messages_handled", "subject")]


@pytest.mark.parametrize(
    ("subject", "label"),
    [
        (subjects.result("8b1f0c2e-5d1a-5c55-9c2b-1f0e0a6a7b11"), "hj.result.*"),
        (subjects.in_namespace(subjects.APPLY, "team-a"), "hj.manifest.apply.*"),
        (subjects.APPLY, "hj.manifest.apply"),
        (subjects.job_state("cluster-a", "train-w-0", 2), "jobstate.cluster-a.*.*"),
        (subjects.node_status("cluster-a", "node-7"), "nodestatus.cluster-a.*"),
        (subjects.podgroup_phase("cluster-a"), "sched.podgroup.phase.cluster-a"),
        (subjects.queue_config("gpu"), "cfg.queue.*"),
    ],
    ids=["request", "namespace", "bare request", "job state", "node", "cluster", "queue"],
)
def test_a_subject_is_labelled_by_its_bounded_form(subject: str, label: str) -> None:
    assert subject_label(subject) == label


def test_no_subject_of_the_contract_keeps_an_objects_name_in_its_label() -> None:
    """Every subject builder of ``events.subjects``, given a cluster and object names: the label
    keeps the cluster, never the object (a new subject family must say which tokens name objects)."""
    for name, build in inspect.getmembers(subjects, inspect.isfunction):
        parameters = list(inspect.signature(build).parameters)
        if build.__module__ != subjects.__name__ or name in ("token", "namespace_of") or not parameters:
            continue
        # A durable is one per consumer the code declares: bounded, kept.
        arguments = {"cluster": "cluster-x", "part": 0, "request": subjects.APPLY, "durable": "consumer-x"}
        subject = build(*(arguments.get(p, f"object{i}") for i, p in enumerate(parameters)))
        assert "object" not in subject_label(subject), (name, subject)


def test_a_registry_puts_its_constant_labels_on_every_series_but_a_series_own() -> None:
    registry = ServiceRegistry()
    Counter("handled", "h", ["subject"], registry=registry).labels("a").inc()
    Counter("moved", "m", ["cluster"], registry=registry).labels("c2").inc()
    registry.constant = {"cluster": "c1"}

    text = generate_latest(registry).decode()

    assert 'handled_total{cluster="c1",subject="a"} 1.0' in text
    assert 'moved_total{cluster="c2"} 1.0' in text


def test_a_per_cluster_service_labels_every_series_of_its_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(REGISTRY, "constant", {})
    label_every_series(SchedulerSettings(cluster="cluster-c"))

    samples = [s for family in metrics.REGISTRY.collect() for s in family.samples]

    assert samples and all("cluster" in s.labels for s in samples)
    assert {s.labels["cluster"] for s in samples if s.name.startswith(("process_", "hyperjob_bus_"))} == {"cluster-c"}
