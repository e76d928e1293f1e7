"""FGD's fragmentation measure and the CPU/memory balance term, against hand-worked node states."""

from __future__ import annotations

import numpy as np
import pytest

from hyperjob.schedcore import fragmentation as frag


def shapes(*rows: tuple[float, float, int, float, float], access: list[bool] | None = None) -> frag.Shapes:
    """rows: (cpu, memory, devices, cores per device, weight); one node unless ``access`` says more."""
    arr = np.array(rows, dtype=float).reshape(len(rows), 5)
    nodes = access or [True]
    return frag.Shapes(
        cpu=arr[:, 0],
        memory=arr[:, 1],
        number=arr[:, 2].astype(int),
        cores=arr[:, 3],
        weight=arr[:, 4],
        access=np.array([nodes] * len(rows), dtype=bool),
    )


def one(mix: frag.Shapes, cpu: float, dev: list[float], memory: float | None = None) -> float:
    mem = None if memory is None else np.array([memory])
    return float(frag.expected(mix, np.array([0]), np.array([cpu]), np.array([dev]), mem)[0])


@pytest.mark.parametrize(
    ("cpu", "dev", "expected"),
    [
        ([8], [100, 100], 0.0),  # both shapes fit, no device below 50 cores
        ([8], [60, 100], 30.0),  # the 60-core device is lost to the whole-GPU shape (weight 0.5)
        ([8], [30, -1], 30.0),  # neither shape fits a 30-core device: all of it, for both
        ([1], [100, 100], 200.0),  # too little CPU for either shape: everything is fragmented
    ],
    ids=["all-usable", "remnant-below-a-whole-gpu", "one-small-device", "cpu-starved"],
)
def test_expected_fragmentation_follows_fgds_definition(cpu, dev, expected):
    mix = shapes((2, 0, 1, 50, 0.5), (4, 0, 1, 100, 0.5))
    assert one(mix, cpu[0], dev) == pytest.approx(expected)


def test_cpu_only_shapes_count_every_free_core_and_memory_only_when_asked():
    mix = shapes((2, 0, 0, 0, 0.25), (2, 8.0, 2, 100, 0.75))
    assert one(mix, 8, [100, 100]) == pytest.approx(50.0)  # 0.25 * 200
    assert one(mix, 8, [100, 100], memory=4.0) == pytest.approx(200.0)  # no memory for the 2-GPU shape


def test_model_access_is_per_node():
    mix = shapes((1, 0, 1, 100, 1.0), access=[True, False])
    got = frag.expected(mix, np.array([0, 1]), np.array([4.0, 4.0]), np.array([[100.0], [100.0]]))
    assert got.tolist() == [0.0, 100.0]


@pytest.mark.parametrize(
    ("supply", "expected"),
    [
        (np.inf, [0.0, 400.0]),  # CPU to spare everywhere: 10 cores per GPU, for the GPU pods
        (0.125, [0.0, 600.0]),  # the CPU-only pods would take all the spare: 20 per GPU
        (0.3, [0.0, 800 - 40 / 0.15]),  # they would take half of it: 15 per GPU
    ],
    ids=["cpu-to-spare", "cpu-short", "half-taken"],
)
def test_unfed_counts_gpus_the_cpu_cannot_feed_at_the_mix_rate(supply, expected):
    # GPU pods ask 10 cores per GPU; CPU-only pods ask as much again (cores per GPU core below).
    mix = shapes((10, 0, 1, 100, 0.5), (10, 0, 0, 0, 0.5))
    got = frag.unfed(mix, np.array([160.0, 40.0]), np.array([[100.0] * 8, [100.0] * 8]), supply=(supply, np.inf))
    assert got.tolist() == pytest.approx(expected)


@pytest.mark.parametrize(
    ("coverage", "keys"),
    [
        (0.5, ["a"]),
        (0.6, ["a", "c"]),
        (1.0, ["a", "c", "b"]),
    ],
    ids=["half", "just-over-half", "all"],
)
def test_typical_shapes_cover_the_share_one_at_a_time(coverage, keys):
    chosen = frag.typical({"a": 5, "b": 2, "c": 3}, coverage, order=str)
    assert [k for k, _ in chosen] == keys
    assert sum(w for _, w in chosen) == pytest.approx(1.0)


def test_equally_popular_shapes_rank_by_order_descending():
    assert [k for k, _ in frag.typical({"x": 1, "y": 1}, 0.5, order=str)] == ["y"]


@pytest.mark.parametrize("kinds", [3, 12, 31])
@pytest.mark.parametrize("seed", range(4))
def test_a_states_figures_do_not_depend_on_the_batch_it_is_computed_in(seed, kinds):
    """Bit for bit: the scorers look a state's score up instead of recomputing it, and FGD's
    0-100 scale turns a growth of +-1e-14 into a different step than an exact 0."""
    rng = np.random.default_rng(seed)
    weight = rng.random(kinds)
    mix = frag.Shapes(
        cpu=rng.choice([1.0, 4.0, 12.0], kinds),
        memory=rng.choice([4.0, 64.0], kinds) * 2**30,
        number=rng.choice([0, 1, 1, 2, 8], kinds),
        cores=rng.choice([25.0, 30.0, 60.0, 100.0], kinds),
        weight=weight / weight.sum(),
        access=rng.random((kinds, 300)) < 0.8,
    )
    rows = np.arange(300)
    cpu = rng.choice([0.0, 3.0, 11.0, 40.0], 300)
    memory = rng.choice([1.0, 30.0, 500.0], 300) * 2**30
    dev = rng.choice([-1.0, 0.0, 25.0, 33.3, 70.0, 100.0], (300, 8))
    batch = frag.expected(mix, rows, cpu, dev, memory)
    alone = [frag.expected(mix, rows[i : i + 1], cpu[i : i + 1], dev[i : i + 1], memory[i : i + 1])[0] for i in rows]
    assert batch.tolist() == alone
    supply = (3.0, 2.0**30)
    batch_unfed = frag.unfed(mix, cpu, dev, memory, supply)
    alone_unfed = [frag.unfed(mix, cpu[i : i + 1], dev[i : i + 1], memory[i : i + 1], supply)[0] for i in rows]
    assert batch_unfed.tolist() == alone_unfed
