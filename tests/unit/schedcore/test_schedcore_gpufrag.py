"""Fragmentation-aware GPU placement (gpufrag, and FGD as the paper has it): node and devices chosen.

Each case is a small cluster, the pods already running (with the devices they hold), a history
of finished pods that sets the mix of pod shapes, and one pending pod; the table says where it
goes and on which devices, under each policy.
"""

from __future__ import annotations

from typing import Any

import pytest

from hyperjob.schedcore import LIVE_DEFAULT_CONF_TEXT, ConfError, Scheduler, parse_conf
from hyperjob.schedcore.testing import job, node, queue, snapshot
from hyperjob.schedcore.trace import GPU_MODEL_LABEL, model_affinity

ONLY = """
actions: "allocate"
tiers:
- plugins:
  - name: predicates
  - name: {plugin}
"""
GPUFRAG, FGD = ONLY.format(plugin="gpufrag"), ONLY.format(plugin="fgd")


def gpu_node(name: str, gpus: int, cpu: float = 64, mem: str = "256Gi", model: str = "") -> Any:
    n = node(name).cpu(cpu).mem(mem).gpus(gpus)
    return n.labels({GPU_MODEL_LABEL: model}) if model else n


def shared(cores: float, cpu: float = 1, mem: str = "4Gi") -> dict[str, Any]:
    return {"cpu": cpu, "mem": mem, "vgpu": 1, "vgpu_cores": cores}


def whole(gpus: int, cpu: float = 1, mem: str = "4Gi") -> dict[str, Any]:
    return {"cpu": cpu, "mem": mem, "gpu": gpus}


def history(*shapes: tuple[int, dict[str, Any]]) -> Any:
    """Finished pods: they set the mix of shapes and hold nothing."""
    b = job("history").phase("Running")
    for k, (count, request) in enumerate(shapes):
        b.tasks(count, role=f"s{k}", status="Succeeded", **request)
    return b


def running(name: str, on: str, devices: tuple[int, ...], request: dict[str, Any]) -> Any:
    return job(name).phase("Running").min(1).running([on], devices=devices, **request)


def place(conf: str, nodes: list[Any], others: list[Any], pod: dict[str, Any]) -> tuple[str, tuple[int, ...]]:
    pending = job("pod").min(1).created(1).tasks(1, **pod)
    decision = Scheduler(parse_conf(conf)).cycle(snapshot(nodes, [queue("default")], [*others, pending]))
    (bind,) = [b for b in decision.binds if b.job == "pod"]
    return bind.node, bind.devices


CASES = {
    "shared-fills-the-partly-used-device": (
        [gpu_node("a-fresh", 1), gpu_node("b-used", 2)],
        [running("r", "b-used", (0,), shared(60)), history((10, shared(60)), (10, shared(40)))],
        shared(40),
        {"gpufrag": ("b-used", (0,)), "fgd": ("b-used", (0,))},
    ),
    "shared-takes-the-tightest-device": (
        [gpu_node("a", 4)],
        [running("r1", "a", (0,), shared(30)), running("r2", "a", (2,), shared(50)), history((10, shared(50)))],
        shared(50),
        {"gpufrag": ("a", (2,)), "fgd": ("a", (2,))},
    ),
    "multi-gpu-keeps-the-whole-node-free": (
        [gpu_node("a-whole", 8), gpu_node("b-six-used", 8)],
        [running("r", "b-six-used", (0, 1, 2, 3, 4, 5), whole(6)), history((5, whole(8)), (5, whole(2)))],
        whole(2),
        {"gpufrag": ("b-six-used", (6, 7)), "fgd": ("b-six-used", (6, 7))},
    ),
    "model-constraint-beats-a-better-fit": (
        [gpu_node("a-t4", 2, model="T4"), gpu_node("b-g2", 2, model="G2")],
        [running("r", "b-g2", (0,), shared(50)), history((10, shared(50)))],
        {**shared(50), "affinity": model_affinity(("T4",))},
        {"gpufrag": ("a-t4", (0,)), "fgd": ("a-t4", (0,))},
    ),
    # Either way no free core is lost for the mix: FGD scores both alike and takes the first
    # name, gpufrag breaks the tie by best fit and keeps a-t4 whole.
    "unconstrained-pod-takes-the-better-fit": (
        [gpu_node("a-t4", 2, model="T4"), gpu_node("b-g2", 2, model="G2")],
        [running("r", "b-g2", (0,), shared(50)), history((10, shared(50)))],
        shared(50),
        {"gpufrag": ("b-g2", (0,)), "fgd": ("a-t4", (0,))},
    ),
    # The dense node's CPU is what its GPUs will need (11 cores per GPU pod); FGD only asks
    # whether one more GPU pod fits there, so it takes the first node by name.
    "cpu-only-pod-goes-where-cpu-is-spare": (
        [gpu_node("a-dense", 8, cpu=96), gpu_node("b-cpu-rich", 2, cpu=104)],
        [history((10, whole(1, cpu=11)), (10, {"cpu": 16, "mem": "16Gi"}))],
        {"cpu": 16, "mem": "16Gi"},
        {"gpufrag": ("b-cpu-rich", ()), "fgd": ("a-dense", ())},
    ),
    # On a-small-memory the next shared pod would find its GPU half free and no memory left.
    "memory-counts": (
        [gpu_node("a-small-memory", 1, mem="12Gi"), gpu_node("b", 1, mem="64Gi")],
        [history((10, shared(50, mem="8Gi")))],
        shared(50, mem="8Gi"),
        {"gpufrag": ("b", (0,)), "fgd": ("a-small-memory", (0,))},
    ),
}


@pytest.mark.parametrize("policy", ["gpufrag", "fgd"])
@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_placement_of_gpu_pods(case: str, policy: str) -> None:
    nodes, others, pod, expected = CASES[case]
    assert place(GPUFRAG if policy == "gpufrag" else FGD, nodes, others, pod) == expected[policy]


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_live_default_conf_places_gpu_pods_like_gpufrag_alone(case: str) -> None:
    nodes, others, pod, expected = CASES[case]
    assert place(LIVE_DEFAULT_CONF_TEXT, nodes, others, pod) == expected["gpufrag"]


def test_devices_recorded_in_a_bind_are_held_in_the_next_cycle() -> None:
    nodes = [gpu_node("a", 2)]
    # Device 1 is taken by the running pod (as its bind said); best fit alone would pick 0.
    others = [running("r", "a", (1,), shared(60)), history((4, shared(40)))]
    assert place(GPUFRAG, nodes, others, shared(40)) == ("a", (1,))


def test_whole_gpus_and_shares_use_the_same_devices() -> None:
    nodes = [gpu_node("a", 2)]
    others = [running("r", "a", (0,), shared(30))]
    assert place(GPUFRAG, nodes, others, whole(1)) == ("a", (1,))
    pending = job("pod").min(1).tasks(1, **whole(2))
    decision = Scheduler(parse_conf(GPUFRAG)).cycle(snapshot(nodes, [queue("default")], [*others, pending]))
    assert decision.binds == []  # one device is whole, the other has 70 cores left


def test_without_gpu_pods_the_live_default_decides_like_volcanos_default() -> None:
    from hyperjob.schedcore import DEFAULT_CONF_TEXT
    from tests.unit.schedcore.test_schedcore_properties import random_snapshot

    for seed in range(8):
        snap = random_snapshot(seed)
        assert Scheduler(parse_conf(LIVE_DEFAULT_CONF_TEXT)).cycle(snap) == Scheduler(
            parse_conf(DEFAULT_CONF_TEXT)
        ).cycle(snap)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ("{gpufrag.coverage: 0}", "gpufrag"),
        ("{gpufrag.balance: -1}", "gpufrag"),
        ("{gpufrag.window: many}", "gpufrag"),
        ("{gpufrag.spread: 1}", "unknown argument 'gpufrag.spread'"),
    ],
    ids=["coverage-zero", "negative-balance", "window-not-a-number", "unknown-argument"],
)
def test_bad_gpufrag_arguments_are_named(arguments: str, message: str) -> None:
    with pytest.raises(ConfError, match=message.replace(".", r"\.")):
        parse_conf(GPUFRAG.replace("  - name: gpufrag", f"  - name: gpufrag\n    arguments: {arguments}"))


def test_gpufrag_window_keeps_the_recent_mix() -> None:
    # b has 2 GPUs and 4 cores left. Over the whole history (half 8-GPU pods) opening a would
    # break its room for an 8-GPU pod, so the pod goes to b. Lately only 1-GPU pods of 4 cores
    # come: on b the pod would strand the last GPU without CPU, so the recent mix picks a.
    nodes = [gpu_node("a-whole", 8), gpu_node("b-two-free", 8)]
    old = job("old").phase("Running").tasks(20, status="Succeeded", created=-10.0, **whole(8))
    new = job("new").phase("Running").tasks(20, status="Succeeded", **whole(1, cpu=4))
    used = running("r", "b-two-free", tuple(range(6)), whole(6, cpu=60))
    conf = GPUFRAG.replace("  - name: gpufrag", "  - name: gpufrag\n    arguments: {gpufrag.window: 20}")
    assert place(GPUFRAG, nodes, [old, new, used], whole(1, cpu=4))[0] == "b-two-free"
    assert place(conf, nodes, [old, new, used], whole(1, cpu=4))[0] == "a-whole"


def test_example_conf_is_the_live_default_spelled_out() -> None:
    from pathlib import Path

    from hyperjob.schedcore import LIVE_DEFAULT_CONF

    path = Path(__file__).parents[3] / "examples" / "schedulers" / "gpu-fragmentation-aware.conf"
    conf = parse_conf(path.read_text())
    assert conf.actions == LIVE_DEFAULT_CONF.actions
    assert [[(p.name, p.args) for p in tier] for tier in conf.tiers] == [
        [(p.name, p.args) for p in tier] for tier in LIVE_DEFAULT_CONF.tiers
    ]
