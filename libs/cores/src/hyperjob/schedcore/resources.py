"""Resource vectors: one numpy float64 array per resource list, dimensions fixed per session.

Volcano compares in internal units (cpu milli, memory bytes, scalars milli, pods whole) with a
0.1 tolerance; in our base units that is 1e-4 for cpu and scalars, 0.1 for memory and pods.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

PODS = "pods"
DEFAULT_PODS = 110.0
# Device-level vGPU requests are checked per GPU device, not as node-level scalar dimensions.
VGPU_NUMBER = "volcano.sh/vgpu-number"
VGPU_CORES = "volcano.sh/vgpu-cores"
VGPU_MEMORY = "volcano.sh/vgpu-memory"
DEVICE_RESOURCES = frozenset({VGPU_NUMBER, VGPU_CORES, VGPU_MEMORY})
GPU = "nvidia.com/gpu"
_EXACT = 1e-9


class ResourceSpace:
    """The ordered resource names of one session: cpu, memory, pods, then the rest sorted."""

    def __init__(self, names: Iterable[str]) -> None:
        rest = sorted({n for n in names if n not in ("cpu", "memory", PODS) and n not in DEVICE_RESOURCES})
        self.names: list[str] = ["cpu", "memory", PODS, *rest]
        self.index: dict[str, int] = {n: i for i, n in enumerate(self.names)}
        self.size = len(self.names)
        eps = np.full(self.size, 1e-4)
        eps[1] = 0.1
        eps[2] = 0.1
        self.eps = eps
        self.pods = 2
        self.quota_mask = np.ones(self.size, dtype=bool)  # dimensions quota checks consider
        self.quota_mask[2] = False
        self._requests: dict[tuple[tuple[str, float], ...], np.ndarray] = {}
        self._best_effort: dict[int, bool] = {}
        self._interned: dict[tuple[object, ...], np.ndarray] = {}
        self.zero = np.zeros(self.size)
        self.zero.flags.writeable = False

    def vec(self, resources: Mapping[str, float] | None, missing: float = 0.0) -> np.ndarray:
        out = np.full(self.size, missing)
        for name, amount in (resources or {}).items():
            i = self.index.get(name)
            if i is not None:
                out[i] = amount
        return out

    def request(self, resources: Mapping[str, float]) -> np.ndarray:
        """A pod's request: its resources plus the implicit ``pods: 1`` slot (shared, read-only)."""
        key = tuple(resources.items())
        out = self._requests.get(key)
        if out is None:
            out = self.vec(resources)
            out[self.pods] = 1.0
            out.flags.writeable = False
            self._requests[key] = out
            self._best_effort[id(out)] = self.is_empty(out)
        return out

    def interned(self, resources: Mapping[str, float]) -> np.ndarray:
        """``vec(resources)``, shared and read-only: equal lists give the same array object."""
        key = ("", *resources.items())
        out = self._interned.get(key)
        if out is None:
            out = self.vec(resources)
            out.flags.writeable = False
            self._interned[key] = out
        return out

    def request_is_best_effort(self, req: np.ndarray) -> bool:
        """Cached ``is_empty`` of an interned request."""
        return self._best_effort[id(req)]

    def to_dict(self, v: np.ndarray, skip_pods: bool = True) -> dict[str, float]:
        return {
            n: float(v[i])
            for i, n in enumerate(self.names)
            if not (skip_pods and i == self.pods) and abs(v[i]) > _EXACT and np.isfinite(v[i])
        }

    def is_empty(self, v: np.ndarray) -> bool:
        """Volcano's IsEmpty: every dimension below the tolerance, ``pods`` ignored."""
        return bool(np.all((v < self.eps) | ~self.quota_mask))

    def less_equal(self, a: np.ndarray, b: np.ndarray) -> bool:
        """Volcano's LessEqual with tolerance, every dimension."""
        return bool(np.all(a <= b + self.eps))

    def le_on(self, a: np.ndarray, b: np.ndarray, dims: np.ndarray) -> bool:
        """Volcano's LessEqualWithDimension: only ``dims`` (request > 0, pods excluded), exact.

        ``dims`` is a boolean mask; the loop is in Python because it is usually 1-3 dimensions.
        """
        for i in np.flatnonzero(dims).tolist():
            x, y = float(a[i]), float(b[i])
            if x > y + _EXACT * max(1.0, abs(y)):
                return False
        return True

    def over_on(self, a: np.ndarray, b: np.ndarray, dims: np.ndarray) -> list[str]:
        """The names of the ``dims`` where ``le_on(a, b, dims)`` fails: what a quota message names."""
        return [
            self.names[i]
            for i in np.flatnonzero(dims).tolist()
            if float(a[i]) > float(b[i]) + _EXACT * max(1.0, abs(float(b[i])))
        ]

    def req_dims(self, req: np.ndarray) -> np.ndarray:
        """The dimensions a quota check looks at for this request: > 0, ``pods`` skipped."""
        return (req > 0) & self.quota_mask


def share(allocated: float, total: float) -> float:
    """Volcano's Share: l/r, with 0/0 = 0 and x/0 = 1."""
    if total == 0:
        return 0.0 if allocated == 0 else 1.0
    return allocated / total
