"""Facts from node-agents about the hardware: GPUs, the fabric (NVLink, InfiniBand), and faults.

Published per node on a fixed period on ``telemetry.gpu.<cluster>.<node>`` and
``telemetry.fabric.<cluster>.<node>`` into the latest-only ``TELEMETRY`` stream (one message kept
per subject), so a reader gets every node's current value in one pass and nothing grows.

``source`` says where the values came from: ``nvml`` / ``sysfs`` (real readers), ``simulated``
(``hyperjob agent --simulate``), or ``none`` (real mode on a machine without that kind of device:
the lists are empty, never invented). Counters are raw and monotonic as the hardware reports them;
health is judged by the reader of the event (the cluster-scheduler), not by the agent.

``InjectNodeFault`` is the one command here: it makes a *simulated* fleet misbehave (a GPU XID
error, an InfiniBand port down, a node that stops heartbeating) or recover, for tests and drills.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from .base import Message


class XidEvent(msgspec.Struct, frozen=True, kw_only=True):
    """One Xid error NVML reported for a GPU (``xid`` is NVIDIA's code, ``at`` epoch seconds)."""

    xid: int
    at: float


class GpuDevice(msgspec.Struct, frozen=True, kw_only=True):
    """One GPU as NVML sees it. A value NVML does not support on the device is ``None``."""

    index: int
    uuid: str = ""
    model: str = ""
    memory_total_bytes: int = 0
    memory_used_bytes: int = 0
    utilization_percent: float | None = None
    temperature_celsius: float | None = None
    power_watts: float | None = None
    ecc_corrected: int | None = None  # volatile (since the last driver load / GPU reset)
    ecc_uncorrected: int | None = None  # volatile; > 0 makes the GPU unhealthy
    xid_events: list[XidEvent] = []  # the Xids seen within the agent's hold window


class NvLink(msgspec.Struct, frozen=True, kw_only=True):
    """One NVLink of one GPU. ``bandwidth_gb_per_s`` is the link's nominal bidirectional rate."""

    link: int
    up: bool
    version: int | None = None
    bandwidth_gb_per_s: float = 0.0


class GpuLinks(msgspec.Struct, frozen=True, kw_only=True):
    gpu: int
    links: list[NvLink] = []


class IbPort(msgspec.Struct, frozen=True, kw_only=True):
    """One InfiniBand port from ``/sys/class/infiniband/<device>/ports/<port>``.

    ``state`` is the logical state name (``ACTIVE``, ``DOWN``, ``INIT``, ``ARMED``), ``phys_state``
    the physical one (``LinkUp``, ``Polling``, ``Disabled``); ``counters`` holds every file under
    ``counters/`` (``port_rcv_data``, ``port_xmit_data``, ``symbol_error``, ``link_downed``, ...).
    """

    device: str
    port: int
    state: str
    phys_state: str = ""
    rate_gbps: float = 0.0
    link_layer: str = "InfiniBand"
    counters: dict[str, int] = {}


class FabricPosition(msgspec.Struct, frozen=True, kw_only=True):
    """Where a node sits in the fabric; empty strings when unknown."""

    nvlink_domain: str = ""
    leaf: str = ""
    spine: str = ""


class GpuTelemetry(Message, frozen=True, kw_only=True, tag="node.telemetry.gpu.v1"):
    cluster: str
    node: str
    source: Literal["nvml", "simulated", "none"] = "none"
    driver_version: str = ""
    gpus: list[GpuDevice] = []


class FabricTelemetry(Message, frozen=True, kw_only=True, tag="node.telemetry.fabric.v1"):
    cluster: str
    node: str
    nvlink_source: Literal["nvml", "simulated", "none"] = "none"
    infiniband_source: Literal["sysfs", "simulated", "none"] = "none"
    nvlink: list[GpuLinks] = []
    infiniband: list[IbPort] = []
    position: FabricPosition = FabricPosition()


FaultKind = Literal["gpu-xid", "gpu-ecc", "ib-down", "silent", "clear", "node-down", "node-up", "pod-exit"]


class InjectNodeFault(Message, frozen=True, kw_only=True, tag="node.fault.inject.v1"):
    """Make a simulated node misbehave, or (``kind="clear"``) recover from every injected fault.

    ``gpu`` and ``xid`` matter for ``gpu-xid`` (default Xid 79, "GPU has fallen off the bus") and
    ``gpu-ecc``; ``device``/``port`` for ``ib-down`` (default: the node's first port).
    ``node-down``/``node-up``: the node fails (reported NotReady at once, its pods lost) and
    comes back. ``pod-exit``: the container of ``pod`` exits now with ``exit_code`` (``node``
    may be empty: the agent that runs the pod takes it). A real-mode agent ignores node faults:
    it never invents values.
    """

    cluster: str
    node: str = ""
    pod: str = ""
    exit_code: int = 1
    kind: FaultKind = "gpu-xid"
    gpu: int = 0
    xid: int = 79
    device: str = ""
    port: int = 1
