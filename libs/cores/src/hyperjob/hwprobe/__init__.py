"""Hardware readers for node-agents, the simulated fleet, and the health rules, as plain functions.

- ``nvml``: GPUs and NVLink through NVML (``nvidia-ml-py``, imported lazily: absent module or
  driver means "no NVML", never invented values).
- ``infiniband``: ports from ``/sys/class/infiniband/*/ports/*/{state,phys_state,rate,counters/*}``
  (a missing tree means no InfiniBand).
- ``simfleet``: a seeded, deterministic fleet of N nodes with a configurable shape (GPU model and
  count, NVLink domains, leaf and spine switches), plausible telemetry and injected faults.
- ``health``: which GPUs and ports of a node are unfit for new work, from its telemetry.

Invariants: readers only read (files, NVML queries) and return ``events.telemetry`` structs; no
NATS, Redis, clock or randomness inside except the seeded generator and ``now`` passed in.
"""

from .health import FATAL_XIDS, NodeHealth, node_health
from .infiniband import read_ports
from .nvml import NvmlReader, NvmlReading
from .simfleet import Fault, FleetShape, SimulatedNode, build_fleet

__all__ = [
    "FATAL_XIDS",
    "Fault",
    "FleetShape",
    "NodeHealth",
    "NvmlReader",
    "NvmlReading",
    "SimulatedNode",
    "build_fleet",
    "node_health",
    "read_ports",
]
