"""The simulated fleet's sensors: configured faults happen on time and recover after their duration;
silent nodes publish nothing; real sensors report no devices where there are none; and the agent
judges what it reads into the health verdict its ``NodeStatus`` carries."""

import platform

import pytest

from hyperjob import hwprobe
from hyperjob.events.telemetry import FabricTelemetry, GpuTelemetry
from hyperjob.services.node_agent.sensors import NoSensors, RealSensors, SimulatedSensors, subject_of

NODES = ["c1-node-0", "c1-node-1"]


def sensors(*faults):
    return SimulatedSensors("c1", NODES, hwprobe.FleetShape(gpus_per_node=2), list(faults), seed=0, started=100.0)


def by_node(readings):
    """``{("gpu" | "fabric", node): message}`` of one read."""
    out = {}
    for r in readings:
        assert isinstance(r, GpuTelemetry | FabricTelemetry)
        out[("gpu" if isinstance(r, GpuTelemetry) else "fabric", r.node)] = r
    return out


def health(readings, node):
    found = by_node(readings)
    return hwprobe.node_health(found.get(("gpu", node)), found.get(("fabric", node)))


def test_a_configured_fault_happens_after_its_delay_and_clears_after_its_duration():
    s = sensors("gpu-ecc@c1-node-1,gpu=1,after=10,for=20")
    assert by_node(s.read("c1", NODES, {}, now=109.0))[("gpu", "c1-node-1")].gpus[1].ecc_uncorrected == 0
    assert by_node(s.read("c1", NODES, {}, now=110.0))[("gpu", "c1-node-1")].gpus[1].ecc_uncorrected == 1
    assert ("gpu", "c1-node-1") not in by_node(s.read("c1", NODES, {}, now=129.0))  # nothing changed: not read
    assert by_node(s.read("c1", NODES, {}, now=130.0))[("gpu", "c1-node-1")].gpus[1].ecc_uncorrected == 0


def test_a_period_reads_the_nodes_that_changed_and_a_rolling_share_of_the_rest():
    nodes = [f"c1-node-{i}" for i in range(6)]
    s = SimulatedSensors("c1", nodes, hwprobe.FleetShape(gpus_per_node=2), [], seed=0, started=0.0, refresh_periods=3)

    def read(now, busy=None):
        return sorted({node for _, node in by_node(s.read("c1", nodes, busy or {}, now=now))})

    assert read(0.0) == nodes  # the first period reads every node
    assert read(10.0) == ["c1-node-1", "c1-node-4"]  # quiet: a third of them, in turn
    assert read(20.0) == ["c1-node-2", "c1-node-5"]
    assert read(30.0) == ["c1-node-0", "c1-node-3"]  # every node refreshed within 3 periods
    assert read(40.0, {"c1-node-2": 0.5}) == ["c1-node-1", "c1-node-2", "c1-node-4"]  # its load changed
    assert read(50.0, {"c1-node-2": 0.5}) == ["c1-node-2", "c1-node-5"]  # its turn, not changed again
    assert s.inject(hwprobe.Fault(kind="ib-down", node="c1-node-4"), now=55.0)
    verdict = health(s.read("c1", nodes, {"c1-node-2": 0.5}, now=60.0), "c1-node-4")  # a fault: read at once
    assert not verdict.fabric_ok


def test_a_silent_node_publishes_no_telemetry_and_unknown_nodes_are_ignored():
    s = sensors("silent@c1-node-0", "silent@nowhere")
    out = by_node(s.read("c1", NODES, {}, now=100.0))
    assert sorted(out) == [("fabric", "c1-node-1"), ("gpu", "c1-node-1")]
    assert s.silent("c1-node-0") and not s.silent("c1-node-1")


def test_every_message_names_its_node_source_and_subject_and_ids_are_deterministic():
    first, second = sensors().read("c1", NODES, {"c1-node-0": 1.0}, now=5.0), sensors().read("c1", NODES, {}, now=5.0)
    assert [m.event_id for m in first] == [m.event_id for m in second]
    assert len({m.event_id for m in first}) == len(first) == 4
    gpu = by_node(first)[("gpu", "c1-node-0")]
    assert (gpu.node, gpu.cluster, gpu.source, len(gpu.gpus)) == ("c1-node-0", "c1", "simulated", 2)
    assert subject_of(gpu) == "telemetry.gpu.c1.c1-node-0"
    assert subject_of(by_node(first)[("fabric", "c1-node-1")]) == "telemetry.fabric.c1.c1-node-1"


@pytest.mark.parametrize(
    ("fault", "gpu_ok", "fabric_ok"),
    [
        ("gpu-xid@c1-node-0,gpu=1,xid=79", False, True),
        ("gpu-ecc@c1-node-0,gpu=0", False, True),
        ("ib-down@c1-node-0", True, False),
    ],
    ids=["fatal-xid", "ecc", "ib-port-down"],
)
def test_what_the_sensors_read_is_judged_into_the_verdict_the_node_status_carries(fault, gpu_ok, fabric_ok):
    s = sensors(fault)
    verdict = health(s.read("c1", NODES, {}, now=100.0), "c1-node-0")
    assert (verdict.gpu_ok, verdict.fabric_ok) == (gpu_ok, fabric_ok) and verdict.reasons
    assert (not gpu_ok) == bool(verdict.sick_gpus) and (not fabric_ok) == bool(verdict.down_ports)
    healthy = health(s.read("c1", NODES, {}, now=100.0), "c1-node-1")
    assert healthy == hwprobe.NodeHealth()


def test_an_injected_fault_is_applied_now_and_recovers_after_it_lasts():
    s = sensors()
    assert s.inject(hwprobe.Fault(kind="gpu-ecc", node="c1-node-1", gpu=0, lasting=5.0), now=200.0)
    assert not s.inject(hwprobe.Fault(kind="gpu-ecc", node="elsewhere", gpu=0), now=200.0)
    assert health(s.read("c1", NODES, {}, now=201.0), "c1-node-1").sick_gpus == [0]
    assert health(s.read("c1", NODES, {}, now=205.0), "c1-node-1") == hwprobe.NodeHealth()


class NoNvml:
    def nvmlInit(self):
        raise RuntimeError("NVML Shared Library Not Found")


def test_real_sensors_without_devices_report_empty_lists_with_source_none(tmp_path):
    real = RealSensors(hwprobe.NvmlReader(NoNvml()), str(tmp_path / "no-such-dir"))
    out = by_node(real.read("c1", ["host-a"], {}, now=1.0))
    gpu, fabric = out[("gpu", "host-a")], out[("fabric", "host-a")]
    assert (gpu.source, gpu.gpus) == ("none", [])
    assert (fabric.nvlink_source, fabric.infiniband_source, fabric.infiniband) == ("none", "none", [])
    assert health(list(out.values()), "host-a") == hwprobe.NodeHealth()  # nothing read: nothing wrong


@pytest.mark.parametrize(
    "make", [lambda p: RealSensors(hwprobe.NvmlReader(NoNvml()), str(p)), lambda p: NoSensors(real=True)]
)
def test_agents_on_real_machines_label_their_nodes_as_a_kubelet_does(tmp_path, make, monkeypatch):
    monkeypatch.setattr(platform, "machine", lambda: "aarch64")
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    labels = make(tmp_path).labels("host-a")
    assert labels == {"kubernetes.io/hostname": "host-a", "kubernetes.io/os": "linux", "kubernetes.io/arch": "arm64"}


def test_simulated_nodes_without_telemetry_carry_only_their_settings_labels():
    assert NoSensors().labels("sim-0") == {}
