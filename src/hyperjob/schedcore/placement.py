"""Vectorised filtering and scoring of one pod shape against every node.

A "class" is (request vector, selector fields, vGPU shape, node restriction). For each class the
session keeps the score of every node and two masked copies: nodes where the pod fits Idle and
nodes where it fits FutureIdle (-inf elsewhere). A node change marks its row dirty; a class
refreshes only its dirty rows before the next lookup, so placing the n-th identical pod costs
one row update and one argmax, not a pass over all nodes in Python.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .session import Session
    from .state import TaskState

NEG = -np.inf


class _Class:
    __slots__ = ("base", "dims", "need", "dims_list", "need_list", "req", "vgpu", "score", "eff_idle", "eff_fut",
                 "pos")


class Placement:
    """Per-session caches of static masks and per-class fit/score vectors."""

    def __init__(self, ssn: Session) -> None:
        self.ssn = ssn
        self.nodes = ssn.nodes
        self.all_rows = np.arange(self.nodes.size)
        self._masks: dict[bytes, np.ndarray] = {}
        self._classes: dict[tuple[object, ...], _Class] = {}
        self._scalar_ok: bool | None = None

    def static_mask(self, t: TaskState) -> np.ndarray:
        """AND of the enabled predicate plugins' masks for the task's selector (cached)."""
        mask = self._masks.get(t.sel_key)
        if mask is None:
            mask = np.ones(self.nodes.size, dtype=bool)
            for _, p in self.ssn.hooks["predicate"]:
                m = p.node_mask(t)
                if m is not None:
                    mask &= m
            self._masks[t.sel_key] = mask
        return mask

    def scores(self, t: TaskState, rows: np.ndarray) -> np.ndarray:
        total = np.zeros(len(rows))
        for _, p in self.ssn.hooks["node_score"]:
            total += p.score(t, rows)
        return total

    def _fits(self, c: _Class, rows: np.ndarray, table: np.ndarray) -> np.ndarray:
        ok = (table[rows[:, None], c.dims] >= c.need).all(axis=1)
        if c.vgpu[0]:
            ok &= (self.nodes.device_free[rows] >= c.vgpu[1] - 1e-9).sum(axis=1) >= c.vgpu[0]
        return ok

    def _refresh(self, c: _Class, t: TaskState, rows: np.ndarray) -> None:
        if len(rows) == 1 and not c.vgpu[0] and self._scalar():
            self._refresh_one(c, t, int(rows[0]))
            return
        base = c.base[rows]
        score = self.scores(t, rows)
        c.eff_idle[rows] = np.where(base & self._fits(c, rows, self.nodes.idle), score, NEG)
        c.eff_fut[rows] = np.where(base & self._fits(c, rows, self.nodes.fidle), score, NEG)

    def _scalar(self) -> bool:
        """Every scorer has a plain-float ``score_one`` (then single rows skip numpy)."""
        if self._scalar_ok is None:
            self._scalar_ok = all(hasattr(p, "score_one") for _, p in self.ssn.hooks["node_score"])
        return self._scalar_ok

    def _refresh_one(self, c: _Class, t: TaskState, row: int) -> None:
        if not c.base[row]:
            c.eff_idle[row] = c.eff_fut[row] = NEG
            return
        score = 0.0
        for _, p in self.ssn.hooks["node_score"]:
            score += p.score_one(t, row)
        dims, need = c.dims_list, c.need_list
        idle, fidle = self.nodes.idle[row].tolist(), self.nodes.fidle[row].tolist()
        c.eff_idle[row] = score if all(idle[d] >= n for d, n in zip(dims, need, strict=True)) else NEG
        c.eff_fut[row] = score if all(fidle[d] >= n for d, n in zip(dims, need, strict=True)) else NEG

    def klass(self, t: TaskState, restrict: np.ndarray | None = None, key: object = None) -> _Class:
        """The up-to-date class of ``t`` (optionally restricted to a node mask named ``key``)."""
        ck = (t.class_key, key)
        c = self._classes.get(ck)
        dirty = self.nodes.dirty
        if c is None:
            c = _Class()
            c.base = self.static_mask(t) if restrict is None else self.static_mask(t) & restrict
            c.req, c.vgpu = t.req, t.vgpu
            c.dims = np.flatnonzero(t.req > 0)
            c.need = t.req[c.dims] - self.ssn.space.eps[c.dims]
            c.dims_list, c.need_list = c.dims.tolist(), c.need.tolist()
            c.eff_idle = np.full(self.nodes.size, NEG)
            c.eff_fut = np.full(self.nodes.size, NEG)
            self._refresh(c, t, np.flatnonzero(c.base))
            c.pos = len(dirty)
            self._classes[ck] = c
        elif c.pos < len(dirty):
            changed = dirty[c.pos:]
            rows = self.all_rows if len(changed) * 8 > self.nodes.size else np.unique(np.array(changed))
            self._refresh(c, t, rows)
            c.pos = len(dirty)
        return c

    def best(self, t: TaskState, restrict: np.ndarray | None = None, key: object = None) -> tuple[int, bool] | None:
        """Best node for ``t``: (row, fits-idle). Idle-fitting nodes first, then FutureIdle."""
        if self.nodes.size == 0:
            return None
        c = self.klass(t, restrict, key)
        nominated = self.nodes.index.get(t.info.nominated_node, -1) if t.info.nominated_node else -1
        if nominated >= 0:
            if c.eff_idle[nominated] > NEG:
                return nominated, True
            if c.eff_fut[nominated] > NEG:
                return nominated, False
        i = int(np.argmax(c.eff_idle))
        if c.eff_idle[i] > NEG:
            return i, True
        i = int(np.argmax(c.eff_fut))
        if c.eff_fut[i] > NEG:
            return i, False
        return None

    def fits_future(self, t: TaskState, row: int) -> bool:
        """Does ``t`` fit ``row``'s FutureIdle right now (preempt/reclaim's final check)."""
        c = self.klass(t)
        return bool(c.base[row]) and bool(self._fits(c, np.array([row]), self.nodes.fidle)[0])

    def ranked(self, t: TaskState, room: np.ndarray | None = None) -> list[int]:
        """Predicate-passing nodes (resources not checked), best score first, then by name.

        ``room`` (optional, per node and resource) drops nodes where even that much free space
        would not hold the pod, before any scoring.
        """
        mask = self.static_mask(t)
        if room is not None:
            dims = np.flatnonzero(t.req > 0)
            mask = mask & (room[:, dims] >= t.req[dims] - self.ssn.space.eps[dims]).all(axis=1)
        rows = np.flatnonzero(mask)
        if len(rows) == 0:
            return []
        s = self.scores(t, rows)
        return rows[np.lexsort((rows, -s))].tolist()
