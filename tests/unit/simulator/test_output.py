"""The result object's shape, number formats, ordering, determinism and the table rendering."""

from __future__ import annotations

import gc
import json

import pytest

from hyperjob import simulator
from hyperjob.simulator import output

SCENARIO = """\
apiVersion: hyperjob.io/v1alpha1
kind: Scenario
metadata: {name: shape}
spec:
  clusters:
  - name: cluster-b
    nodes: [{name: b, allocatable: {cpu: "4", memory: 8Gi}}]
  - name: cluster-a
    nodes: [{name: n, count: 2, allocatable: {cpu: "4", memory: 8Gi}}]
  events:
  - at: 0s
    create:
      apiVersion: batch.volcano.sh/v1alpha1
      kind: Job
      metadata: {name: zeta}
      spec:
        tasks:
        - name: w
          replicas: 2
          template:
            spec:
              containers: [{name: c, image: x, resources: {requests: {cpu: 500m, memory: 1Gi}}}]
  - at: 0s
    create:
      apiVersion: batch.volcano.sh/v1alpha1
      kind: Job
      metadata: {name: alpha}
      spec:
        tasks:
        - name: w
          replicas: 1
          template:
            metadata: {annotations: {hyperjob.io/sim-duration: 2500ms}}
            spec:
              restartPolicy: Never
              containers: [{name: c, image: x, resources: {requests: {cpu: "1"}}}]
  until: 20s
"""

EVENT_KEYS = ["time", "type", "object", "cluster", "node", "reason", "phase"]
POD_KEYS = ["name", "job", "task", "index", "cluster", "node", "phase", "startedAt", "finishedAt", "restarts"]


@pytest.fixture(scope="module")
def result() -> dict:
    return json.loads(simulator.to_json(simulator.run(SCENARIO)))


def test_same_scenario_prints_identical_json() -> None:
    assert simulator.to_json(simulator.run(SCENARIO)) == simulator.to_json(simulator.run(SCENARIO))


def test_result_keys_in_contract_order(result: dict) -> None:
    assert list(result) == ["scenario", "time", "pods", "podGroups", "jobs", "hyperJobs", "queues", "events"]
    assert result["scenario"] == "shape"
    assert result["time"] == 20.0


def test_lists_sorted_by_name(result: dict) -> None:
    for key in ("pods", "podGroups", "jobs", "queues"):
        names = [(i["name"], i.get("cluster") or "") for i in result[key]]
        assert names == sorted(names), key
    assert [j["name"] for j in result["jobs"]] == ["alpha", "zeta"]


def test_events_in_time_order_with_phase_key(result: dict) -> None:
    times = [e["time"] for e in result["events"]]
    assert times == sorted(times)
    for event in result["events"]:
        assert list(event) == EVENT_KEYS
        assert event["type"] in output.EVENT_TYPES
        assert isinstance(event["time"], float)
        if not event["type"].endswith("PhaseChanged"):
            assert event["phase"] == ""


def test_pods_shape_and_sim_duration(result: dict) -> None:
    pods = {p["name"]: p for p in result["pods"]}
    for pod in pods.values():
        assert list(pod) == POD_KEYS
    done = pods["alpha-w-0"]
    assert done["phase"] == "Succeeded"
    assert done["finishedAt"] - done["startedAt"] == pytest.approx(2.5)
    assert any(e["type"] == "PodSucceeded" and e["object"] == "alpha-w-0" for e in result["events"])


def test_queues_listed_in_every_cluster(result: dict) -> None:
    assert [(q["name"], q["cluster"]) for q in result["queues"]] == [("default", "cluster-a"), ("default", "cluster-b")]


def test_podgroup_resources_in_base_units(result: dict) -> None:
    zeta = next(pg for pg in result["podGroups"] if pg["name"] == "zeta")
    assert zeta["minResources"] == {"cpu": 1.0, "memory": 2 * 2**30}
    assert zeta["minMember"] == 2


@pytest.mark.parametrize(
    ("name", "amount", "printed"),
    [
        ("cpu", 4, "4.0"),
        ("cpu", 0.5, "0.5"),
        ("memory", 2.5, "2.5"),
        ("memory", 2**30, "1073741824"),
        ("nvidia.com/gpu", 8.0, "8"),
        ("memory", -0.0, "0"),
    ],
    ids=["cpu-float", "cpu-fraction", "memory-fraction", "memory-bytes", "scalar", "no-negative-zero"],
)
def test_quantities_print_in_base_units(name: str, amount: float, printed: str) -> None:
    assert json.dumps(output.number(name, amount)) == printed


def test_resource_maps_drop_pods_and_zeros_but_keep_cpu() -> None:
    assert output.resources({"pods": 3, "memory": 0, "nvidia.com/gpu": 2}) == {"cpu": 0.0, "nvidia.com/gpu": 2}


def test_table_shows_jobs_queues_and_timeline(result: dict) -> None:
    text = simulator.render_table(result)
    assert text.startswith("scenario shape at t=20s")
    for part in ("JOBS", "QUEUES", "TIMELINE", "alpha", "zeta", "PodSucceeded"):
        assert part in text
    assert text == simulator.render_table(result)


def test_the_timeline_skips_a_payload_it_cannot_read_bad_utf8_included():
    from hyperjob.simulator.observe import Timeline

    class Clock:
        def now(self) -> float:
            return 0.0

    timeline = Timeline(Clock())
    timeline.observe("HYPERJOB", "job.phase.c1", b'{"type":"job.phase.v1","event_id":"\xff\xfe"}', {})
    timeline.observe("HYPERJOB", "job.phase.c1", b"\x00 not json", {})
    assert timeline.events == []


def test_a_run_leaves_the_cycle_collector_as_it_found_it() -> None:
    """The engine collects cyclic garbage less often while it runs (``engine._rare_collections``)."""
    before = gc.get_threshold()
    simulator.run(SCENARIO)
    assert gc.get_threshold() == before
