"""gpufrag: fragmentation-aware GPU placement (experimental knobs; see module docstring later)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec
import numpy as np

from .. import fragmentation as frag
from ..state import TaskState
from .fgd import Candidates, FragScorer

if TYPE_CHECKING:
    from ..session import Session

POINTS_PER_CORE = 1000.0


class GpuFragArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    coverage: float = msgspec.field(default=0.95, name="gpufrag.coverage")
    weighting: str = msgspec.field(default="count", name="gpufrag.weighting")
    memory: bool = msgspec.field(default=True, name="gpufrag.memory")
    tiebreak: str = msgspec.field(default="none", name="gpufrag.tiebreak")
    tieweight: float = msgspec.field(default=1.0, name="gpufrag.tieweight")
    quantum: float = msgspec.field(default=0.0, name="gpufrag.quantum")
    measure: str = msgspec.field(default="fgd", name="gpufrag.measure")
    devices: str = msgspec.field(default="bestfit", name="gpufrag.devices")
    fluid: float = msgspec.field(default=0.0, name="gpufrag.fluid")


class GpuFragPlugin(FragScorer):
    NAME = "gpufrag"
    Args = GpuFragArgs

    def on_session_open(self, ssn: Session) -> None:
        self.WITH_MEMORY = bool(self.args.memory)
        self.every_device = self.args.devices != "bestfit"
        super().on_session_open(ssn)

    def shape_weight(self, key: tuple[float, float, int, float, bytes]) -> float:
        _, _, number, cores, _ = key
        w = self.args.weighting
        if w == "gpu":
            return number * cores
        if w == "gpu+1":
            return number * cores + 100.0
        return 1.0

    def fragmentation(self, c: Candidates) -> np.ndarray:
        assert self.shapes is not None
        mem = c.memory if self.WITH_MEMORY else None
        if self.args.measure == "stranded":
            out = frag.stranded(self.shapes, c.rows[c.owner], c.cpu, c.dev, mem)
        else:
            out = super().fragmentation(c)
        if self.args.fluid:
            out = out + self.args.fluid * frag.fluid_stranded(self.shapes, c.cpu, c.dev, mem)
        return out

    def value(self, task: TaskState, c: Candidates, grown: np.ndarray) -> np.ndarray:
        q = self.args.quantum
        if q < 0:
            v = np.floor(100.0 / (1.0 + np.exp(grown / (-q * 100.0)))) * POINTS_PER_CORE
        else:
            v = -(np.floor(grown / q + 1e-9) if q > 0 else grown) * POINTS_PER_CORE
        tb = self.args.tiebreak
        if tb == "none":
            return v
        nodes = self.nodes
        rows = c.rows[c.owner]
        if tb == "gpufree":  # fewer free GPU cores left = better
            total = np.maximum((nodes.device_free[rows] >= 0).sum(axis=1) * 100.0, 1.0)
            left = frag.gpu_free(c.dev) / total
        elif tb == "cpufree":
            left = c.cpu / np.maximum(nodes.alloc[rows, 0], 1e-9)
        elif tb == "bestfit":
            left = (c.cpu / 128.0 + frag.gpu_free(c.dev) / 800.0) / 2
        else:
            raise ValueError(tb)
        return v + self.args.tieweight * (1.0 - np.clip(left, 0, 1)) * POINTS_PER_CORE * 0.999

    def score(self, task: TaskState, rows: np.ndarray) -> np.ndarray:
        if self.shapes is None:
            return np.zeros(len(rows))
        c, grown = self.growth(task, rows)
        return self.best_per_row(c, self.value(task, c, grown), len(rows))

    def choose_devices(self, task: TaskState, row: int) -> tuple[int, ...]:
        if self.args.devices in ("bestfit", "scoremax"):
            return ()
        return self.best_device(task, row, lambda c, grown: self.value(task, c, grown))
