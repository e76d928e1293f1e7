"""The simulated fleet: shape and fabric position, plausible telemetry, faults; and the health rules."""

import pytest

from hyperjob.events.telemetry import FabricTelemetry, GpuDevice, GpuTelemetry, IbPort, XidEvent
from hyperjob.hwprobe import Fault, FleetShape, build_fleet, node_health
from hyperjob.hwprobe.simfleet import TIER1, TIER2, parse_fault


def fleet(n=8, **shape):
    return build_fleet("c1", [f"c1-node-{i}" for i in range(n)], FleetShape(**shape))


def test_nodes_carry_their_leaf_and_spine_as_topology_tiers():
    nodes = fleet(8, nodes_per_leaf=2, leaves_per_spine=2)
    assert [(n.labels[TIER1], n.labels[TIER2]) for n in nodes] == [
        ("c1-leaf0", "c1-spine0"),
        ("c1-leaf0", "c1-spine0"),
        ("c1-leaf1", "c1-spine0"),
        ("c1-leaf1", "c1-spine0"),
        ("c1-leaf2", "c1-spine1"),
        ("c1-leaf2", "c1-spine1"),
        ("c1-leaf3", "c1-spine1"),
        ("c1-leaf3", "c1-spine1"),
    ]


def test_nodes_carry_the_kubelets_well_known_labels():
    node = fleet(1)[0]
    assert {k: node.labels[k] for k in ("kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch")} == {
        "kubernetes.io/hostname": "c1-node-0",
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
    }


def test_a_multi_node_nvlink_domain_is_tier1():
    nodes = fleet(4, nodes_per_nvlink_domain=2, nodes_per_leaf=4)
    assert [n.labels[TIER1] for n in nodes] == ["c1-nvl0", "c1-nvl0", "c1-nvl1", "c1-nvl1"]
    assert {n.labels["hyperjob.io/leaf"] for n in nodes} == {"c1-leaf0"}


def test_telemetry_follows_the_shape_and_the_load():
    node = fleet(1, gpu_model="A100", gpus_per_node=4, nvlinks_per_gpu=12, nvlink_version=3)[0]
    gpus = node.gpus(busy=0.5, now=10.0)
    assert [g.model for g in gpus] == ["NVIDIA A100"] * 4
    busy, idle = gpus[:2], gpus[2:]
    assert all(g.utilization_percent >= 85 for g in busy) and all(g.utilization_percent <= 2 for g in idle)
    assert min(g.power_watts for g in busy) > max(g.power_watts for g in idle)
    assert len(node.nvlinks()[0].links) == 12
    assert len(node.infiniband(busy=0.5, now=10.0)) == 4  # one HCA per GPU


def test_counters_only_grow_and_idle_ports_move_nothing():
    node = fleet(1)[0]
    first = node.infiniband(busy=1.0, now=100.0)[0].counters["port_xmit_data"]
    second = node.infiniband(busy=1.0, now=101.0)[0].counters["port_xmit_data"]
    third = node.infiniband(busy=0.0, now=102.0)[0].counters["port_xmit_data"]
    assert first <= second == third and second > first


def test_the_same_seed_gives_the_same_telemetry():
    a, b = fleet(1)[0], fleet(1)[0]
    assert a.gpus(busy=1.0, now=1.0) == b.gpus(busy=1.0, now=1.0)


def test_faults_stick_until_cleared():
    node = fleet(1)[0]
    node.apply(Fault(kind="gpu-xid", node=node.name, gpu=3, xid=79), now=5.0)
    node.apply(Fault(kind="ib-down", node=node.name, device="mlx5_2"), now=5.0)
    node.apply(Fault(kind="silent", node=node.name), now=5.0)
    gpus, ports = node.gpus(busy=0.0, now=6.0), node.infiniband(busy=0.0, now=6.0)
    assert gpus[3].xid_events == [XidEvent(xid=79, at=5.0)]
    assert [p.state for p in ports].count("DOWN") == 1 and ports[2].state == "DOWN"
    assert ports[2].counters["link_downed"] == 1
    assert node.silent
    node.apply(Fault(kind="clear", node=node.name), now=7.0)
    assert not node.silent and node.gpus(busy=0.0, now=8.0)[3].xid_events == []
    assert {p.state for p in node.infiniband(busy=0.0, now=8.0)} == {"ACTIVE"}


def test_faults_parse_from_text():
    assert parse_fault("gpu-xid@c1-node-3,gpu=2,xid=48,after=30,for=60") == Fault(
        kind="gpu-xid", node="c1-node-3", gpu=2, xid=48, after=30.0, lasting=60.0
    )
    assert parse_fault("silent@n1") == Fault(kind="silent", node="n1")


@pytest.mark.parametrize("text", ["gpu-xid", "melt@n1", "gpu-xid@n1,gpu", "gpu-xid@n1,gpu=two"])
def test_bad_fault_text_is_rejected_with_the_text(text):
    with pytest.raises(ValueError, match="fault"):
        parse_fault(text)


def gpu_msg(*devices):
    return GpuTelemetry(event_id="e", cluster="c1", node="n1", source="simulated", gpus=list(devices))


def test_uncorrectable_ecc_or_a_fatal_xid_makes_a_gpu_sick_but_an_application_xid_does_not():
    health = node_health(
        gpu_msg(
            GpuDevice(index=0, ecc_uncorrected=0, xid_events=[XidEvent(xid=13, at=1.0)]),
            GpuDevice(index=1, ecc_uncorrected=2),
            GpuDevice(index=2, xid_events=[XidEvent(xid=79, at=1.0)]),
        ),
        None,
    )
    assert health.sick_gpus == [1, 2] and not health.gpu_ok and health.fabric_ok
    assert health.reasons == ["gpu1: 2 uncorrectable ECC errors", "gpu2: fatal Xid 79"]


def test_an_infiniband_port_not_active_is_down_but_ethernet_ports_are_ignored():
    fabric = FabricTelemetry(
        event_id="e",
        cluster="c1",
        node="n1",
        infiniband=[
            IbPort(device="mlx5_0", port=1, state="ACTIVE"),
            IbPort(device="mlx5_1", port=1, state="DOWN"),
            IbPort(device="eth", port=1, state="DOWN", link_layer="Ethernet"),
        ],
    )
    health = node_health(None, fabric)
    assert health.down_ports == ["mlx5_1/1"] and not health.fabric_ok and health.gpu_ok


def test_no_telemetry_means_nothing_known_to_be_wrong():
    assert node_health(None, None).gpu_ok and node_health(gpu_msg(), None).fabric_ok
