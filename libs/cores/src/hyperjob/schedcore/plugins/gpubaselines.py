"""The GPU placement baselines of the FGD paper (USENIX ATC'23, section 6), as its artifact scores them.

Each is a node scorer (higher is better) that reads only the node's free CPU and per-device free
GPU cores, in the artifact's units (milli-CPU, milli-GPU: 100 device cores are 1000 milli-GPU,
``MaxSpecCpu`` 128 cores, ``MaxSpecGpu`` 8 GPUs) and with its integer arithmetic, so that the
same trace can be replayed through our scheduler core and set beside the published figures:

- ``gpurandom``: a uniformly random node among those that fit (seeded per pod: ``gpurandom.seed``),
  and a random device for a shared-GPU pod.
- ``gpudotprod``: the smallest dot product of the node's free (CPU, GPU) and the pod's request.
- ``gpuclustering``: nodes already running GPU pods of the same kind (shared, 1-GPU, 2-GPU, ...).
- ``gpupacking``: shared GPUs first, then free GPUs on used nodes, then free nodes.
- ``gpubestfit``: the least free (CPU, GPU) left after the pod.

Ties go to the first node by name, our scheduler's rule and also the artifact's (its
kube-scheduler is patched to take the smallest name, for reproducibility). The devices of a
placed pod are the node table's best fit (the artifact's "best" GPU selection), except for
``gpurandom``, whose seed comes from the conf so that a replay is repeatable.
"""

from __future__ import annotations

import abc
import zlib

import msgspec
import numpy as np

from ..framework import ArgsT, DeviceChoice, EventHandler, NoArgs, NodeScore, Plugin, ScalarScore, SessionView
from ..nodes import DEVICE_CORES
from ..state import TaskState

MILLI_PER_CORE = 10.0  # device cores (100 per GPU) -> milli-GPU (1000 per GPU)
MAX_CPU, MAX_GPU = 128.0, 8000.0  # the artifact's MaxSpecCpu (cores here) and MaxSpecGpu (milli)
EPS = 1e-6


def free_milli(dev: np.ndarray) -> np.ndarray:
    free: np.ndarray = np.maximum(dev, 0.0).sum(axis=-1) * MILLI_PER_CORE
    return free


def pod_milli(task: TaskState) -> float:
    number, cores = task.vgpu
    return number * cores * MILLI_PER_CORE


def is_shared(task: TaskState) -> bool:
    return task.vgpu[0] == 1 and task.vgpu[1] < DEVICE_CORES


class GpuScorer(Plugin[ArgsT], abc.ABC, NodeScore, ScalarScore):
    """Base: node views in the artifact's terms."""

    @abc.abstractmethod
    def score(self, task: TaskState, rows: np.ndarray) -> np.ndarray:
        """Each baseline's own score of ``rows`` (every baseline is a Score plugin)."""

    def on_session_open(self, ssn: SessionView) -> None:
        super().on_session_open(ssn)
        self.nodes = ssn.nodes

    def cpu_free(self, rows: np.ndarray) -> np.ndarray:
        cpu: np.ndarray = self.nodes.idle[rows, 0]
        return cpu

    def dev(self, rows: np.ndarray) -> np.ndarray:
        dev: np.ndarray = self.nodes.device_free[rows]
        return dev

    def score_one(self, task: TaskState, row: int) -> float:
        return float(self.score(task, np.array([row]))[0])


class RandomArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    seed: int = msgspec.field(default=0, name="gpurandom.seed")


class GpuRandomPlugin(GpuScorer[RandomArgs], DeviceChoice):
    NAME = "gpurandom"
    Args = RandomArgs
    per_task = True  # a fresh draw for every pod, not one per pod shape

    def _rng(self, task: TaskState, stream: int) -> np.random.Generator:
        return np.random.default_rng([self.args.seed, zlib.crc32(task.name.encode()), stream])

    def score(self, task: TaskState, rows: np.ndarray) -> np.ndarray:
        draws: np.ndarray = self._rng(task, 0).random(self.nodes.size)[rows]
        return draws

    def choose_devices(self, task: TaskState, row: int) -> tuple[int, ...]:
        if not is_shared(task):
            return ()
        fits = np.flatnonzero(self.nodes.device_free[row] >= task.vgpu[1] - EPS)
        return (int(self._rng(task, 1).choice(fits)),) if len(fits) else ()


class GpuDotProdPlugin(GpuScorer[NoArgs]):
    """``DotProductScore`` with the artifact's "merge" dimensions and "max" normalisation."""

    NAME = "gpudotprod"

    def score(self, task: TaskState, rows: np.ndarray) -> np.ndarray:
        cpu = max(float(task.req[0]), 0.1)
        dot = (
            self.cpu_free(rows) / MAX_CPU * cpu / MAX_CPU
            + free_milli(self.dev(rows)) / MAX_GPU * pod_milli(task) / MAX_GPU
        )
        return np.floor(100.0 * (1.0 - dot / 2.0))


class GpuClusteringPlugin(GpuScorer[NoArgs], EventHandler):
    """``GpuClusteringScore``: kinds of GPU pods a node already runs, counted per node."""

    NAME = "gpuclustering"

    def on_session_open(self, ssn: SessionView) -> None:
        super().on_session_open(ssn)
        kinds = sorted({k for job in ssn.jobs.values() for t in job.tasks if (k := self.kind(t))})
        self.kinds = {k: i for i, k in enumerate(kinds)}
        self.counts = np.zeros((ssn.nodes.size, max(len(kinds), 1)), dtype=np.int64)
        for row, tasks in enumerate(ssn.nodes.tasks):
            for t in tasks:
                self._count(t, row, +1)

    @staticmethod
    def kind(t: TaskState) -> str:
        number, cores = t.vgpu
        if not number:
            return ""
        return "share" if is_shared(t) else f"{number}-gpu"

    def _count(self, t: TaskState, row: int, d: int) -> None:
        k = self.kind(t)
        if k and row >= 0:
            self.counts[row, self.kinds[k]] += d

    def on_allocate(self, task: TaskState) -> None:
        self._count(task, task.node, +1)

    def on_deallocate(self, task: TaskState) -> None:
        self._count(task, task.node, -1)

    def score(self, task: TaskState, rows: np.ndarray) -> np.ndarray:
        k = self.kind(task)
        if not k:
            return np.zeros(len(rows))
        left = free_milli(self.dev(rows))
        base = np.floor(25.0 * (MAX_GPU - left) / MAX_GPU)
        counts = self.counts[rows]
        kinds = (counts > 0).sum(axis=1)
        same = counts[:, self.kinds[k]] > 0
        bonus = np.where(same, np.where(kinds == 1, 75.0, 50.0), np.where(kinds == 0, 25.0, 0.0))
        return base + bonus


class GpuPackingPlugin(GpuScorer[NoArgs]):
    """``GpuPackingScore``: shared GPUs (50-100), else free GPUs of used nodes (33-50), else free nodes."""

    NAME = "gpupacking"

    def score(self, task: TaskState, rows: np.ndarray) -> np.ndarray:
        number, cores = task.vgpu
        if not number:
            return np.zeros(len(rows))
        dev = np.sort(self.dev(rows), axis=1)  # least free first; padding (-1) never fits
        present = (dev >= 0).sum(axis=1)
        full = (dev >= DEVICE_CORES - EPS).sum(axis=1)
        fits = dev >= cores - EPS
        chosen = fits & (np.cumsum(fits, axis=1) <= number)
        full_used = (chosen & (dev >= DEVICE_CORES - EPS)).sum(axis=1)
        free_pct = (np.where(chosen, np.floor(dev * MILLI_PER_CORE * 100.0 / 1000.0 + EPS), 0.0)).sum(axis=1)
        shared = np.maximum(100.0 - np.floor(free_pct / 10.0), 50.0)
        used_node = np.where(full_used > 0, np.maximum(50.0 - full_used, 33.0), shared)
        score: np.ndarray = np.where(full == present, np.maximum(33.0 - full, full), used_node)
        return score


class GpuBestFitPlugin(GpuScorer[NoArgs]):
    """``BestFitScore``: 100 * (1 - mean of the (CPU, GPU) left after the pod, over the biggest node)."""

    NAME = "gpubestfit"

    def score(self, task: TaskState, rows: np.ndarray) -> np.ndarray:
        cpu = max(float(task.req[0]), 0.1)
        left = (self.cpu_free(rows) - cpu) / MAX_CPU * 0.5 + (
            free_milli(self.dev(rows)) - pod_milli(task)
        ) / MAX_GPU * 0.5
        return np.floor((1.0 - left) * 100.0 + EPS)
