"""The plain-float single-node scorers agree exactly with the vectorised ones."""

from __future__ import annotations

import numpy as np
import pytest

from hyperjob.schedcore import DEFAULT_CONF_TEXT, Scheduler, parse_conf
from hyperjob.schedcore.placement import Placement
from hyperjob.schedcore.testing import job, node, queue, snapshot
from tests.unit.schedcore.test_schedcore_properties import CONF, random_snapshot

BINPACK = DEFAULT_CONF_TEXT + (
    "  - name: binpack\n    arguments: {binpack.weight: 3, binpack.resources: nvidia.com/gpu, "
    "binpack.resources.nvidia.com/gpu: 2}\n"
)


def session(seed: int):
    rng = np.random.default_rng(seed)
    nodes = [
        node(f"n{i}")
        .cpu(int(rng.integers(1, 65)))
        .mem(f"{int(rng.integers(1, 257))}Gi")
        .gpus(int(rng.integers(0, 9)))
        .taint("t", effect="PreferNoSchedule")
        if i % 3 == 0
        else node(f"n{i}")
        .cpu(int(rng.integers(1, 65)))
        .mem(f"{int(rng.integers(1, 257))}Gi")
        .gpus(int(rng.integers(0, 9)))
        for i in range(40)
    ]
    running = [
        job(f"r{i}")
        .min(1)
        .phase("Running")
        .running([f"n{int(rng.integers(0, 40))}"], cpu=float(rng.integers(0, 8)), gpu=int(rng.integers(0, 2)))
        for i in range(30)
    ]
    shapes = [
        job("s0").min(1).tasks(1, cpu=1, memory="1Gi"),
        job("s1").min(1).tasks(1, cpu=0.5, gpu=1),
        job("s2").min(1).tasks(1),
        job("s3").min(1).tasks(1, memory="3Gi"),
    ]
    return Scheduler(parse_conf(BINPACK)).open(snapshot(nodes, [queue("default")], running + shapes))


@pytest.mark.parametrize("seed", range(6), ids=lambda s: f"seed-{s}")
def test_score_one_equals_vector_score(seed):
    ssn = session(seed)
    rows = np.arange(ssn.nodes.size)
    for name in ("s0", "s1", "s2", "s3"):
        task = ssn.jobs[name].tasks[0]
        for _, plugin in ssn.hooks.node_score:
            vector = plugin.score(task, rows)
            assert [plugin.score_one(task, int(r)) for r in rows] == vector.tolist(), plugin.NAME


@pytest.mark.parametrize("seed", range(8), ids=lambda s: f"seed-{s}")
def test_scalar_refresh_gives_the_same_decisions(seed, monkeypatch):
    snap = random_snapshot(seed)
    fast = Scheduler(parse_conf(CONF)).cycle(snap)
    monkeypatch.setattr(Placement, "_scalar", lambda self: False)
    assert Scheduler(parse_conf(CONF)).cycle(snap) == fast
