"""A scenario file whose own structure is wrong is a ScenarioError naming the place (exit 2)."""

from __future__ import annotations

import pytest

from hyperjob import simulator
from hyperjob.simulator.scenario import load

BASE = """\
apiVersion: hyperjob.io/v1alpha1
kind: Scenario
metadata: {name: t}
spec:
  clusters:
  - name: a
    nodes: [{name: n, count: 2, allocatable: {cpu: "4"}}]
  events:
  - {at: 0s, nodeDown: {cluster: a, node: n-0}}
"""

CASES = [
    ("unknown-event-type", BASE + "  - {at: 1s, explode: {}}\n", "spec.events[1]", "unknown event type 'explode'"),
    ("bad-at", BASE + "  - {at: soon, nodeUp: {cluster: a, node: n-0}}\n", "spec.events[1].at", "not a duration"),
    ("at-wrong-type", BASE + "  - {at: [1], nodeUp: {cluster: a, node: n-0}}\n", "spec.events[1].at", "not a duration"),
    (
        "undeclared-cluster",
        BASE + "  - {at: 1s, clusterDown: {cluster: b}}\n",
        "spec.events[1].clusterDown.cluster",
        "cluster 'b' is not declared",
    ),
    (
        "undeclared-node",
        BASE + "  - {at: 1s, nodeUp: {cluster: a, node: n}}\n",
        "spec.events[1].nodeUp.node",
        "node 'n' is not declared in cluster 'a'",
    ),
    (
        "two-actions",
        BASE + "  - {at: 1s, nodeUp: {cluster: a, node: n-0}, clusterUp: {cluster: a}}\n",
        "spec.events[1]",
        "exactly one of",
    ),
    ("no-action", BASE + "  - {at: 1s}\n", "spec.events[1]", "exactly one of"),
    ("unknown-spec-field", BASE + "  extra: 1\n", "spec.extra", "unknown field"),
    (
        "unknown-event-field",
        BASE + "  - {at: 1s, podFail: {pod: p, exitcode: 1}}\n",
        "spec.events[1].podFail.exitcode",
        "unknown field",
    ),
    (
        "bad-quantity",
        BASE.replace('cpu: "4"', "cpu: four"),
        "spec.clusters[0].nodes[0].allocatable.cpu",
        "not a quantity",
    ),
    (
        "bad-command-action",
        BASE + "  - {at: 1s, command: {kind: Job, name: j, action: fly}}\n",
        "spec.events[1].command.action",
        "a Job takes",
    ),
    (
        "bad-command-kind",
        BASE + "  - {at: 1s, command: {kind: Pod, name: j, action: abort}}\n",
        "spec.events[1].command.kind",
        "commands apply to",
    ),
    (
        "bad-queue",
        BASE + "  queues: [{apiVersion: scheduling.volcano.sh/v1beta1, kind: Queue, metadata: {name: q},"
        " spec: {weight: -1}}]\n",
        "spec.queues[0].spec.weight",
        ">= 0",
    ),
    (
        "undeclared-parent-queue",
        BASE + "  queues: [{apiVersion: scheduling.volcano.sh/v1beta1, kind: Queue,"
        " metadata: {name: q}, spec: {parent: nowhere}}]\n",
        "spec.queues[0].spec.parent",
        "'nowhere' is not declared",
    ),
    (
        "duplicate-queue",
        BASE + "  queues: [{apiVersion: scheduling.volcano.sh/v1beta1, kind: Queue,"
        " metadata: {name: q}}, {apiVersion: scheduling.volcano.sh/v1beta1, kind: Queue, metadata: {name: q}}]\n",
        "spec.queues",
        "queue 'q' is declared twice",
    ),
    ("bad-until", BASE + "  until: forever\n", "spec.until", "not a duration"),
    ("zero-period", BASE + "  schedulePeriod: 0s\n", "spec.schedulePeriod", "more than 0"),
    (
        "duplicate-cluster",
        BASE.replace("  events:", "  - {name: a}\n  events:"),
        "spec.clusters",
        "cluster 'a' is declared twice",
    ),
    (
        "missing-clusters",
        "apiVersion: hyperjob.io/v1alpha1\nkind: Scenario\nmetadata: {name: t}\nspec: {}\n",
        "spec.clusters",
        "required",
    ),
    (
        "numa-without-cpus",
        BASE.replace("count: 2, ", "count: 2, numa: {cpus: []}, "),
        "spec.clusters[0].nodes[0].numa.cpus",
        "length >= 1",
    ),
    (
        "priority-class-above-user-range",
        BASE.replace("  events:", "  priorityClasses: [{name: top, value: 2000000000}]\n  events:"),
        "spec.priorityClasses[0].value",
        "more than 1,000,000,000",
    ),
    ("wrong-kind", BASE.replace("kind: Scenario", "kind: Job"), "kind", ""),
    ("not-yaml", "spec: [", "$", "not valid YAML"),
    ("not-a-mapping", "- 1\n- 2\n", "$", "mapping"),
    ("bad-conf", BASE + "  schedulerConf: 'actions: \"enqueue, dance\"'\n", "spec.schedulerConf", "dance"),
]


@pytest.mark.parametrize(("text", "path", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_scenario_file_names_the_place(text: str, path: str, fragment: str) -> None:
    with pytest.raises(simulator.ScenarioError) as info:
        simulator.run(text)
    assert info.value.path == path
    assert fragment in info.value.message
    assert str(info.value) == f"{path}: {info.value.message}"


def test_nodes_expand_from_count_and_keep_their_name_without_it() -> None:
    scenario = load(
        BASE.replace("count: 2, ", "count: 3, ").replace(
            "  events:", "  - {name: b, nodes: [{name: solo, allocatable: {cpu: 1}}, {name: one, count: 1}]}\n  events:"
        )
    )
    assert [n.name for n in scenario.clusters[0].nodes] == ["n-0", "n-1", "n-2"]
    assert [n.name for n in scenario.clusters[1].nodes] == ["solo", "one"]


def test_nodes_carry_the_well_known_labels_unless_the_scenario_sets_them() -> None:
    scenario = load(BASE.replace("count: 2, ", "count: 2, labels: {kubernetes.io/arch: arm64}, "))
    assert [n.labels for n in scenario.clusters[0].nodes] == [
        {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "arm64"}
        for name in ("n-0", "n-1")
    ]


def test_a_numa_layout_becomes_the_labels_numa_aware_reads() -> None:
    scenario = load(BASE.replace("count: 2, ", "count: 2, numa: {cpus: [2, 2], topologyManagerPolicy: restricted}, "))
    labels = scenario.clusters[0].nodes[0].labels
    assert {k: v for k, v in labels.items() if k.startswith("numa.")} == {
        "numa.hyperjob.io/cpus": "2,2",
        "numa.hyperjob.io/topology-manager-policy": "restricted",
        "numa.hyperjob.io/cpu-manager-policy": "static",
    }


def test_node_without_pods_gets_110_slots() -> None:
    scenario = load(BASE)
    assert scenario.clusters[0].nodes[0].allocatable == {"cpu": 4.0, "pods": 110.0}


def test_durations_accept_numbers_and_units() -> None:
    scenario = load(
        BASE.replace("at: 0s", "at: 500ms")
        + "  - {at: 2, nodeUp: {cluster: a, node: n-0}}\n"
        + "  - {at: 5m, clusterDown: {cluster: a}}\n  until: 2h\n  schedulePeriod: 1.5\n"
    )
    assert [e.at for e in scenario.events] == [0.5, 2.0, 300.0]
    assert scenario.until == 7200.0
    assert scenario.period == 1.5


def test_same_time_events_keep_file_order() -> None:
    scenario = load(BASE + "  - {at: 0s, nodeUp: {cluster: a, node: n-0}}\n  - {at: 0s, clusterDown: {cluster: a}}\n")
    assert [e.kind for e in scenario.events] == ["nodeDown", "nodeUp", "clusterDown"]
