"""Vectorised filtering and scoring of one pod shape against every node.

A "class" is (request vector, selector fields, vGPU shape, node restriction; and the task's queue
when a plugin's filter or score depends on it). For each class the
session keeps the score of every node and two masked copies: nodes where the pod fits Idle and
nodes where it fits FutureIdle (-inf elsewhere). A node change marks its row dirty; a class
refreshes only its dirty rows before the next lookup, so placing the n-th identical pod costs
one row update and one argmax, not a pass over all nodes in Python. A scorer whose scores
depend on the pod itself rather than on its shape (``per_task = True``: a seeded random choice
or tie-break) is kept out of the cache and added over every node when that pod picks one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .framework import NodeScore, ScalarScore
from .status import Code, NodeRejection, Status, fit_error

if TYPE_CHECKING:
    from .hooks import HookRegistry
    from .nodes import NodeTable
    from .resources import ResourceSpace
    from .state import TaskState

NEG = -np.inf
_USAGE = Code.UNSCHEDULABLE  # a node short of room now may have it once pods leave


class _Class:
    """One pod class: where it may go at all (``base``), what it needs, and per node its score
    where it fits Idle (``eff_idle``) or FutureIdle (``eff_fut``), -inf elsewhere; ``pos`` is how
    far into the node table's dirty log those vectors are up to date."""

    __slots__ = ("base", "dims", "need", "dims_list", "need_list", "req", "vgpu", "eff_idle", "eff_fut", "pos")

    def __init__(self, base: np.ndarray, req: np.ndarray, vgpu: tuple[int, float], eps: np.ndarray, size: int) -> None:
        self.base = base
        self.req = req
        self.vgpu = vgpu
        self.dims = np.flatnonzero(req > 0)
        self.need = req[self.dims] - eps[self.dims]
        self.dims_list: list[int] = self.dims.tolist()
        self.need_list: list[float] = self.need.tolist()
        self.eff_idle = np.full(size, NEG)
        self.eff_fut = np.full(size, NEG)
        self.pos = 0


class Placement:
    """Per-session caches of static masks and per-class fit/score vectors."""

    def __init__(self, nodes: NodeTable, space: ResourceSpace, hooks: HookRegistry) -> None:
        self.nodes = nodes
        self.space = space
        self.hooks = hooks  # filled with the plugins after the placement is built
        self.all_rows = np.arange(self.nodes.size)
        self._masks: dict[tuple[bytes, str], tuple[np.ndarray, list[NodeRejection]]] = {}
        self._per_queue: bool | None = None
        self._classes: dict[tuple[object, ...], _Class] = {}
        self._scalar_scorers: list[ScalarScore] | None = None
        self._scalar_known = False
        self._scorers: tuple[list[NodeScore], list[NodeScore]] | None = None

    @property
    def shape_scorers(self) -> list[NodeScore]:
        """Scorers whose scores depend on the pod's shape only (cached per class)."""
        return self._split()[0]

    @property
    def task_scorers(self) -> list[NodeScore]:
        """Scorers marked ``per_task``: added afresh whenever a pod picks a node."""
        return self._split()[1]

    def _split(self) -> tuple[list[NodeScore], list[NodeScore]]:
        # Plugins are bound after the placement is built, so the split is made on first use.
        if self._scorers is None:
            scorers = [p for _, p in self.hooks.node_score]
            self._scorers = ([p for p in scorers if not p.per_task], [p for p in scorers if p.per_task])
        return self._scorers

    def _queue_scoped(self) -> bool:
        """Some predicate or scorer depends on the task's queue (``per_queue``, e.g. nodegroup)."""
        if self._per_queue is None:
            self._per_queue = any(p.per_queue for _, p in self.hooks.predicate) or any(
                p.per_queue for _, p in self.hooks.node_score
            )
        return self._per_queue

    def _scope(self, t: TaskState) -> str:
        """The part of a cache key beyond the task's own fields: its queue, when that matters."""
        return t.job.queue if self._queue_scoped() and t.job is not None else ""

    def static_mask(self, t: TaskState) -> np.ndarray:
        """Nodes no enabled predicate rules out for the task's selector (cached)."""
        return self._static(t)[0]

    def _static(self, t: TaskState) -> tuple[np.ndarray, list[NodeRejection]]:
        """The static mask and the predicates' rejections, in conf order (cached per selector)."""
        key = (t.sel_key, self._scope(t))
        cached = self._masks.get(key)
        if cached is None:
            mask = np.ones(self.nodes.size, dtype=bool)
            rejections: list[NodeRejection] = []
            for _, p in self.hooks.predicate:
                for rejection in p.filter_nodes(t):
                    mask &= ~rejection.rows
                    rejections.append(rejection)
            cached = self._masks[key] = (mask, rejections)
        return cached

    def diagnose(self, t: TaskState, restrict: np.ndarray | None = None, outside: str = "") -> Status:
        """Why no node takes ``t`` (kube-scheduler's FitError): each node under the first step
        that rules it out: NotReady, the predicates, ``restrict`` (reason ``outside``), then
        usage (every short resource, GPU devices, the dynamic fits). Only on the failure path."""
        left = np.ones(self.nodes.size, dtype=bool)
        found: list[tuple[str, int, Code]] = [("node(s) were NotReady", self.nodes.not_ready, Code.UNRESOLVABLE)]
        steps = list(self._static(t)[1])
        if restrict is not None:
            steps.append(NodeRejection(outside, ~restrict))
        for rejection in steps:
            found.append((rejection.reason, int((rejection.rows & left).sum()), rejection.code))
            left &= ~rejection.rows
        for rejection in self._usage_misfits(t, np.flatnonzero(left)):
            found.append((rejection.reason, int(rejection.rows.sum()), rejection.code))
        return fit_error(self.nodes.size + self.nodes.not_ready, found)

    def _usage_misfits(self, t: TaskState, rows: np.ndarray) -> list[NodeRejection]:
        """Among ``rows``, those short of a resource (each short resource counts), then of GPU
        devices, then failing a dynamic fit, judged on FutureIdle as placement does."""
        space, out = self.space, []
        fits = np.ones(len(rows), dtype=bool)
        for d in np.flatnonzero(t.req > 0).tolist():
            short = self.nodes.fidle[rows, d] < t.req[d] - space.eps[d]
            name = space.names[d]
            out.append(NodeRejection("Too many pods" if d == space.pods else f"Insufficient {name}", short, _USAGE))
            fits &= ~short
        if t.vgpu[0]:
            devices = (self.nodes.device_free[rows] >= t.vgpu[1] - 1e-9).sum(axis=1) >= t.vgpu[0]
            out.append(NodeRejection("node(s) had too few free GPU devices", fits & ~devices, _USAGE))
            fits &= devices
        for _, p in self.hooks.dynamic_fit:
            ok = p.fits_rows(t, rows[fits]) if fits.any() else None
            if ok is not None:
                misfit = np.zeros(len(rows), dtype=bool)
                misfit[np.flatnonzero(fits)[~ok]] = True
                out.append(NodeRejection(p.misfit_reason, misfit, _USAGE))
                fits &= ~misfit
        return out

    def scores(self, t: TaskState, rows: np.ndarray, per_task: bool = False) -> np.ndarray:
        """Sum of the shape scorers on ``rows`` (and of the per-task ones too, when asked)."""
        total = np.zeros(len(rows))
        for p in self.shape_scorers + (self.task_scorers if per_task else []):
            total += p.score(t, rows)
        return total

    def _fits(self, c: _Class, rows: np.ndarray, table: np.ndarray) -> np.ndarray:
        ok: np.ndarray = (table[rows[:, None], c.dims] >= c.need).all(axis=1)
        if c.vgpu[0]:
            ok &= (self.nodes.device_free[rows] >= c.vgpu[1] - 1e-9).sum(axis=1) >= c.vgpu[0]
        return ok

    def _dynamic_fit(self, t: TaskState, rows: np.ndarray) -> np.ndarray | None:
        """AND of the usage-dependent filters (``DynamicFit``, e.g. numa-aware) on ``rows``; None if none applies."""
        out = None
        for _, p in self.hooks.dynamic_fit:
            ok = p.fits_rows(t, rows)
            if ok is not None:
                out = ok if out is None else out & ok
        return out

    def _refresh(self, c: _Class, t: TaskState, rows: np.ndarray) -> None:
        scalar = self._scalar() if len(rows) == 1 and not self.hooks.dynamic_fit else None
        if scalar is not None:
            self._refresh_one(c, t, int(rows[0]), scalar)
            return
        base = c.base[rows]
        dynamic = self._dynamic_fit(t, rows)
        if dynamic is not None:
            base = base & dynamic
        score = self.scores(t, rows)
        c.eff_idle[rows] = np.where(base & self._fits(c, rows, self.nodes.idle), score, NEG)
        c.eff_fut[rows] = np.where(base & self._fits(c, rows, self.nodes.fidle), score, NEG)

    def _scalar(self) -> list[ScalarScore] | None:
        """The shape scorers as ``ScalarScore`` when every one is (then single rows skip numpy)."""
        if not self._scalar_known:
            scalar: list[ScalarScore] = [p for p in self.shape_scorers if isinstance(p, ScalarScore)]
            self._scalar_scorers = scalar if len(scalar) == len(self.shape_scorers) else None
            self._scalar_known = True
        return self._scalar_scorers

    def _refresh_one(self, c: _Class, t: TaskState, row: int, scorers: list[ScalarScore]) -> None:
        if not c.base[row]:
            c.eff_idle[row] = c.eff_fut[row] = NEG
            return
        score = 0.0
        for p in scorers:
            score += p.score_one(t, row)
        dims, need = c.dims_list, c.need_list
        idle, fidle = self.nodes.idle[row].tolist(), self.nodes.fidle[row].tolist()
        devices_ok = not c.vgpu[0] or self._devices_fit(c, row)
        c.eff_idle[row] = score if devices_ok and all(idle[d] >= n for d, n in zip(dims, need, strict=True)) else NEG
        c.eff_fut[row] = score if devices_ok and all(fidle[d] >= n for d, n in zip(dims, need, strict=True)) else NEG

    def _devices_fit(self, c: _Class, row: int) -> bool:
        number, cores = c.vgpu
        return sum(1 for free in self.nodes.device_free[row].tolist() if free >= cores - 1e-9) >= number

    def klass(self, t: TaskState, restrict: np.ndarray | None = None, key: object = None) -> _Class:
        """The up-to-date class of ``t`` (optionally restricted to a node mask named ``key``)."""
        ck = (t.class_key, self._scope(t), key)
        c = self._classes.get(ck)
        dirty = self.nodes.dirty
        if c is None:
            base = self.static_mask(t) if restrict is None else self.static_mask(t) & restrict
            c = _Class(base, t.req, t.vgpu, self.space.eps, self.nodes.size)
            self._refresh(c, t, np.flatnonzero(c.base))
            c.pos = len(dirty)
            self._classes[ck] = c
        elif c.pos < len(dirty):
            changed = dirty[c.pos :]
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
        eff_idle, eff_fut = c.eff_idle, c.eff_fut
        if self.task_scorers:
            extra = self._task_scores(t)
            eff_idle, eff_fut = eff_idle + extra, eff_fut + extra
        i = int(np.argmax(eff_idle))
        if eff_idle[i] > NEG:
            return i, True
        i = int(np.argmax(eff_fut))
        if eff_fut[i] > NEG:
            return i, False
        return None

    def _task_scores(self, t: TaskState) -> np.ndarray:
        total = np.zeros(self.nodes.size)
        for p in self.task_scorers:
            total += p.score(t, self.all_rows)
        return total

    def fits_future(self, t: TaskState, row: int) -> bool:
        """Does ``t`` fit ``row``'s FutureIdle right now (preempt/reclaim's final check)."""
        c = self.klass(t)
        dynamic = self._dynamic_fit(t, np.array([row]))
        if dynamic is not None and not dynamic[0]:
            return False
        if not c.base[row] or not (self.nodes.fidle[row, c.dims] >= c.need).all():
            return False
        # Devices too as they will be once the victims are gone, not as they are now: a victim's
        # GPUs are what a whole-GPU preemptor waits for.
        return not c.vgpu[0] or self.nodes.future_devices_fit(row, *c.vgpu)

    def ranked(self, t: TaskState, room: np.ndarray | None = None) -> list[int]:
        """Predicate-passing nodes (resources not checked), best score first, then by name.

        ``room`` (optional, per node and resource) drops nodes where even that much free space
        would not hold the pod, before any scoring.
        """
        mask = self.static_mask(t)
        if room is not None:
            dims = np.flatnonzero(t.req > 0)
            mask = mask & (room[:, dims] >= t.req[dims] - self.space.eps[dims]).all(axis=1)
        rows = np.flatnonzero(mask)
        if len(rows) == 0:
            return []
        s = self.scores(t, rows, per_task=True)
        best_first: list[int] = rows[np.lexsort((rows, -s))].tolist()
        return best_first
