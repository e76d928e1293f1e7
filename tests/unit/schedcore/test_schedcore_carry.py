"""A scheduler that carries what its last session derived from unchanged parts of the snapshot
(``schedcore.carry``) decides exactly as a fresh one on every snapshot of a run."""

from __future__ import annotations

import msgspec
import pytest

from hyperjob.schedcore import Scheduler, Snapshot, parse_conf
from hyperjob.schedcore.testing import advance, job, node, queue, snapshot

from .schedcore_helpers import PREEMPT_CONF, RECLAIM_CONF


def gpu_fleet() -> Snapshot:
    nodes = [node(f"n{i}").cpu(64).mem("512Gi").gpus(8) for i in range(6)]
    jobs = [
        job("low", "research").min(4).priority(1).running(["n0", "n0", "n1", "n1"], cpu=4, **{"nvidia.com/gpu": 4}),
        job("wide", "prod").min(3).priority(10).created(1.0).tasks(3, cpu=8, **{"nvidia.com/gpu": 8}),
        job("small", "research").min(1).created(2.0).tasks(5, cpu=2, **{"nvidia.com/gpu": 1}),
        job("cpu", "prod").min(2).created(3.0).tasks(2, cpu=16),
    ]
    return snapshot(nodes, [queue("research").weight(1), queue("prod").weight(3)], jobs)


def run(conf: str, carry: bool, changes: int = 4) -> list[object]:
    """The decisions of a run whose snapshots change a little each cycle (one node replaced by an
    equal new object, a new job, a job remade with bigger pods): with one scheduler (``carry``),
    or a fresh one per cycle."""
    scheduler = Scheduler(parse_conf(conf))
    snap, decisions = gpu_fleet(), []
    for i in range(changes):
        if not carry:
            scheduler = Scheduler(parse_conf(conf))
        decision = scheduler.cycle(snap)
        decisions.append(msgspec.to_builtins(decision))
        snap = advance(snap, decision, now=float(i + 1))
        nodes = [msgspec.structs.replace(n) if n.name == f"n{i}" else n for n in snap.nodes]
        extra = job(f"late-{i}", "research").min(1).created(10.0 + i).tasks(1, cpu=1, **{"nvidia.com/gpu": 2}).build()
        # A job made again under its name, its pods (same names) asking for more.
        jobs = [
            job("cpu", "prod").min(2).created(3.0).tasks(2, cpu=16 * (i + 2)).build() if j.name == "cpu" else j
            for j in snap.jobs
        ]
        snap = msgspec.structs.replace(snap, nodes=nodes, jobs=[*jobs, extra])
    return decisions


@pytest.mark.parametrize("conf", [PREEMPT_CONF, RECLAIM_CONF], ids=["preempt", "reclaim"])
def test_a_scheduler_carrying_its_last_session_decides_as_a_fresh_one(conf: str) -> None:
    assert run(conf, carry=True) == run(conf, carry=False)


def test_an_unchanged_snapshot_part_is_carried_and_a_changed_one_rebuilt() -> None:
    scheduler = Scheduler(parse_conf(PREEMPT_CONF))
    snap = gpu_fleet()
    first = scheduler.open(snap)
    second = scheduler.open(snap)
    assert second.space is first.space  # same resource names: the same space and its interned vectors
    assert second.jobs["wide"].tasks[0].req is first.jobs["wide"].tasks[0].req
    assert second.nodes.alloc is not first.nodes.alloc  # each session's table is its own
    assert (second.nodes.alloc == first.nodes.alloc).all()
    bigger = msgspec.structs.replace(snap, nodes=[*snap.nodes, node("n9").cpu(8).mem("1Gi").build()])
    assert scheduler.open(bigger).nodes.size == first.nodes.size + 1
    vgpu = job("v").tasks(1, **{"volcano.sh/vgpu-number": 1, "example.com/fpga": 1}).build()
    widened = scheduler.open(msgspec.structs.replace(snap, jobs=[*snap.jobs, vgpu]))
    assert widened.space is not first.space and "example.com/fpga" in widened.space.names
