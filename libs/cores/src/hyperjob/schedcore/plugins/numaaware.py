"""numa-aware: CPU placement inside a node's NUMA nodes for tasks with a ``topologyPolicy``.

Volcano's plugin (``pkg/scheduler/plugins/numaaware``, ed72c7c81) reads each node's NUMA layout
and kubelet policies from the resource-exporter's Numatopology objects. Here a node declares them
as labels (``hyperjob simulate`` writes them from a scenario node's ``numa`` entry):

* ``numa.hyperjob.io/cpus``: CPUs per NUMA node, e.g. ``"16,16"``;
* ``numa.hyperjob.io/topology-manager-policy``: the kubelet's topology manager policy;
* ``numa.hyperjob.io/cpu-manager-policy``: the kubelet's CPU manager policy (``static`` to pin).

Only tasks with a policy (``TaskInfo.topology_policy``: set for Guaranteed pods only) are
concerned. Such a task fits a node only if the node has NUMA information, a ``static`` CPU
manager and the same topology manager policy as the task (Volcano's ``filterNodeByPolicy``); then,
for a whole-CPU request of R exclusive CPUs against the CPUs still free in each NUMA node:

* ``single-numa-node``: one NUMA node must have R free;
* ``restricted``: R must fit in the fewest NUMA nodes that could ever hold it (kubelet's preferred
  hint: k nodes, k the smallest number whose capacity holds R);
* ``best-effort``: always admitted; the narrowest fitting set is used when there is one.

A fractional CPU request gets no exclusive CPUs (the kubelet's shared pool) and is admitted.
The chosen NUMA nodes are the lowest-numbered set that fits; an allocation takes the CPUs from them
and an eviction or undo gives them back. Scores prefer nodes where the task spans fewer NUMA
nodes: ``weight × 100 × (1 − span / most NUMA nodes on any node)``. Simplification: the whole pod's
CPU request is placed at once (Volcano asks per container), and pods already running when the
session opens are counted against NUMA nodes in the same lowest-first order.
"""

from __future__ import annotations

from itertools import combinations

import msgspec
import numpy as np

from ..framework import DynamicFit, EventHandler, NodeScore, Plugin, ScalarScore, SessionView
from ..state import TaskState

CPUS_LABEL = "numa.hyperjob.io/cpus"
TOPOLOGY_POLICY_LABEL = "numa.hyperjob.io/topology-manager-policy"
CPU_MANAGER_LABEL = "numa.hyperjob.io/cpu-manager-policy"
POLICIES = ("single-numa-node", "restricted", "best-effort")


class NumaArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    weight: float = 1.0


def numa_cpus(labels: dict[str, str]) -> tuple[float, ...] | None:
    """A node's CPUs per NUMA node from its label, or None when it declares none (or nonsense)."""
    text = labels.get(CPUS_LABEL)
    if not text:
        return None
    try:
        cpus = tuple(float(part) for part in text.split(","))
    except ValueError:
        return None
    return cpus if cpus and all(c > 0 for c in cpus) else None


def choose(free: np.ndarray, capacity: tuple[float, ...], request: float, policy: str) -> tuple[int, ...] | None:
    """The NUMA nodes that take ``request`` exclusive CPUs under ``policy``; None if it does not fit.

    An empty tuple means "admitted without NUMA nodes" (best-effort with no fitting set).
    """
    order = sorted(capacity, reverse=True)
    narrowest = next((k for k in range(1, len(order) + 1) if sum(order[:k]) >= request), len(order) + 1)
    sizes = [1] if policy == "single-numa-node" else [narrowest]
    if policy == "best-effort":
        sizes = list(range(narrowest, len(capacity) + 1))
    for size in sizes:
        for nodes in combinations(range(len(capacity)), size):
            if float(free[list(nodes)].sum()) >= request - 1e-9:
                return nodes
    return () if policy == "best-effort" else None


class NumaAwarePlugin(Plugin[NumaArgs], DynamicFit, NodeScore, ScalarScore, EventHandler):
    NAME = "numa-aware"
    Args = NumaArgs
    misfit_reason = "node(s) had no NUMA placement for the pod's topology policy"

    def on_session_open(self, ssn: SessionView) -> None:
        super().on_session_open(ssn)
        infos = ssn.nodes.infos
        self.capacity = [numa_cpus(n.labels) for n in infos]
        self.policy = [n.labels.get(TOPOLOGY_POLICY_LABEL, "") for n in infos]
        self.static = [n.labels.get(CPU_MANAGER_LABEL, "") == "static" for n in infos]
        self.free = [np.array(c, dtype=float) if c else np.zeros(0) for c in self.capacity]
        self.widest = max((len(c) for c in self.capacity if c), default=1)
        self.taken: dict[int, tuple[int, np.ndarray]] = {}
        for tasks in ssn.nodes.tasks:
            for task in tasks:
                self.on_allocate(task)

    @staticmethod
    def _exclusive(task: TaskState) -> float:
        """Exclusive CPUs the task gets: its whole-CPU request (0 for a fractional one: shared pool)."""
        cpu = float(task.info.request.get("cpu", 0.0))
        return cpu if cpu > 0 and cpu.is_integer() else 0.0

    def _eligible(self, task: TaskState, row: int) -> bool:
        return bool(self.capacity[row]) and self.static[row] and self.policy[row] == task.info.topology_policy

    def _placement(self, task: TaskState, row: int) -> tuple[int, ...] | None:
        if not self._eligible(task, row):
            return None
        request = self._exclusive(task)
        if request == 0:
            return ()
        capacity = self.capacity[row]
        assert capacity is not None
        return choose(self.free[row], capacity, request, task.info.topology_policy)

    def fits_rows(self, task: TaskState, rows: np.ndarray) -> np.ndarray | None:
        if task.info.topology_policy not in POLICIES:
            return None
        return np.array([self._placement(task, int(r)) is not None for r in rows], dtype=bool)

    def score(self, task: TaskState, rows: np.ndarray) -> np.ndarray:
        return np.array([self.score_one(task, int(r)) for r in rows])

    def score_one(self, task: TaskState, row: int) -> float:
        if task.info.topology_policy not in POLICIES:
            return 0.0
        nodes = self._placement(task, row)
        if not nodes:
            return 0.0
        return self.args.weight * 100.0 * (1.0 - len(nodes) / self.widest)

    def on_allocate(self, task: TaskState) -> None:
        row = task.node
        if task.info.topology_policy not in POLICIES or row < 0 or id(task) in self.taken:
            return
        nodes = self._placement(task, row)
        if not nodes:
            return
        left, used = self._exclusive(task), np.zeros(len(self.free[row]))
        for n in nodes:
            take = min(left, float(self.free[row][n]))
            used[n], left = take, left - take
        self.free[row] -= used
        self.taken[id(task)] = (row, used)

    def on_deallocate(self, task: TaskState) -> None:
        held = self.taken.pop(id(task), None)
        if held is not None:
            row, used = held
            self.free[row] += used
