"""The simulated fleet's sensors: configured faults happen on time and recover after their duration;
silent nodes publish nothing; real sensors report no devices where there are none."""

import msgspec

import hwprobe
from events.telemetry import FabricTelemetry, GpuTelemetry
from node_agent.sensors import RealSensors, SimulatedSensors

NODES = ["c1-node-0", "c1-node-1"]


def sensors(*faults):
    return SimulatedSensors("c1", NODES, hwprobe.FleetShape(gpus_per_node=2), list(faults), seed=0, started=100.0)


def decoded(outgoing):
    return {(subject.split(".")[1], subject.rsplit(".", 1)[-1]): msgspec.json.decode(
        data, type=GpuTelemetry if ".gpu." in subject else FabricTelemetry) for subject, _, data in outgoing}


def test_a_configured_fault_happens_after_its_delay_and_clears_after_its_duration():
    s = sensors("gpu-ecc@c1-node-1,gpu=1,after=10,for=20")
    assert decoded(s.read("c1", NODES, {}, now=109.0))[("gpu", "c1-node-1")].gpus[1].ecc_uncorrected == 0
    assert decoded(s.read("c1", NODES, {}, now=110.0))[("gpu", "c1-node-1")].gpus[1].ecc_uncorrected == 1
    assert decoded(s.read("c1", NODES, {}, now=129.0))[("gpu", "c1-node-1")].gpus[1].ecc_uncorrected == 1
    assert decoded(s.read("c1", NODES, {}, now=130.0))[("gpu", "c1-node-1")].gpus[1].ecc_uncorrected == 0


def test_a_silent_node_publishes_no_telemetry_and_unknown_nodes_are_ignored():
    s = sensors("silent@c1-node-0", "silent@nowhere")
    out = decoded(s.read("c1", NODES, {}, now=100.0))
    assert sorted(out) == [("fabric", "c1-node-1"), ("gpu", "c1-node-1")]
    assert s.silent("c1-node-0") and not s.silent("c1-node-1")


def test_every_message_names_its_node_and_source_and_ids_are_deterministic():
    first, second = sensors().read("c1", NODES, {"c1-node-0": 1.0}, now=5.0), sensors().read("c1", NODES, {}, now=5.0)
    assert [msg_id for _, msg_id, _ in first] == [msg_id for _, msg_id, _ in second]
    gpu = decoded(first)[("gpu", "c1-node-0")]
    assert (gpu.node, gpu.source, len(gpu.gpus)) == ("c1-node-0", "simulated", 2)


class NoNvml:
    def nvmlInit(self):
        raise RuntimeError("NVML Shared Library Not Found")


def test_real_sensors_without_devices_report_empty_lists_with_source_none(tmp_path):
    real = RealSensors(hwprobe.NvmlReader(NoNvml()), str(tmp_path / "no-such-dir"))
    out = decoded(real.read("c1", ["host-a"], {}, now=1.0))
    gpu, fabric = out[("gpu", "host-a")], out[("fabric", "host-a")]
    assert (gpu.source, gpu.gpus) == ("none", [])
    assert (fabric.nvlink_source, fabric.infiniband_source, fabric.infiniband) == ("none", "none", [])
