"""The real readers against recorded sysfs trees and a fake NVML: real values only, never invented."""

from pathlib import Path

import pytest

from hyperjob.hwprobe import NvmlReader, read_ports
from hyperjob.hwprobe.nvml import NVLINK_GB_PER_S
from tests.unit.hwprobe.fake_nvml import FakeNvml, NVMLError, h100

FIXTURES = Path(__file__).parent / "fixtures"


def test_infiniband_ports_are_read_with_state_rate_and_counters():
    ports = read_ports(FIXTURES / "dgx-h100/sys/class/infiniband")
    assert [(p.device, p.port, p.state, p.phys_state, p.rate_gbps, p.link_layer) for p in ports] == [
        ("mlx5_0", 1, "ACTIVE", "LinkUp", 400.0, "InfiniBand"),
        ("mlx5_1", 1, "ACTIVE", "LinkUp", 400.0, "InfiniBand"),
        ("mlx5_2", 1, "DOWN", "Polling", 10.0, "InfiniBand"),
        ("mlx5_bond_0", 1, "ACTIVE", "LinkUp", 100.0, "Ethernet"),
    ]
    assert ports[0].counters["port_xmit_data"] == 98231243214
    assert ports[1].counters["symbol_error"] == 12
    assert ports[2].counters["link_downed"] == 2


def test_malformed_or_unreadable_files_leave_only_that_value_out():
    ports = read_ports(FIXTURES / "odd-files/sys/class/infiniband")
    assert [(p.port, p.state, p.rate_gbps) for p in ports] == [(1, "INIT", 56.0), (2, "ACTIVE", 0.0)]
    assert ports[1].counters == {"port_xmit_data": 7}  # "n/a" is not a counter value
    assert ports[0].counters == {}


@pytest.mark.parametrize("tree", ["no-infiniband/sys/class/infiniband", "does-not-exist"])
def test_no_sysfs_tree_means_no_infiniband(tree):
    assert read_ports(FIXTURES / tree) is None


def test_nvml_reads_every_gpu_and_its_nvlinks():
    fake = FakeNvml([h100(0), h100(1, links=[True, False, True], ecc=(0, 2), temp=None)])
    reader = NvmlReader(fake)
    assert reader.open()
    reading = reader.read(now=100.0)
    assert reading.source == "nvml" and reading.driver_version == "550.54.15"
    first, second = reading.gpus
    assert (first.model, first.uuid, first.memory_total_bytes, first.utilization_percent, first.power_watts) == (
        "NVIDIA H100 80GB HBM3",
        "GPU-0000",
        85899345920,
        97.0,
        650.0,
    )
    assert (first.ecc_corrected, first.ecc_uncorrected, first.temperature_celsius) == (3, 0, 71.0)
    assert second.temperature_celsius is None  # unsupported: unknown, not zero
    assert second.ecc_uncorrected == 2
    assert len(reading.links[0].links) == 18
    assert [(link.up, link.bandwidth_gb_per_s) for link in reading.links[1].links] == [
        (True, NVLINK_GB_PER_S[4]),
        (False, 0.0),
        (True, NVLINK_GB_PER_S[4]),
    ]


def test_xid_events_are_drained_and_held_for_the_hold_window():
    fake = FakeNvml([h100(0), h100(1)])
    reader = NvmlReader(fake, xid_hold=60.0)
    reader.open()
    fake.pending_xids = [(1, 79), (1, 13)]
    assert [x.xid for x in reader.read(now=10.0).gpus[1].xid_events] == [79, 13]
    assert reader.read(now=69.0).gpus[1].xid_events  # still within the hold window
    assert reader.read(now=71.0).gpus[1].xid_events == []
    assert reader.read(now=71.0).gpus[0].xid_events == []


def test_bytes_from_older_pynvml_are_decoded():
    reader = NvmlReader(FakeNvml([h100(0, name=b"NVIDIA A100-SXM4-80GB")], driver=b"535.1"))
    reader.open()
    reading = reader.read(now=0.0)
    assert (reading.driver_version, reading.gpus[0].model) == ("535.1", "NVIDIA A100-SXM4-80GB")


@pytest.mark.parametrize(
    ("fake", "why"),
    [
        (FakeNvml([], init_error=NVMLError("Driver Not Loaded")), "NVML could not start: Driver Not Loaded"),
        (FakeNvml([]), "NVML reports no GPU"),
    ],
    ids=["no-driver", "no-gpu"],
)
def test_without_nvml_there_are_no_gpus_and_a_reason(fake, why):
    reader = NvmlReader(fake)
    assert not reader.open()
    assert reader.why_not == why
    assert reader.read(now=0.0).source == "none" and reader.read(now=0.0).gpus == []


def test_without_the_pynvml_module_there_is_no_nvml(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_pynvml(name, *args, **kwargs):
        if name == "pynvml":
            raise ImportError("No module named 'pynvml'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pynvml)
    reader = NvmlReader()
    assert not reader.open()
    assert "not installed" in reader.why_not


def test_close_shuts_nvml_down():
    fake = FakeNvml([h100(0)])
    reader = NvmlReader(fake)
    reader.open()
    reader.close()
    assert fake.shut and reader.read(now=0.0).source == "none"
