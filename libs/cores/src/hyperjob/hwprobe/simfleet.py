"""A simulated fleet: N nodes of one cluster with a shape, plausible telemetry, and injected faults.

Shape: GPU model and count per node, NVLinks per GPU, nodes per NVLink domain, nodes per leaf
switch, leaves per spine, InfiniBand ports (one HCA per GPU by default, rail-optimised). Each node
carries its fabric position as labels (``topology.hyperjob.io/tier1`` = its NVLink domain when a
domain spans several nodes, else its leaf switch; ``tier2`` = its spine), next to the kubelet's
well-known ``kubernetes.io/hostname``, ``kubernetes.io/os`` (linux) and ``kubernetes.io/arch`` (amd64).

Telemetry follows the load the agent reports (busy GPUs run hot and draw power, busy ports move
bytes); counters only grow. Every node has its own generator seeded from (seed, node name), so the
same calls give the same values. Faults (``Fault``) stick until cleared: a Xid or ECC error on a
GPU, an InfiniBand port down, or a node that stops heartbeating.
"""

from __future__ import annotations

import functools
import random
import zlib
from typing import Literal

import msgspec

from hyperjob.api.pod import well_known_node_labels
from hyperjob.events.telemetry import FabricPosition, GpuDevice, GpuLinks, IbPort, NvLink, XidEvent

from .nvml import NVLINK_GB_PER_S

GiB = 1 << 30
TIER1, TIER2 = "topology.hyperjob.io/tier1", "topology.hyperjob.io/tier2"
# model -> (memory bytes, idle watts, max watts)
GPU_MODELS = {
    "H100": (80 * GiB, 70.0, 700.0),
    "H200": (141 * GiB, 75.0, 700.0),
    "A100": (80 * GiB, 55.0, 400.0),
    "B200": (192 * GiB, 120.0, 1000.0),
    "L40S": (48 * GiB, 35.0, 350.0),
}
IB_RATE_NAME = {100.0: "4X EDR", 200.0: "4X HDR", 400.0: "4X NDR", 800.0: "4X XDR"}


class FleetShape(msgspec.Struct, frozen=True, kw_only=True):
    gpu_model: str = "H100"
    gpus_per_node: int = 8
    nvlinks_per_gpu: int = 18
    nvlink_version: int = 4
    nodes_per_nvlink_domain: int = 1
    nodes_per_leaf: int = 4
    leaves_per_spine: int = 4
    ib_ports_per_node: int = -1  # -1: one HCA per GPU
    ib_rate_gbps: float = 400.0


class Fault(msgspec.Struct, frozen=True, kw_only=True):
    """A fault to inject into one node, ``after`` seconds from the start, lasting ``lasting`` (0: until cleared)."""

    kind: Literal["gpu-xid", "gpu-ecc", "ib-down", "silent", "clear"]
    node: str
    gpu: int = 0
    xid: int = 79
    device: str = ""
    port: int = 1
    after: float = 0.0
    lasting: float = 0.0


def parse_fault(text: str) -> Fault:
    """``KIND@NODE[,key=value...]``, e.g. ``gpu-xid@c1-node-3,gpu=2,xid=79,after=30,for=60``."""
    head, *options = text.split(",")
    kind, at, node = head.partition("@")
    if not at or not node:
        raise ValueError(f"fault {text!r}: expected KIND@NODE[,key=value...]")
    fields: dict[str, object] = {"kind": kind.strip(), "node": node.strip()}
    for option in options:
        key, eq, value = option.partition("=")
        if not eq:
            raise ValueError(f"fault {text!r}: option {option!r} is not key=value")
        fields["lasting" if key.strip() == "for" else key.strip()] = value.strip()
    try:
        return msgspec.convert(fields, Fault, strict=False)
    except msgspec.ValidationError as exc:
        raise ValueError(f"fault {text!r}: {exc}") from None


class _Port(msgspec.Struct, kw_only=True):
    device: str
    up: bool = True
    counters: dict[str, int] = {}


class SimulatedNode:
    """One simulated node: its place in the fabric, its devices' state, and its faults."""

    def __init__(self, name: str, position: FabricPosition, shape: FleetShape, seed: int = 0) -> None:
        self.name = name
        self.position = position
        self.shape = shape
        self.silent = False
        self.rng = random.Random(zlib.crc32(f"{seed}/{name}".encode()))
        self.xids: dict[int, list[XidEvent]] = {}
        self.ecc_uncorrected: dict[int, int] = {}
        self.ecc_corrected = [0] * shape.gpus_per_node
        ports = shape.gpus_per_node if shape.ib_ports_per_node < 0 else shape.ib_ports_per_node
        self.ports = [_Port(device=f"mlx5_{i}", counters=dict.fromkeys(_COUNTERS, 0)) for i in range(ports)]
        self.last = 0.0

    @functools.cached_property
    def labels(self) -> dict[str, str]:
        """Fixed by the node's place in the fabric: built once (the agent compares them every
        heartbeat, for every node). Read-only."""
        p = self.position
        tier1 = p.nvlink_domain if self.shape.nodes_per_nvlink_domain > 1 else p.leaf
        return {
            **well_known_node_labels(self.name),
            TIER1: tier1,
            TIER2: p.spine,
            "hyperjob.io/nvlink-domain": p.nvlink_domain,
            "hyperjob.io/leaf": p.leaf,
            "hyperjob.io/spine": p.spine,
            "nvidia.com/gpu.product": self.shape.gpu_model,
            "nvidia.com/gpu.count": str(self.shape.gpus_per_node),
        }

    def apply(self, fault: Fault, now: float) -> None:
        """Inject (or with ``clear``, undo) a fault; a GPU or port the node lacks is ignored."""
        gpus = range(self.shape.gpus_per_node)
        if fault.kind == "clear":
            self.silent = False
            self.xids.clear()
            self.ecc_uncorrected.clear()  # volatile counters reset with the GPU
            for port in self.ports:
                port.up = True
        elif fault.kind == "silent":
            self.silent = True
        elif fault.kind == "gpu-xid" and fault.gpu in gpus:
            self.xids.setdefault(fault.gpu, []).append(XidEvent(xid=fault.xid, at=now))
        elif fault.kind == "gpu-ecc" and fault.gpu in gpus:
            self.ecc_uncorrected[fault.gpu] = self.ecc_uncorrected.get(fault.gpu, 0) + 1
        elif fault.kind == "ib-down":
            for port in self.ports:
                if port.device == (fault.device or self.ports[0].device) and port.up:
                    port.up = False
                    port.counters["link_downed"] += 1

    def gpus(self, busy: float, now: float) -> list[GpuDevice]:
        """Telemetry of every GPU with ``busy`` (0..1) of them in use."""
        memory, idle_w, max_w = GPU_MODELS.get(self.shape.gpu_model, GPU_MODELS["H100"])
        in_use = round(busy * self.shape.gpus_per_node)
        out = []
        for i in range(self.shape.gpus_per_node):
            load = self.rng.uniform(0.85, 1.0) if i < in_use else self.rng.uniform(0.0, 0.02)
            if self.rng.random() < 0.001:
                self.ecc_corrected[i] += 1  # the odd corrected bit flip, as real fleets show
            out.append(
                GpuDevice(
                    index=i,
                    uuid=f"GPU-{zlib.crc32(f'{self.name}/{i}'.encode()):08x}",
                    model=f"NVIDIA {self.shape.gpu_model}",
                    memory_total_bytes=memory,
                    memory_used_bytes=int(memory * (0.6 + 0.3 * load) if i < in_use else 0.5 * GiB),
                    utilization_percent=round(100 * load, 1),
                    temperature_celsius=round(32 + 45 * load + self.rng.uniform(-1, 1), 1),
                    power_watts=round(idle_w + (max_w - idle_w) * load, 1),
                    ecc_corrected=self.ecc_corrected[i],
                    ecc_uncorrected=self.ecc_uncorrected.get(i, 0),
                    xid_events=list(self.xids.get(i, [])),
                )
            )
        return out

    def nvlinks(self) -> list[GpuLinks]:
        per_link = NVLINK_GB_PER_S.get(self.shape.nvlink_version, 0.0)
        links = [
            NvLink(link=k, up=True, version=self.shape.nvlink_version, bandwidth_gb_per_s=per_link)
            for k in range(self.shape.nvlinks_per_gpu)
        ]
        return [GpuLinks(gpu=i, links=links) for i in range(self.shape.gpus_per_node)]

    def infiniband(self, busy: float, now: float) -> list[IbPort]:
        """Ports with counters grown by the traffic since the last reading (data counters in 4-byte words)."""
        elapsed = max(0.0, now - self.last) if self.last else 0.0
        self.last = now
        out = []
        for port in self.ports:
            if port.up:
                words = int(self.shape.ib_rate_gbps * 1e9 / 8 / 4 * elapsed * busy * self.rng.uniform(0.3, 0.6))
                for direction in ("xmit", "rcv"):
                    port.counters[f"port_{direction}_data"] += words
                    port.counters[f"port_{direction}_packets"] += words // 1024
            out.append(
                IbPort(
                    device=port.device,
                    port=1,
                    state="ACTIVE" if port.up else "DOWN",
                    phys_state="LinkUp" if port.up else "Polling",
                    rate_gbps=self.shape.ib_rate_gbps if port.up else 0.0,
                    counters=dict(port.counters),
                )
            )
        return out


_COUNTERS = (
    "port_xmit_data",
    "port_rcv_data",
    "port_xmit_packets",
    "port_rcv_packets",
    "symbol_error",
    "link_downed",
    "link_error_recovery",
    "port_rcv_errors",
    "port_xmit_discards",
)


def position(cluster: str, index: int, shape: FleetShape) -> FabricPosition:
    leaf = index // max(1, shape.nodes_per_leaf)
    return FabricPosition(
        nvlink_domain=f"{cluster}-nvl{index // max(1, shape.nodes_per_nvlink_domain)}",
        leaf=f"{cluster}-leaf{leaf}",
        spine=f"{cluster}-spine{leaf // max(1, shape.leaves_per_spine)}",
    )


def build_fleet(cluster: str, names: list[str], shape: FleetShape, seed: int = 0) -> list[SimulatedNode]:
    """The nodes of ``cluster`` in order, each placed in the fabric by its position in ``names``."""
    return [SimulatedNode(name, position(cluster, i, shape), shape, seed) for i, name in enumerate(names)]
