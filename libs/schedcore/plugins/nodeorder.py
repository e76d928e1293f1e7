"""nodeorder: kube-scheduler score plugins with Volcano's default weights, vectorised over nodes.

leastrequested, mostrequested, balancedresource and tainttoleration are computed; nodeaffinity
(preferred terms), podaffinity, imagelocality and podtopologyspread have no input in a snapshot
and score 0 for every node, which leaves the ranking unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
import numpy as np

from ..framework import Plugin
from ..resources import GPU
from ..state import TaskState
from .predicates import tolerates

if TYPE_CHECKING:
    from ..session import Session

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


def _pct_free(cap: np.ndarray, requested: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.floor((cap - requested) * 100.0 / cap)
    return np.where((cap <= 0) | (requested > cap), 0.0, s)


class NodeOrderPlugin(Plugin):
    NAME = "nodeorder"
    Args = NodeOrderArgs

    def on_session_open(self, ssn: Session) -> None:
        super().on_session_open(ssn)
        self.gpu = ssn.space.index.get(GPU, -1)
        self._taint_cache: dict[bytes, np.ndarray] = {}

    def _requested(self, t: TaskState, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        nodes = self.ssn.nodes
        used = nodes.alloc[rows] - nodes.idle[rows]
        req = t.req.copy()
        if req[0] == 0:
            req[0] = NONZERO_CPU
        if req[1] == 0:
            req[1] = NONZERO_MEM
        return nodes.alloc[rows], used + req

    def score(self, task: TaskState, rows: np.ndarray) -> np.ndarray:
        a = self.args
        cap, requested = self._requested(task, rows)
        total = np.zeros(len(rows))
        if a.least:
            total += a.least * np.floor((_pct_free(cap[:, 0], requested[:, 0]) + _pct_free(cap[:, 1], requested[:, 1])) / 2)
        if a.most:
            with np.errstate(divide="ignore", invalid="ignore"):
                most = [np.where((cap[:, d] <= 0) | (requested[:, d] > cap[:, d]), 0.0,
                                 np.floor(requested[:, d] * 100.0 / cap[:, d])) for d in (0, 1)]
            total += a.most * np.floor((most[0] + most[1]) / 2)
        if a.balanced:
            total += a.balanced * self._balanced(task, cap, requested)
        if a.taint:
            total += a.taint * self._taint_score(task)[rows]
        return total

    def _balanced(self, task: TaskState, cap: np.ndarray, requested: np.ndarray) -> np.ndarray:
        dims = [0, 1]
        if self.gpu >= 0 and task.req[self.gpu] > 0:
            dims.append(self.gpu)
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.minimum(requested[:, dims] / cap[:, dims], 1.0)
        valid = cap[:, dims] > 0
        frac = np.where(valid, frac, np.nan)
        with np.errstate(invalid="ignore"):
            std = np.nanstd(frac, axis=1) if valid.any() else np.zeros(len(cap))
        return np.floor((1.0 - np.nan_to_num(std)) * 100.0)

    def _taint_score(self, task: TaskState) -> np.ndarray:
        # Fewer intolerable PreferNoSchedule taints is better; normalised over all nodes.
        key = msgspec.json.encode(task.info.tolerations)
        cached = self._taint_cache.get(key)
        if cached is None:
            counts = np.array([sum(1 for t in n.taints if t.effect == "PreferNoSchedule"
                                   and not tolerates(task.info.tolerations, t)) for n in self.ssn.nodes.infos], dtype=float)
            top = counts.max() if len(counts) else 0.0
            cached = np.full(len(counts), 100.0) if top == 0 else np.floor(100.0 - counts * 100.0 / top)
            self._taint_cache[key] = cached
        return cached
