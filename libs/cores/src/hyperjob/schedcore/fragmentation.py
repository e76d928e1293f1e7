"""Expected GPU fragmentation of a node for a mix of pod shapes (FGD: Weng et al., "Beware of
Fragmentation", USENIX ATC'23, and its artifact hkust-adsl/kubernetes-scheduler-simulator).

A node's free GPU cores are *fragmented for a pod shape* when that shape cannot use them: all of
them when the shape cannot land on the node at all (a CPU-only shape, a GPU model it does not
accept, too little CPU, too few devices with enough free cores), otherwise those of the devices
whose free cores are below what the shape asks per device. A node's expected fragmentation is
the popularity-weighted sum of that over the *typical* shapes: the most frequent shapes that
together make ``coverage`` of the pods (FGD's "typical pods": 95 %, counted one shape at a time).

Units are the node table's: CPU in cores, memory in bytes, GPU in device cores (100 = one GPU,
``NodeTable.device_free``; -1 marks a device slot the node does not have). Everything here is
numpy over a batch of node states, so a scorer can evaluate every candidate (node, device) of a
pod in a few array operations. Pure: no session, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import TypeVar

import numpy as np

EPS = 1e-6
K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Shapes:
    """The typical pod shapes of a workload, one entry per shape (length T), and where each may go.

    ``number`` is the devices a shape asks for (0: no GPU), ``cores`` the cores on each of them;
    ``access[t, n]`` says whether shape t may use node n at all (GPU model, selectors, taints).
    ``memory`` is only consulted by callers that ask for it (FGD's definition ignores memory).
    """

    cpu: np.ndarray
    memory: np.ndarray
    number: np.ndarray
    cores: np.ndarray
    weight: np.ndarray
    access: np.ndarray

    @cached_property
    def gpu(self) -> np.ndarray:
        """Indexes of the shapes that ask for GPU devices."""
        return np.flatnonzero(self.number > 0)

    @cached_property
    def thresholds(self) -> tuple[np.ndarray, np.ndarray]:
        """The distinct per-device cores of the GPU shapes, and which one each GPU shape asks."""
        values, which = np.unique(self.cores[self.gpu], return_inverse=True)
        return values, which


def typical(counts: Mapping[K, float], coverage: float, order: Callable[[K], object]) -> list[tuple[K, float]]:
    """The most popular shapes until they make ``coverage`` of the total, with renormalised weights.

    Most frequent first; among equally frequent shapes the larger ``order(key)`` comes first
    (FGD sorts its pod resources the same way). Always at least one shape when ``counts`` has any.
    """
    total = float(sum(counts.values()))
    if total <= 0:
        return []
    ranked = sorted(counts.items(), key=lambda kv: (kv[1], order(kv[0])), reverse=True)
    chosen: list[tuple[K, float]] = []
    cum = 0.0
    for key, count in ranked:
        if chosen and cum >= coverage * total:
            break
        chosen.append((key, count))
        cum += count
    return [(key, count / cum) for key, count in chosen]


def gpu_free(dev: np.ndarray) -> np.ndarray:
    """Free device cores per state (the -1 padding of absent devices counts as nothing)."""
    free: np.ndarray = np.maximum(dev, 0.0).sum(axis=-1)
    return free


def expected(
    shapes: Shapes, rows: np.ndarray, cpu: np.ndarray, dev: np.ndarray, memory: np.ndarray | None = None
) -> np.ndarray:
    """Expected fragmented cores of S node states: state s is node ``rows[s]`` with ``cpu[s]``
    cores and ``dev[s]`` device cores free (and ``memory[s]`` bytes, when memory should count)."""
    free = gpu_free(dev)
    gpu = shapes.gpu
    if len(gpu) == 0 or len(rows) == 0:
        return free * float(shapes.weight.sum())
    usable = usable_for(shapes, rows, cpu, dev, memory)
    out: np.ndarray = free * float(shapes.weight.sum()) - _weighted(usable, shapes.weight[gpu])
    return out


def _weighted(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``values @ weights`` for (S, K) x (K,), as S separate (1, K) x (K, 1) products: each
    state's figure is computed alone, whatever the other states of the batch. (One (S, K)
    matrix product lets BLAS block the rows, which moved the result in its last bit: a node
    scored 49 or 50 on FGD's scale depending on which nodes were refreshed with it.)"""
    out: np.ndarray = (values[:, None, :] @ weights[:, None])[:, 0, 0]
    return out


def usable_for(
    shapes: Shapes, rows: np.ndarray, cpu: np.ndarray, dev: np.ndarray, memory: np.ndarray | None
) -> np.ndarray:
    """(S, GPU shapes): free cores each GPU shape could use in each state (0 where it cannot land)."""
    gpu = shapes.gpu
    thresholds, which = shapes.thresholds
    positive = np.maximum(dev, 0.0)
    holds = dev[:, None, :] >= thresholds[None, :, None] - EPS  # (S, K, D)
    count = holds.sum(axis=2)  # (S, K)
    cores = (holds @ positive[:, :, None])[:, :, 0]  # (S, K); one product per state, as _weighted
    fits = shapes.access[gpu][:, rows].T & (cpu[:, None] >= shapes.cpu[gpu] - EPS)
    fits &= count[:, which] >= shapes.number[gpu]
    if memory is not None:
        fits &= memory[:, None] >= shapes.memory[gpu] - 1.0
    return np.where(fits, cores[:, which], 0.0)


def unfed(
    shapes: Shapes,
    cpu: np.ndarray,
    dev: np.ndarray,
    memory: np.ndarray | None = None,
    supply: tuple[float, float] = (np.inf, np.inf),
) -> np.ndarray:
    """Free GPU cores of each state that its free CPU (and memory) cannot feed at the mix's rate.

    The rate is what the GPU pods of the mix ask per GPU core, plus a share of what its CPU-only
    pods ask: they draw on the same nodes, but only as far as the CPU the cluster has beyond its
    GPU pods' needs (``supply``: the cluster's CPU and memory per GPU core) cannot absorb them.
    None of it when the spare CPU is plenty, all of it when the CPU-only pods would take it all.
    A node whose CPU runs out before its GPUs do will strand the difference whatever pods come.
    """
    free = gpu_free(dev)
    gpu = shapes.number > 0
    cores = float((shapes.weight[gpu] * shapes.number[gpu] * shapes.cores[gpu]).sum())
    if cores <= 0:
        return np.zeros(len(free))
    fed = np.minimum(free, cpu / _rate(shapes, shapes.cpu, cores, supply[0]))
    if memory is not None:
        fed = np.minimum(fed, memory / _rate(shapes, shapes.memory, cores, supply[1]))
    out: np.ndarray = free - np.maximum(fed, 0.0)
    return out


def _rate(shapes: Shapes, amount: np.ndarray, cores: float, supply: float) -> float:
    """How much of one resource the mix consumes per GPU core (see ``unfed``)."""
    gpu_pods = float(shapes.weight[shapes.gpu] @ amount[shapes.gpu]) / cores
    other_pods = float(shapes.weight @ amount) / cores - gpu_pods
    spare = supply - gpu_pods
    share = 1.0 if spare <= 0 else min(other_pods / spare, 1.0)
    return max(gpu_pods + share * other_pods, EPS)
