"""Which parts of a node are unfit for new work, judged from its latest telemetry.

A GPU is sick with uncorrectable (volatile) ECC errors or a fatal Xid in its recent history; an
InfiniBand port is sick when it is not ``ACTIVE`` (Ethernet-layer ports are ignored). A node with
a sick GPU takes no new GPU pods; a node with a sick IB port takes no pods of multi-node jobs.
Both recover as soon as the telemetry does. Pure.
"""

from __future__ import annotations

import msgspec

from hyperjob.events.telemetry import FabricTelemetry, GpuTelemetry

# Xids NVIDIA documents as hardware or driver faults that need a GPU reset or node drain (not the
# ones an application causes, such as 13, 31 or 43): double-bit ECC (48), micro-controller halt
# (61, 62), row remapping (63, 64), NVLink (74), fallen off the bus (79), ECC rate (92), contained
# and uncontained ECC (94, 95), GSP (119, 120), and uncorrectable memory errors (140).
FATAL_XIDS = frozenset({48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120, 140})


class NodeHealth(msgspec.Struct, frozen=True, kw_only=True):
    sick_gpus: list[int] = []
    down_ports: list[str] = []  # "<device>/<port>"
    reasons: list[str] = []

    @property
    def gpu_ok(self) -> bool:
        return not self.sick_gpus

    @property
    def fabric_ok(self) -> bool:
        return not self.down_ports


def node_health(gpu: GpuTelemetry | None, fabric: FabricTelemetry | None) -> NodeHealth:
    """The health of one node; no telemetry of a kind means nothing is known to be wrong with it."""
    sick, down, reasons = [], [], []
    for device in gpu.gpus if gpu is not None else []:
        fatal = sorted({x.xid for x in device.xid_events if x.xid in FATAL_XIDS})
        if device.ecc_uncorrected:
            reasons.append(f"gpu{device.index}: {device.ecc_uncorrected} uncorrectable ECC errors")
        if fatal:
            reasons.append(f"gpu{device.index}: fatal Xid {', '.join(map(str, fatal))}")
        if device.ecc_uncorrected or fatal:
            sick.append(device.index)
    for port in fabric.infiniband if fabric is not None else []:
        if port.link_layer == "InfiniBand" and port.state != "ACTIVE":
            down.append(f"{port.device}/{port.port}")
            reasons.append(f"ib {port.device}/{port.port}: {port.state}")
    return NodeHealth(sick_gpus=sick, down_ports=down, reasons=reasons)
