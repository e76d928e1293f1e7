"""The nodes of one session as numpy matrices (node x resource), sorted by name.

``idle = allocatable - used``; ``fidle`` (FutureIdle) ``= idle + releasing - pipelined``. Every
mutation appends the node's row to ``dirty`` so cached per-pod-shape fit/score vectors can
refresh just the rows that changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from .model import NodeInfo
from .resources import DEFAULT_PODS, GPU, PODS, ResourceSpace

if TYPE_CHECKING:
    from .state import TaskState

TIER_LABEL = "topology.hyperjob.io/tier"
DEVICE_CORES = 100.0


def _rows(nodes: list[NodeInfo], names: list[str]) -> list[tuple[float, ...]]:
    # Clusters have few node shapes: build each distinct allocatable row once.
    cache: dict[tuple[tuple[str, float], ...], tuple[float, ...]] = {}
    out = []
    for n in nodes:
        key = tuple(n.allocatable.items())
        row = cache.get(key)
        if row is None:
            row = cache[key] = tuple(n.allocatable.get(r, 0.0) for r in names)
        out.append(row)
    return out


class NodeBase:
    """What a node table starts from, built from the nodes alone (no pod placed yet): a
    ``Carry`` keeps it while the snapshot's nodes are the same objects. Read-only: every table
    copies what it changes."""

    def __init__(self, nodes: Sequence[NodeInfo], space: ResourceSpace) -> None:
        ready = sorted((n for n in nodes if n.ready), key=lambda n: n.name)
        self.infos = ready
        self.names = [n.name for n in ready]
        self.index = {name: i for i, name in enumerate(self.names)}
        self.size = len(ready)
        self.not_ready = len(nodes) - self.size
        self.alloc = np.array(_rows(ready, space.names), dtype=float).reshape(self.size, space.size)
        for i, n in enumerate(ready):
            if PODS not in n.allocatable:
                self.alloc[i, space.pods] = DEFAULT_PODS
        self.unschedulable = np.array([n.unschedulable for n in ready], dtype=bool)
        gpus = [int(n.allocatable.get(GPU, 0)) for n in ready]
        self.max_devices = max(gpus, default=0)
        self.device_free = np.full((self.size, max(self.max_devices, 1)), -1.0)
        for i, g in enumerate(gpus):
            self.device_free[i, :g] = DEVICE_CORES
        self.total = self.alloc.sum(axis=0) if self.size else np.zeros(space.size)


class NodeTable:
    """Dense node state; row order is node-name order, which is also the tie-break order."""

    def __init__(self, nodes: Sequence[NodeInfo], space: ResourceSpace, base: NodeBase | None = None) -> None:
        base = base if base is not None else NodeBase(nodes, space)
        self.infos = list(base.infos)
        self.names = list(base.names)
        self.index = dict(base.index)
        self.size = base.size
        self.not_ready = base.not_ready  # listed but NotReady: not in the table at all
        self.space = space
        self.alloc = base.alloc.copy()
        self.idle = self.alloc.copy()
        self.releasing = np.zeros_like(self.alloc)
        self.pipelined = np.zeros_like(self.alloc)
        self.fidle = self.alloc.copy()
        self.unschedulable = base.unschedulable.copy()
        self.dirty: list[int] = []
        self.tasks: list[list[TaskState]] = [[] for _ in range(self.size)]
        # Pods pipelined onto a node (waiting for what its releasing pods give back), by row: they
        # hold no device yet, but the devices that come free are theirs first.
        self.pipelined_tasks: dict[int, list[TaskState]] = {}
        self._columns: dict[str, np.ndarray] = {}
        self.max_devices = base.max_devices
        self.device_free = base.device_free.copy()
        self.total = base.total.copy()

    def column(self, key: str) -> np.ndarray:
        """Label values of every node for ``key`` (None where absent), computed once."""
        col = self._columns.get(key)
        if col is None:
            col = np.array([n.labels.get(key) for n in self.infos], dtype=object)
            self._columns[key] = col
        return col

    def used(self) -> np.ndarray:
        used: np.ndarray = self.alloc - self.idle
        return used

    def change(
        self,
        row: int,
        idle: np.ndarray | None = None,
        releasing: np.ndarray | None = None,
        pipelined: np.ndarray | None = None,
    ) -> None:
        """Add the given deltas to one node's row and keep FutureIdle consistent."""
        if idle is not None:
            self.idle[row] += idle
            self.fidle[row] += idle
        if releasing is not None:
            self.releasing[row] += releasing
            self.fidle[row] += releasing
        if pipelined is not None:
            self.pipelined[row] += pipelined
            self.fidle[row] -= pipelined
        self.dirty.append(row)

    def tiers(self) -> int:
        """The highest ``topology.hyperjob.io/tierN`` label any node carries (0: no topology)."""
        top = 0
        keys = {k for n in self.infos for k in n.labels if k.startswith(TIER_LABEL)}
        for k in keys:
            suffix = k[len(TIER_LABEL) :]
            if suffix.isdigit():
                top = max(top, int(suffix))
        return top

    def vgpu_fit(self, number: int, cores: float) -> np.ndarray:
        """Nodes with at least ``number`` GPU devices that each have ``cores`` free."""
        fit: np.ndarray = (self.device_free >= cores - 1e-9).sum(axis=1) >= number
        return fit

    def best_fit_devices(self, row: int, number: int, cores: float) -> tuple[int, ...]:
        """The devices with the least free cores that still hold ``cores``, ties by index."""
        free = self.device_free[row]
        order = sorted((float(free[d]), d) for d in range(len(free)) if free[d] >= cores - 1e-9)
        return tuple(d for _, d in order[:number])

    def holds(self, row: int, devices: tuple[int, ...], number: int, cores: float) -> bool:
        """Are ``devices`` ``number`` distinct devices of ``row`` that each have ``cores`` free."""
        free = self.device_free[row]
        if number == 1 == len(devices):
            # The common case (one whole GPU, asked again by every session for every running pod),
            # the same test without the set and the generator.
            return 0 <= devices[0] < len(free) and bool(free[devices[0]] >= cores - 1e-9)
        return len(devices) == number == len(set(devices)) and all(
            0 <= d < len(free) and free[d] >= cores - 1e-9 for d in devices
        )

    def take_devices(self, row: int, number: int, cores: float, devices: tuple[int, ...] = ()) -> tuple[int, ...]:
        """Take ``devices`` when they hold the request, else the best-fit ones; return those taken."""
        chosen = (
            devices
            if devices and self.holds(row, devices, number, cores)
            else self.best_fit_devices(row, number, cores)
        )
        free = self.device_free[row]
        for d in chosen:
            free[d] -= cores
        return chosen

    def future_devices_fit(self, row: int, number: int, cores: float) -> bool:
        """Would ``number`` devices of ``row`` each have ``cores`` free once its releasing pods are
        gone and its pipelined pods took theirs (FutureIdle per device, as Volcano counts what
        victims release): the last check before preempt or reclaim commits an eviction."""
        free = self.device_free[row].copy()
        for t in self.tasks[row]:
            if t.status == "Releasing" and t.devices:
                free[list(t.devices)] += t.vgpu[1]
        for t in self.pipelined_tasks.get(row, ()):
            want, each = t.vgpu
            best = sorted((float(free[d]), d) for d in range(len(free)) if free[d] >= each - 1e-9)[:want]
            free[[d for _, d in best]] -= each
        return int((free >= cores - 1e-9).sum()) >= number

    def give_devices(self, row: int, devices: tuple[int, ...], cores: float) -> None:
        for d in devices:
            self.device_free[row, d] += cores
