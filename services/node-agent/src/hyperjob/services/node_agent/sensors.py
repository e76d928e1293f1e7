"""Where a node-agent's telemetry comes from: the simulated fleet, or the real readers.

Both produce, per node, one ``GpuTelemetry`` and one ``FabricTelemetry`` per period, which the
agent publishes on the node's latest-only subjects and judges (``hwprobe.node_health``) into the
node's status. Real mode reads NVML and ``/sys/class/infiniband`` once per
period and reports that reading for every node the agent serves (a real deployment runs one agent
per node); a kind of device that is absent is said once in the log and reported as an empty list
with source ``none`` — real mode never invents values. Simulated mode also injects faults.
"""

from __future__ import annotations

import platform
from collections.abc import Mapping
from typing import Any, Protocol

import structlog

from hyperjob import events, hwprobe
from hyperjob.api.pod import well_known_node_labels
from hyperjob.events import subjects
from hyperjob.events.telemetry import FabricPosition, FabricTelemetry, GpuTelemetry
from hyperjob.hwprobe.simfleet import Fault, parse_fault

PRODUCER = "node-agent"
Reading = GpuTelemetry | FabricTelemetry
log = structlog.get_logger("node-agent")


class Sensors(Protocol):
    """Telemetry for the agent's nodes. ``busy`` maps node → fraction (0..1) of its GPUs in use."""

    def labels(self, node: str) -> dict[str, str]: ...

    def silent(self, node: str) -> bool: ...

    def read(self, cluster: str, nodes: list[str], busy: Mapping[str, float], now: float) -> list[Reading]: ...

    def inject(self, fault: Fault, now: float) -> bool: ...


# A reading's own fields, as a probe gives them: checked by the telemetry struct they are built into.
Fields = dict[str, Any]


def _messages(cluster: str, node: str, now: float, gpu: Fields, fabric: Fields) -> list[Reading]:
    stamp = f"{cluster}/{node}/{now:.3f}"
    return [
        GpuTelemetry(
            event_id=events.derive_id(stamp, "gpu"),
            occurred_at=now,
            producer=PRODUCER,
            cluster=cluster,
            node=node,
            **gpu,
        ),
        FabricTelemetry(
            event_id=events.derive_id(stamp, "fabric"),
            occurred_at=now,
            producer=PRODUCER,
            cluster=cluster,
            node=node,
            **fabric,
        ),
    ]


def subject_of(reading: Reading) -> str:
    if isinstance(reading, GpuTelemetry):
        return subjects.gpu_telemetry(reading.cluster, reading.node)
    return subjects.fabric_telemetry(reading.cluster, reading.node)


class SimulatedSensors:
    """A whole simulated fleet (``hwprobe.simfleet``) with its scheduled and commanded faults.

    Changes only: a period reads the nodes whose load changed or that a fault touched since their
    last reading, and a rolling ``1/refresh_periods`` of the others, so every node is refreshed at
    least every ``refresh_periods`` periods. Between readings a node that nothing touched reports
    nothing new (its telemetry is noise around the same values), and reading all 5,000 nodes of an
    agent every period was most of the idle fleet's CPU.
    """

    def __init__(
        self,
        cluster: str,
        nodes: list[str],
        shape: hwprobe.FleetShape,
        faults: list[str],
        seed: int,
        started: float,
        *,
        refresh_periods: int = 6,
    ) -> None:
        self.fleet = {n.name: n for n in hwprobe.build_fleet(cluster, nodes, shape, seed)}
        self.started = started
        self.pending = sorted((parse_fault(text) for text in faults), key=lambda f: (f.after, f.node))
        self.refresh_periods = max(1, refresh_periods)
        self._touched: set[str] = set(self.fleet)  # every node is read once at the start
        self._load_read: dict[str, float] = {}
        self._period = 0

    def labels(self, node: str) -> dict[str, str]:
        return self.fleet[node].labels if node in self.fleet else {}

    def silent(self, node: str) -> bool:
        return node in self.fleet and self.fleet[node].silent

    def inject(self, fault: Fault, now: float) -> bool:
        node = self.fleet.get(fault.node)
        if node is None:
            return False
        node.apply(fault, now)
        self._touched.add(fault.node)
        log.info("fault_injected", node=fault.node, kind=fault.kind, gpu=fault.gpu, xid=fault.xid, device=fault.device)
        if fault.lasting > 0 and fault.kind != "clear":
            # Recovery is scheduled as a "clear" relative to the start, like the configured faults.
            clear = Fault(kind="clear", node=fault.node, after=now - self.started + fault.lasting)
            self.pending = sorted([*self.pending, clear], key=lambda f: (f.after, f.node))
        return True

    def due(self, now: float) -> None:
        """Apply every configured fault whose time has come."""
        while self.pending and self.started + self.pending[0].after <= now:
            self.inject(self.pending.pop(0), now)

    def due_nodes(self, nodes: list[str], busy: Mapping[str, float]) -> list[str]:
        """The nodes this period reads: touched by a fault, load changed, or their turn to refresh."""
        turn = self._period % self.refresh_periods
        self._period += 1
        return [
            name
            for i, name in enumerate(nodes)
            if name in self._touched
            or busy.get(name, 0.0) != self._load_read.get(name, 0.0)
            or i % self.refresh_periods == turn
        ]

    def read(self, cluster: str, nodes: list[str], busy: Mapping[str, float], now: float) -> list[Reading]:
        self.due(now)
        out: list[Reading] = []
        for name in self.due_nodes(nodes, busy):
            node = self.fleet[name]
            self._touched.discard(name)
            load = busy.get(name, 0.0)
            self._load_read[name] = load
            if node.silent:
                continue
            out += _messages(
                cluster,
                name,
                now,
                {"source": "simulated", "driver_version": "550.54.15", "gpus": node.gpus(load, now)},
                {
                    "nvlink_source": "simulated",
                    "infiniband_source": "simulated",
                    "nvlink": node.nvlinks(),
                    "infiniband": node.infiniband(load, now),
                    "position": node.position,
                },
            )
        return out


# Kubernetes names architectures as Go does.
_GO_ARCH = {
    "x86_64": "amd64",
    "amd64": "amd64",
    "aarch64": "arm64",
    "arm64": "arm64",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
}


def this_machine_labels(node: str) -> dict[str, str]:
    """The well-known labels a kubelet puts on a node running on this machine."""
    machine = platform.machine().lower()
    return well_known_node_labels(node, os=platform.system().lower(), arch=_GO_ARCH.get(machine, machine))


class RealSensors:
    """NVML and sysfs on this machine; absent devices are reported as none, once said in the log."""

    def __init__(self, nvml: hwprobe.NvmlReader, infiniband_root: str) -> None:
        self.nvml = nvml
        self.infiniband_root = infiniband_root
        if not nvml.open():
            log.warning("no_gpu_telemetry", reason=nvml.why_not)
        self.ib_present = hwprobe.read_ports(infiniband_root) is not None
        if not self.ib_present:
            log.warning("no_infiniband_telemetry", reason=f"{infiniband_root} does not exist")

    def labels(self, node: str) -> dict[str, str]:
        return this_machine_labels(node)

    def silent(self, node: str) -> bool:
        return False

    def inject(self, fault: Fault, now: float) -> bool:
        log.warning("fault_ignored_in_real_mode", node=fault.node, kind=fault.kind)
        return False

    def read(self, cluster: str, nodes: list[str], busy: Mapping[str, float], now: float) -> list[Reading]:
        gpus = self.nvml.read(now)
        ports = hwprobe.read_ports(self.infiniband_root) if self.ib_present else None
        gpu = {"source": gpus.source, "driver_version": gpus.driver_version, "gpus": gpus.gpus}
        fabric = {
            "nvlink_source": gpus.source,
            "infiniband_source": "sysfs" if ports is not None else "none",
            "nvlink": gpus.links,
            "infiniband": ports or [],
            "position": FabricPosition(),
        }
        out: list[Reading] = []
        for node in nodes:
            out += _messages(cluster, node, now, gpu, fabric)
        return out


class NoSensors:
    """Telemetry switched off: heartbeats only. ``real`` nodes (exec mode) are this machine and
    carry its well-known labels; simulated ones carry only what their settings say."""

    def __init__(self, *, real: bool = False) -> None:
        self.real = real

    def labels(self, node: str) -> dict[str, str]:
        return this_machine_labels(node) if self.real else {}

    def silent(self, node: str) -> bool:
        return False

    def inject(self, fault: Fault, now: float) -> bool:
        return False

    def read(self, cluster: str, nodes: list[str], busy: Mapping[str, float], now: float) -> list[Reading]:
        return []
