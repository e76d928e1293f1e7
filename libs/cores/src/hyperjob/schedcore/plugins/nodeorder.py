"""nodeorder: kube-scheduler score plugins with Volcano's default weights, vectorised over nodes.

leastrequested, mostrequested, balancedresource and tainttoleration are computed; nodeaffinity
(preferred terms), podaffinity, imagelocality and podtopologyspread have no input in a snapshot
and score 0 for every node, which leaves the ranking unchanged.
"""

from __future__ import annotations

import math

import msgspec
import numpy as np

from ..framework import NodeScore, Plugin, ScalarScore, SessionView
from ..resources import GPU
from ..state import TaskState
from .predicates import tolerates

# Kubernetes scores a pod that requests nothing as if it asked for 100m cpu and 200Mi memory.
NONZERO_CPU, NONZERO_MEM = 0.1, 200 * 2.0**20


class NodeOrderArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    least: float = msgspec.field(default=1, name="leastrequested.weight")
    most: float = msgspec.field(default=0, name="mostrequested.weight")
    balanced: float = msgspec.field(default=1, name="balancedresource.weight")
    nodeaffinity: float = msgspec.field(default=2, name="nodeaffinity.weight")
    podaffinity: float = msgspec.field(default=2, name="podaffinity.weight")
    taint: float = msgspec.field(default=3, name="tainttoleration.weight")
    image: float = msgspec.field(default=1, name="imagelocality.weight")
    spread: float = msgspec.field(default=2, name="podtopologyspread.weight")
    selectorspread: float = msgspec.field(default=0, name="selectorspread.weight")


class NodeOrderPlugin(Plugin[NodeOrderArgs], NodeScore, ScalarScore):
    NAME = "nodeorder"
    Args = NodeOrderArgs

    def on_session_open(self, ssn: SessionView) -> None:
        super().on_session_open(ssn)
        self.gpu = ssn.space.index.get(GPU, -1)
        self._taint_cache: dict[bytes, np.ndarray] = {}

    def score(self, task: TaskState, rows: np.ndarray) -> np.ndarray:
        a = self.args
        nodes = self.ssn.nodes
        dims = self._dims(task)
        cap = nodes.alloc[rows[:, None], dims]
        req = task.req[dims]
        if req[0] == 0 or req[1] == 0:
            req = req.copy()
            req[0] = req[0] or NONZERO_CPU
            req[1] = req[1] or NONZERO_MEM
        requested = cap - nodes.idle[rows[:, None], dims] + req
        valid = cap > 0
        safe = np.where(valid, cap, 1.0)
        total = np.zeros(len(rows))
        if a.least or a.most:
            ok = valid[:, :2] & (requested[:, :2] <= cap[:, :2])
            if a.least:
                free = np.where(ok, np.floor((cap[:, :2] - requested[:, :2]) * 100.0 / safe[:, :2]), 0.0)
                total += a.least * np.floor(free.sum(axis=1) / 2)
            if a.most:
                used = np.where(ok, np.floor(requested[:, :2] * 100.0 / safe[:, :2]), 0.0)
                total += a.most * np.floor(used.sum(axis=1) / 2)
        if a.balanced:
            frac = np.where(valid, np.minimum(requested / safe, 1.0), 0.0)
            n = np.maximum(valid.sum(axis=1), 1)
            mean = frac.sum(axis=1) / n
            var = np.where(valid, (frac - mean[:, None]) ** 2, 0.0).sum(axis=1) / n
            total += a.balanced * np.floor((1.0 - np.sqrt(var)) * 100.0)
        if a.taint:
            total += a.taint * self._taint_score(task)[rows]
        return total

    def score_one(self, task: TaskState, row: int) -> float:
        """``score`` for one node in plain floats (same operations, same order, same result):
        refreshing a single row is the hot path and numpy's per-call cost dominates there."""
        a = self.args
        nodes = self.ssn.nodes
        alloc, idle, treq = nodes.alloc[row].tolist(), nodes.idle[row].tolist(), task.req.tolist()
        dims = self._dims(task)
        req = [treq[d] for d in dims]
        req[0] = req[0] or NONZERO_CPU
        req[1] = req[1] or NONZERO_MEM
        cap = [alloc[d] for d in dims]
        requested = [cap[i] - idle[d] + req[i] for i, d in enumerate(dims)]
        valid = [c > 0 for c in cap]
        safe = [c if v else 1.0 for c, v in zip(cap, valid, strict=True)]
        total = 0.0
        ok = [valid[i] and requested[i] <= cap[i] for i in (0, 1)]
        if a.least:
            free = [math.floor((cap[i] - requested[i]) * 100.0 / safe[i]) if ok[i] else 0.0 for i in (0, 1)]
            total += a.least * math.floor((free[0] + free[1]) / 2)
        if a.most:
            used = [math.floor(requested[i] * 100.0 / safe[i]) if ok[i] else 0.0 for i in (0, 1)]
            total += a.most * math.floor((used[0] + used[1]) / 2)
        if a.balanced:
            frac = [min(requested[i] / safe[i], 1.0) if valid[i] else 0.0 for i in range(len(dims))]
            n = max(sum(valid), 1)
            mean = sum(frac) / n
            var = sum((f - mean) * (f - mean) if v else 0.0 for f, v in zip(frac, valid, strict=True)) / n
            total += a.balanced * math.floor((1.0 - math.sqrt(var)) * 100.0)
        if a.taint:
            total += a.taint * float(self._taint_score(task)[row])
        return total

    def _dims(self, task: TaskState) -> list[int]:
        # cpu, memory, and the GPU only when the pod asks for one (Kubernetes skips scalar
        # resources a pod does not request in balanced allocation).
        return [0, 1, self.gpu] if self.gpu >= 0 and task.req[self.gpu] > 0 else [0, 1]

    def _taint_score(self, task: TaskState) -> np.ndarray:
        # Fewer intolerable PreferNoSchedule taints is better; normalised over all nodes.
        key = task.sel_key  # covers the tolerations (and is computed once per task)
        cached = self._taint_cache.get(key)
        if cached is None:
            counts = np.array(
                [
                    sum(
                        1
                        for t in n.taints
                        if t.effect == "PreferNoSchedule" and not tolerates(task.info.tolerations, t)
                    )
                    for n in self.ssn.nodes.infos
                ],
                dtype=float,
            )
            top = counts.max() if len(counts) else 0.0
            cached = np.full(len(counts), 100.0) if top == 0 else np.floor(100.0 - counts * 100.0 / top)
            self._taint_cache[key] = cached
        return cached
