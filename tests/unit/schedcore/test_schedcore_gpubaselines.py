"""The FGD paper's baseline scorers: each picks the node its published rule says."""

from __future__ import annotations

import pytest

from tests.unit.schedcore.test_schedcore_gpufrag import ONLY, gpu_node, history, place, running, shared, whole

TWO_USED = [gpu_node("a-fresh", 8, cpu=96), gpu_node("b-shared", 8, cpu=96), gpu_node("c-whole", 8, cpu=96)]
TWO_USED_PODS = [running("s", "b-shared", (0,), shared(40)), running("w", "c-whole", (0,), whole(1))]


@pytest.mark.parametrize(
    ("plugin", "nodes", "others", "pod", "expected"),
    [
        # packing: shared GPUs first, then free GPUs of used nodes, then free nodes
        ("gpupacking", TWO_USED, TWO_USED_PODS, shared(50), ("b-shared", (0,))),
        ("gpupacking", TWO_USED, TWO_USED_PODS, whole(1), ("b-shared", (1,))),
        # clustering: the node already running pods of the same kind
        ("gpuclustering", TWO_USED, TWO_USED_PODS, whole(1), ("c-whole", (1,))),
        ("gpuclustering", TWO_USED, TWO_USED_PODS, shared(50), ("b-shared", (0,))),
        # best fit: least CPU and GPU left after the pod
        ("gpubestfit", [gpu_node("a-big", 8, cpu=96), gpu_node("b-small", 2, cpu=16)], [], whole(1), ("b-small", (0,))),
        # dot product: the node whose free (CPU, GPU) is least aligned with the request
        ("gpudotprod", [gpu_node("a-big", 8, cpu=96), gpu_node("b-small", 2, cpu=16)], [], whole(1), ("b-small", (0,))),
    ],
    ids=["packing-shared", "packing-whole", "clustering-whole", "clustering-shared", "bestfit", "dotprod"],
)
def test_baseline_picks(plugin, nodes, others, pod, expected):
    assert place(ONLY.format(plugin=plugin), nodes, [*others, history((1, pod))], pod) == expected


def random_conf(seed: int) -> str:
    return ONLY.format(plugin="gpurandom") + f"    arguments: {{gpurandom.seed: {seed}}}\n"


def test_random_is_repeatable_per_seed_and_spreads_over_seeds():
    nodes = [gpu_node(f"n{i}", 2) for i in range(4)]
    picks = [place(random_conf(seed), nodes, [], shared(30)) for seed in range(24)]
    assert picks == [place(random_conf(seed), nodes, [], shared(30)) for seed in range(24)]
    assert len({node for node, _ in picks}) == 4
    assert len({devices for _, devices in picks}) == 2
