"""binpack: prefer fuller nodes. Score = sum(w * (used+req)/alloc) / sum(w) * 100 * binpack.weight."""

from __future__ import annotations

import msgspec
import numpy as np

from ..confspec import Arguments
from ..errors import ConfError
from ..framework import NodeScore, Plugin, ScalarScore, SessionView
from ..state import TaskState

_PREFIX = "binpack.resources."


class BinpackArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    weight: float = msgspec.field(default=1, name="binpack.weight")
    cpu: float = msgspec.field(default=1, name="binpack.cpu")
    memory: float = msgspec.field(default=1, name="binpack.memory")
    resources: str = msgspec.field(default="", name="binpack.resources")
    extra: dict[str, float] = {}


class BinpackPlugin(Plugin[BinpackArgs], NodeScore, ScalarScore):
    NAME = "binpack"
    Args = BinpackArgs

    @classmethod
    def decode_args(cls, arguments: Arguments, path: str) -> msgspec.Struct:
        # ``binpack.resources.<name>`` keys are open-ended, so they are split off first.
        extra = {k[len(_PREFIX) :]: v for k, v in arguments.items() if k.startswith(_PREFIX)}
        base = {k: v for k, v in arguments.items() if not k.startswith(_PREFIX)}
        args = super().decode_args(base, path)
        assert isinstance(args, BinpackArgs)
        names = [r.strip() for r in str(args.resources).split(",") if r.strip()]
        for name in extra:
            if name not in names:
                raise ConfError(
                    f"{path}: unknown argument '{_PREFIX}{name}' for plugin 'binpack' "
                    f"({name} is not listed in binpack.resources)"
                )
        weights: dict[str, float] = {}
        for name in names:
            raw = extra.get(name, 1)
            try:
                w = float(raw)
            except (TypeError, ValueError):
                raise ConfError(f"{path}.{_PREFIX}{name}: not a number") from None
            weights[name] = 1.0 if w < 0 else w
        return msgspec.structs.replace(args, extra=weights)

    def on_session_open(self, ssn: SessionView) -> None:
        super().on_session_open(ssn)
        a = self.args
        w = np.zeros(ssn.space.size)
        w[0], w[1] = (a.cpu if a.cpu >= 0 else 1), (a.memory if a.memory >= 0 else 1)
        for name, weight in a.extra.items():
            if name in ssn.space.index:
                w[ssn.space.index[name]] = weight
        self.w = w

    def score_one(self, task: TaskState, row: int) -> float:
        """``score`` for one node in plain floats (same operations and order as ``score``)."""
        dims = np.flatnonzero((task.req > 0) & (self.w > 0)).tolist()
        if not dims or self.args.weight == 0:
            return 0.0
        nodes = self.ssn.nodes
        alloc, idle, req, w = nodes.alloc[row].tolist(), nodes.idle[row].tolist(), task.req.tolist(), self.w.tolist()
        parts, weights, over = [], [], False
        for d in dims:
            final = alloc[d] - idle[d] + req[d]
            parts.append(w[d] * final / alloc[d] if alloc[d] > 0 else 0.0)
            weights.append(w[d])
            over = over or (alloc[d] > 0 and final > alloc[d])
        return 0.0 if over else sum(parts) / sum(weights) * 100.0 * self.args.weight

    def score(self, task: TaskState, rows: np.ndarray) -> np.ndarray:
        dims = np.flatnonzero((task.req > 0) & (self.w > 0))
        if len(dims) == 0 or self.args.weight == 0:
            return np.zeros(len(rows))
        nodes = self.ssn.nodes
        cap = nodes.alloc[rows][:, dims]
        final = cap - nodes.idle[rows][:, dims] + task.req[dims]
        w = self.w[dims]
        with np.errstate(divide="ignore", invalid="ignore"):
            part = np.where(cap > 0, w * final / cap, 0.0)
        over = np.any((cap > 0) & (final > cap), axis=1)
        score = part.sum(axis=1) / w.sum() * 100.0 * self.args.weight
        return np.where(over, 0.0, score)
