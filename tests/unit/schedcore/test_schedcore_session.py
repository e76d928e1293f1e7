"""Session close (podgroup phases), Statement rollback, and the bench function's shape."""

from __future__ import annotations

import numpy as np
import pytest

from hyperjob.schedcore import DEFAULT_CONF_TEXT, Scheduler, parse_conf
from hyperjob.schedcore.bench import BenchResult, run
from hyperjob.schedcore.statement import Statement
from hyperjob.schedcore.testing import job, node, queue, snapshot


def phase_of(j, nodes=None):
    snap = snapshot(nodes or [node("n1").cpu(4).mem("16Gi")], [queue("default")], [j])
    return Scheduler(parse_conf(DEFAULT_CONF_TEXT)).cycle(snap).podgroup_phases[j.kw["name"]]


@pytest.mark.parametrize(
    ("builder", "expected"),
    [
        (job("j").min(2).phase("Running").running(["n1"], cpu=1).tasks(1, cpu=8), "Unknown"),
        (job("j").min(2).phase("Running").tasks(2, status="Succeeded", nodes=["n1", "n1"], cpu=1), "Completed"),
        (job("j").min(2).phase("Inqueue").running(["n1"], cpu=1).tasks(1, cpu=8), "Unknown"),
        (job("j").min(2).phase("Inqueue").tasks(2, cpu=8), "Inqueue"),
        (job("j").min(2).phase("Running").tasks(2, cpu=8), "Pending"),
        (job("j").min(1).phase("Running").running(["n1"], cpu=1), "Running"),
        (job("j").min(1).phase("Inqueue").tasks(1, cpu=1), "Inqueue"),
    ],
    ids=[
        "running-below-min-and-unschedulable-is-unknown",
        "all-finished-is-completed",
        "inqueue-partial-unknown",
        "inqueue-stays-inqueue",
        "running-with-nothing-scheduled-falls-back-to-pending",
        "running",
        "bound-this-cycle-is-running-next-cycle",
    ],
)
def test_podgroup_phase_at_close(builder, expected):
    assert phase_of(builder) == expected


def test_statement_discard_restores_every_node_row():
    snap = snapshot(
        [node("n1").cpu(4).mem("16Gi"), node("n2").cpu(4).mem("16Gi")],
        [queue("default")],
        [job("run").min(1).phase("Running").running(["n1"], cpu=2), job("p").min(1).tasks(2, cpu=1)],
    )
    ssn = Scheduler(parse_conf(DEFAULT_CONF_TEXT)).open(snap)
    before = (ssn.nodes.idle.copy(), ssn.nodes.fidle.copy(), ssn.nodes.releasing.copy(), ssn.nodes.pipelined.copy())
    running = ssn.jobs["run"].tasks[0]
    a, b = ssn.jobs["p"].tasks
    stmt = Statement(ssn)
    stmt.evict(running, "preempt")
    stmt.allocate(a, 1)
    stmt.pipeline(b, 0)
    assert ssn.jobs["p"].ready_num() == 1 and running.status == "Releasing"
    stmt.discard()
    after = (ssn.nodes.idle, ssn.nodes.fidle, ssn.nodes.releasing, ssn.nodes.pipelined)
    assert all(np.array_equal(x, y) for x, y in zip(before, after, strict=True))
    assert running.status == "Running" and a.status == "Pending" and b.status == "Pending"
    assert ssn.jobs["p"].ready_num() == 0


def test_statement_commit_turns_each_typed_operation_into_its_output():
    snap = snapshot(
        [node("n1").cpu(4).mem("16Gi"), node("n2").cpu(4).mem("16Gi")],
        [queue("default")],
        [job("run").min(1).phase("Running").running(["n1"], cpu=2), job("p").min(1).tasks(2, cpu=1)],
    )
    ssn = Scheduler(parse_conf(DEFAULT_CONF_TEXT)).open(snap)
    running = ssn.jobs["run"].tasks[0]
    a, b = ssn.jobs["p"].tasks
    stmt = Statement(ssn)
    stmt.evict(running, "reclaim")
    stmt.allocate(a, 1)
    stmt.pipeline(b, 0)
    assert [type(op).__name__ for op in stmt.ops] == ["Evicted", "Allocated", "Pipelined"]
    stmt.commit()
    assert stmt.ops == [] and a.status == "Binding"
    assert [(e.task, e.node, e.reason) for e in ssn.evictions] == [(running.name, "n1", "reclaim")]
    assert [(x.task, x.node) for x in ssn.binds] == [(a.name, "n2")]
    assert [(x.task, x.node) for x in ssn.pipelined] == [(b.name, "n1")]


@pytest.mark.parametrize("gang", [1, 8], ids=["single-pod-jobs", "gangs-of-8"])
def test_bench_binds_every_pod(gang):
    result = run(nodes=50, pods=64, gang=gang, seed=1)
    assert isinstance(result, BenchResult)
    assert result.bound == result.pods == 64 and result.cycles >= 1 and result.pods_per_second > 0


@pytest.mark.parametrize(
    "case", ["empty", "no-nodes", "pod-on-unknown-node", "only-not-ready-nodes", "zero-allocatable"]
)
def test_odd_snapshots_give_a_decision_not_an_exception(case):
    nodes = {
        "empty": [],
        "no-nodes": [],
        "pod-on-unknown-node": [node("n1").cpu(4).mem("8Gi")],
        "only-not-ready-nodes": [node("n1").cpu(4).mem("8Gi").not_ready()],
        "zero-allocatable": [node("n1")],
    }[case]
    jobs = (
        []
        if case == "empty"
        else [job("run").min(1).phase("Running").running(["ghost"], cpu=1), job("new").min(1).tasks(2, cpu=1)]
    )
    conf = DEFAULT_CONF_TEXT.replace('"enqueue, allocate, backfill"', '"enqueue, allocate, preempt, reclaim, backfill"')
    d = Scheduler(parse_conf(conf)).cycle(snapshot(nodes, [queue("default")], jobs))
    assert len(d.binds) == (2 if case == "pod-on-unknown-node" else 0) and d.evictions == []
