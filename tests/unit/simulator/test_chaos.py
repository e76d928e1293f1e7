"""Deterministic fault injection (``hyperjob simulate --chaos``): every scenario holds under several
seeds, a seed replays exactly, and each invariant catches what it guards against."""

from __future__ import annotations

import asyncio
import json
import pathlib
from types import SimpleNamespace
from typing import Any

import pytest

from hyperjob import events, simulator
from hyperjob.simulator import chaos
from hyperjob.store import Binding, Commit, InMemoryStore

from .test_scenarios import SCENARIOS, _checker

SEEDS = (1, 2, 3)
EX13 = pathlib.Path(__file__).resolve().parents[3] / "examples" / "scenarios" / "ex-13-cross-cluster-gang-waits.yaml"


@pytest.mark.parametrize(("scenario", "expect"), SCENARIOS, ids=[s.stem for s, _ in SCENARIOS])
def test_scenario_holds_under_chaos(scenario: pathlib.Path, expect: pathlib.Path) -> None:
    """Invariants after every step, the same ends as without chaos, and the expectations."""
    checker = _checker()
    checks = json.loads(expect.read_text())["checks"]
    runs = list(simulator.run_chaos(scenario.read_text(), SEEDS))
    assert [r.seed for r in runs] == list(SEEDS)
    assert sum(r.injected.total() for r in runs) > 0, "chaos that injects nothing proves nothing"
    for run in runs:
        result = json.loads(simulator.to_json(run.result))
        failures = [(c, seen) for c in checks if checker is not None and (seen := checker.apply_check(c, result))]
        assert not failures, f"seed {run.seed}: {failures[0][0]} -> saw {failures[0][1]}"


def test_a_seed_replays_the_same_run_exactly() -> None:
    text = EX13.read_text()
    first, second = (next(simulator.run_chaos(text, [7])) for _ in range(2))
    assert simulator.to_json(first.result) == simulator.to_json(second.result)
    assert (first.steps, first.injected) == (second.steps, second.injected)
    other = next(simulator.run_chaos(text, [8]))
    assert (other.steps, other.injected) != (first.steps, first.injected)


def test_every_kind_of_fault_is_drawn() -> None:
    # Crashes five times as often as by default: at 2 % a seed reaches mid-cycle about 12 times, so
    # five seeds could miss it whenever any service's message count shifts the draws (the fleet
    # lease's grants, issue 33, left seeds 1-5 without one): ten seeds.
    runs = list(simulator.run_chaos(EX13.read_text(), range(1, 11), chaos.Rates(crash=0.1)))
    drawn = sum((r.injected for r in runs), start=type(runs[0].injected)())
    assert {"crash after-commit", "crash after-publish", "crash mid-cycle", "reorder", "duplicate", "rebuild"} <= set(
        drawn
    )


# -- each invariant catches what it guards against ----------------------------------------------------


def _publish(inv: chaos.Invariants, subject: str, message: events.Message, stream: str = "SCHED") -> None:
    inv.observe(stream, subject, events.encode(message), {})


def _meta(i: int) -> dict[str, Any]:
    return {"event_id": f"e{i}", "occurred_at": 0.0, "producer": "test"}


def _bound(job: str, pod: str, uid: str, node: str, i: int) -> events.PodsBound:
    return events.PodsBound(**_meta(i), cluster="c", job=job, pods=[events.PodRef(pod=pod, uid=uid, node=node)])


def test_a_pod_bound_to_two_nodes_is_a_violation() -> None:
    inv = chaos.Invariants()
    _publish(inv, "sched.pods.bound.c", _bound("j", "j-t-0", "u1", "n1", 1))
    _publish(inv, "sched.pods.bound.c", _bound("j", "j-t-0", "u1", "n1", 2))  # a duplicate: fine
    assert not inv.broken
    _publish(inv, "sched.pods.bound.c", _bound("j", "j-t-0", "u1", "n2", 3))
    assert inv.broken == ["pod j-t-0 (u1) in c bound to n1 and n2"]


def test_a_pod_running_twice_at_once_is_a_violation() -> None:
    def report(uid: str, phase: str, i: int) -> events.PodPhasesReported:
        return events.PodPhasesReported(
            **_meta(i), cluster="c", reports=[events.PodReport(pod="j-t-0", uid=uid, job="j", node="n1", phase=phase)]
        )

    inv = chaos.Invariants()
    _publish(inv, "node.pods.phase.c", report("u1", "Running", 1), "NODE")
    _publish(inv, "node.pods.phase.c", report("u1", "Failed", 2), "NODE")
    _publish(inv, "node.pods.phase.c", report("u2", "Running", 3), "NODE")  # its successor, after it ended
    assert not inv.broken
    _publish(inv, "node.pods.phase.c", report("u3", "Running", 4), "NODE")
    assert inv.broken and "runs twice" in inv.broken[0]


def test_a_pod_running_in_two_clusters_at_once_is_a_violation_unless_one_is_cut_off_whole() -> None:
    def report(cluster: str, uid: str, phase: str, i: int) -> events.PodPhasesReported:
        pod = events.PodReport(pod="j-t-0", uid=uid, job="j", node=f"{cluster}-n", phase=phase)
        return events.PodPhasesReported(**_meta(i), cluster=cluster, reports=[pod])

    inv = chaos.Invariants()
    _publish(inv, "node.pods.phase.a", report("a", "u1", "Running", 1), "NODE")
    _publish(inv, "node.pods.phase.a", report("a", "u1", "Deleted", 2), "NODE")
    _publish(inv, "node.pods.phase.b", report("b", "u2", "Running", 3), "NODE")  # moved, after it stopped
    assert not inv.broken
    frozen: set[str] = {"b"}  # clusterDown: frozen in virtual time, its pods do not run meanwhile
    inv.frozen = lambda: frozen
    _publish(inv, "node.pods.phase.a", report("a", "u3", "Running", 4), "NODE")
    assert not inv.broken
    frozen.clear()
    _publish(inv, "node.pods.phase.c", report("c", "u4", "Running", 5), "NODE")
    assert inv.broken and "runs in c and in a at once" in inv.broken[0]


def test_a_gang_member_bound_before_its_gang_starts_is_a_violation() -> None:
    inv = chaos.Invariants()
    _publish(
        inv,
        "sched.child.dispatch.c",
        events.DispatchChild(**_meta(1), child="hj-job-0", cluster="c", job={}, gang="hj", gang_attempt=2),
    )
    _publish(
        inv,
        "sched.gang.control.c",
        events.GangControl(**_meta(2), child="hj-job-0", cluster="c", action="start", attempt=1),
    )  # an older attempt
    _publish(inv, "sched.pods.bound.c", _bound("hj-job-0", "hj-job-0-t-0", "u1", "n1", 3))
    assert inv.broken == ["hj-job-0 in c bound before its gang hj (attempt 2) started"]


def test_a_dead_letter_is_a_violation() -> None:
    inv = chaos.Invariants()
    inv.observe("DLQ", "dlq.splitter", b"{}", {"Hyperjob-Original-Subject": "hj.manifest.apply"})
    assert inv.broken and inv.broken[0].startswith("dead-lettered: hj.manifest.apply")


def test_a_node_booked_beyond_its_allocatable_is_a_violation() -> None:
    store = InMemoryStore()
    store._check_binds = lambda commit: None  # type: ignore[method-assign]  # a store that forgot to check

    async def book() -> None:
        await store.set_node_allocatable("c", "n1", {"cpu": 4})
        await store.commit(Commit(binds=[Binding("c", "p0", "n1", {"cpu": 3}), Binding("c", "p1", "n1", {"cpu": 2})]))

    asyncio.run(book())
    engine = SimpleNamespace(
        store=store,
        scenario=SimpleNamespace(clusters=[SimpleNamespace(name="c")]),
        clock=SimpleNamespace(now=lambda: 12.0),
        steps=345,
    )
    probe = chaos.Chaos(seed=9)
    with pytest.raises(chaos.Violation) as caught:
        asyncio.run(probe.check(engine))  # type: ignore[arg-type]
    assert str(caught.value) == "chaos seed 9, t=12s, step 345: node n1 in c books cpu 5 > allocatable 4"


def test_an_end_unlike_the_run_without_chaos_is_a_violation() -> None:
    baseline = {
        "jobs": [
            {"name": "a", "hyperJob": None, "phase": "Completed"},
            {"name": "hj-job-0", "hyperJob": "hj", "phase": "Aborted"},
        ],
        "hyperJobs": [{"name": "hj", "phase": "Suspended"}],
    }
    # A child that was never dispatched is the HyperJob's business; the HyperJob ended the same.
    same = {
        "jobs": [{"name": "a", "hyperJob": None, "phase": "Completed"}],
        "hyperJobs": [{"name": "hj", "phase": "Suspended"}],
    }
    chaos.Chaos(1).compare(baseline, same, 0.0, 0)
    differs = {
        "jobs": [{"name": "a", "hyperJob": None, "phase": "Failed"}],
        "hyperJobs": [{"name": "hj", "phase": "Suspended"}],
    }
    with pytest.raises(chaos.Violation, match="Job a ends Failed, without chaos Completed"):
        chaos.Chaos(1).compare(baseline, differs, 0.0, 0)
