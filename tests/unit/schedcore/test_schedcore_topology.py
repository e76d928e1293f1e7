"""Network-topology-aware placement over topology.hyperjob.io/tierN labels."""

from __future__ import annotations

import pytest

from hyperjob.schedcore import DEFAULT_CONF_TEXT, Scheduler, parse_conf
from hyperjob.schedcore.testing import job, node, queue, snapshot


def fabric():
    # Two leaf switches, interleaved by name so name order alone would mix them; one spine.
    return [node(f"n{i}").cpu(4).mem("16Gi").tier(1, "s1" if i % 2 else "s2").tier(2, "spine") for i in range(1, 5)]


def placed(jobs, nodes=None):
    d = Scheduler(parse_conf(DEFAULT_CONF_TEXT)).cycle(snapshot(nodes or fabric(), [queue("default")], jobs))
    return {b.task: b.node for b in d.binds}, d


def leaf(name):
    return "s1" if int(name[1:]) % 2 else "s2"


@pytest.mark.parametrize("mode", ["hard", "soft", None], ids=["hard", "soft", "no-request-prefers-one-leaf"])
def test_gang_lands_in_one_tier1_domain(mode):
    g = job("g").min(2).tasks(2, cpu=4)
    if mode:
        g.topology(mode, 1)
    got, _ = placed([g])
    assert len(got) == 2 and len({leaf(n) for n in got.values()}) == 1


def test_without_topology_labels_gang_spreads_by_score():
    nodes = [node(f"n{i}").cpu(4).mem("16Gi") for i in range(1, 5)]
    got, _ = placed([job("g").min(2).tasks(2, cpu=2)], nodes)
    assert sorted(got.values()) == ["n1", "n2"]


def test_hard_picks_the_domain_that_fits():
    busy = job("busy").min(1).phase("Running").running(["n1"], cpu=4)  # s1 has one free node left
    got, _ = placed([busy, job("g").min(2).topology("hard", 1).tasks(2, cpu=4)])
    assert {leaf(n) for n in got.values()} == {"s2"}


@pytest.mark.parametrize(("tier", "expected_binds"), [(1, 0), (2, 3)], ids=["tier1-too-small", "tier2-allowed"])
def test_hard_gang_larger_than_a_leaf(tier, expected_binds):
    got, d = placed([job("g").min(3).topology("hard", tier).tasks(3, cpu=4)])
    assert len(got) == expected_binds
    if not expected_binds:
        assert "HyperNode" in d.unschedulable["g"]


def test_soft_falls_back_across_domains():
    got, _ = placed(
        [job("g").min(3).topology("soft", 1).tasks(3, cpu=4)],
        [node(f"n{i}").cpu(4).mem("16Gi").tier(1, "s1" if i % 2 else "s2") for i in range(1, 5)],
    )
    assert len(got) == 3


def test_misfit_in_one_domain_does_not_poison_the_next():
    # s1's first node is busy, so the gang misfits there; s2 must still be tried from scratch.
    nodes = [
        node("a1").cpu(4).mem("16Gi").tier(1, "s1"),
        node("a2").cpu(4).mem("16Gi").tier(1, "s1"),
        node("b1").cpu(4).mem("16Gi").tier(1, "s2"),
        node("b2").cpu(4).mem("16Gi").tier(1, "s2"),
    ]
    busy = job("busy").min(1).phase("Running").running(["a1"], cpu=2)
    got, _ = placed([busy, job("g").min(2).topology("hard", 1).tasks(2, role="w", cpu=3)], nodes)
    assert sorted(got.values()) == ["b1", "b2"]


WITHOUT_TOPOLOGY = DEFAULT_CONF_TEXT.replace("  - name: network-topology-aware\n", "")
SWITCHED_OFF = DEFAULT_CONF_TEXT.replace(
    "  - name: network-topology-aware\n", "  - name: network-topology-aware\n    enabledHyperNodeOrder: false\n"
)


@pytest.mark.parametrize("conf", [WITHOUT_TOPOLOGY, SWITCHED_OFF], ids=["plugin-absent", "switched-off"])
def test_without_the_plugin_gangs_are_placed_node_by_node(conf):
    d = Scheduler(parse_conf(conf)).cycle(snapshot(fabric(), [queue("default")], [job("g").min(2).tasks(2, cpu=4)]))
    assert sorted(b.node for b in d.binds) == ["n1", "n2"]  # name order: across both leaves


def test_without_the_plugin_a_hard_request_waits_and_says_why():
    snap = snapshot(fabric(), [queue("default")], [job("g").min(2).topology("hard", 1).tasks(2, cpu=4)])
    d = Scheduler(parse_conf(WITHOUT_TOPOLOGY)).cycle(snap)
    assert d.binds == [] and "enables no network-topology-aware plugin" in d.unschedulable["g"]


def test_a_failed_hard_gang_says_why_its_last_domain_failed():
    nodes = fabric()
    nodes[0] = nodes[0].label(pick="me")  # n1 (leaf s1) is the only node the pods select
    got, d = placed([job("g").min(2).topology("hard", 1).tasks(2, cpu=3, node_selector={"pick": "me"})], nodes)
    assert got == {}
    assert d.unschedulable["g"] == (
        "2/2 tasks in gang unschedulable: task: 0/4 nodes are available: "
        "3 node(s) didn't match Pod's node affinity/selector, 1 node(s) outside HyperNode s2 (tier 1); "
        "topology: no HyperNode of tier <= 1 holds the gang"
    )
