"""Global admission: queue priority, fair share over the fleet, job order, no head-of-line blocking."""

from __future__ import annotations

import pytest

from hyperjob import api
from hyperjob.fleetcore import (
    Candidate,
    FleetQueue,
    admit,
    deserved_shares,
    fleet_capacity,
    fleet_queue,
    hyperjob_candidate,
    hyperjob_request,
    inadmissible,
    job_candidate,
)
from tests.unit.fleetcore.fleet_builders import GPU, cluster, fleet, job_spec, rjob, task, upstream

FLEET_8 = {"cpu": 800.0, GPU: 8.0}


def q(name: str, **kw: object) -> FleetQueue:
    return FleetQueue(name=name, **kw)  # type: ignore[arg-type]


def jobs(queue: str, count: int, gpus: float = 1.0, start: int = 0, priority: int = 0) -> list[Candidate]:
    return [
        Candidate(
            name=f"{queue}{i}",
            queue=queue,
            request={GPU: gpus, "cpu": 1.0, "pods": 1.0},
            created=float(i),
            priority=priority,
        )
        for i in range(start, start + count)
    ]


def test_round_robin_takes_one_job_per_queue_per_round() -> None:
    result = admit({"a": q("a"), "b": q("b")}, {}, jobs("a", 3) + jobs("b", 3), FLEET_8)
    assert result.admitted == ("a0", "b0", "a1", "b1", "a2", "b2")


def test_weighted_fair_share_across_the_fleet() -> None:
    result = admit({"a": q("a", weight=3), "b": q("b", weight=1)}, {}, jobs("a", 8) + jobs("b", 8), FLEET_8)
    admitted = list(result.admitted)
    assert sum(n.startswith("a") for n in admitted) == 6 and sum(n.startswith("b") for n in admitted) == 2
    assert result.queues["a"].deserved[GPU] == pytest.approx(6.0)
    assert result.waiting["a6"].startswith("fleet nvidia.com/gpu")


def test_higher_priority_queue_goes_first() -> None:
    result = admit(
        {"low": q("low", created=0.0), "high": q("high", priority=10, created=1.0)},
        {},
        jobs("low", 1, gpus=8) + jobs("high", 1, gpus=8),
        FLEET_8,
    )
    assert result.admitted == ("high0",) and "low0" in result.waiting


def test_job_priority_then_creation_within_a_queue() -> None:
    pending = jobs("a", 2, gpus=4) + jobs("a", 1, gpus=4, start=5, priority=100)
    assert admit({"a": q("a")}, {}, pending, FLEET_8).admitted == ("a5", "a0")


def test_a_big_job_does_not_block_smaller_ones_behind_it() -> None:
    pending = jobs("a", 1, gpus=6) + jobs("a", 2, gpus=2, start=1)
    result = admit({"a": q("a")}, {"a": {GPU: 4.0}}, pending, FLEET_8)
    assert result.admitted == ("a1", "a2")
    assert result.waiting == {"a0": "fleet nvidia.com/gpu: 6 requested, 0 not yet promised"}


def test_strict_fifo_queue_blocks_behind_its_head() -> None:
    pending = jobs("a", 1, gpus=6) + jobs("a", 2, gpus=2, start=1)
    result = admit({"a": q("a", strict_fifo=True)}, {"a": {GPU: 4.0}}, pending, FLEET_8)
    assert result.admitted == ()
    assert result.waiting["a1"] == "queue a is strict FIFO: waiting behind a0"


def test_more_than_the_whole_fleet_is_inadmissible_not_a_wait_for_promised_room() -> None:
    """The fleet-total check comes before the promised-room one, which would hide it (issue 28)."""
    pending = jobs("a", 1, gpus=16)
    result = admit({"a": q("a")}, {"a": {GPU: 8.0}}, pending, FLEET_8)
    assert result.waiting == {"a0": "inadmissible: fleet nvidia.com/gpu: 16 requested, the whole fleet has 8"}


def test_an_inadmissible_head_does_not_block_a_strict_fifo_queue() -> None:
    pending = jobs("a", 1, gpus=16) + jobs("a", 2, gpus=2, start=1)
    result = admit({"a": q("a", strict_fifo=True)}, {}, pending, FLEET_8)
    assert result.admitted == ("a1", "a2")
    assert result.waiting["a0"].startswith("inadmissible: ")


def test_a_hyperjob_no_split_could_ever_hold_is_inadmissible_even_on_an_empty_fleet() -> None:
    """Per cluster: 2 x 8 GPUs with maxDomains 1 can never hold 12 GPUs, though the fleet has 16;
    counted on the clusters' allocatable, not on what is free now."""
    hj = upstream(
        "big",
        rjob("w", job_spec(task("t", 12)), split={"mode": "auto", "accelerators": 12, "acceleratorType": GPU}),
        maxDomains=1,
    )
    full = fleet(cluster("a", nodes=1, used_gpus=8), cluster("b", nodes=1, used_gpus=8))
    assert inadmissible(hj, full).startswith("inadmissible: ")
    small = upstream(
        "small", rjob("w", job_spec(task("t", 8)), split={"mode": "auto", "accelerators": 8, "acceleratorType": GPU})
    )
    assert inadmissible(small, full) == ""  # waits for room, which may come
    assert inadmissible(hj, {}) == ""  # no cluster known yet: nothing to judge by


def test_capability_applies_to_the_whole_fleet() -> None:
    result = admit({"a": q("a", capability={GPU: 4.0})}, {"a": {GPU: 3.0}}, jobs("a", 1, gpus=2), FLEET_8)
    assert result.waiting == {"a0": "queue a capability nvidia.com/gpu: 3 used + 2 requested > 4"}


def test_closed_and_unknown_queues_wait() -> None:
    pending = jobs("a", 1) + [Candidate(name="x", queue="nope", request={GPU: 1.0})]
    result = admit({"a": q("a", state="Closed")}, {}, pending, FLEET_8)
    assert result.waiting == {"a0": "queue a is Closed", "x": "queue nope does not exist"}


@pytest.mark.parametrize(
    ("weights", "demand", "expected"),
    [
        pytest.param((1, 1), (100.0, 20.0), (80.0, 20.0), id="unused-share-flows-to-the-other"),
        pytest.param((3, 1), (100.0, 100.0), (75.0, 25.0), id="weights-3-to-1"),
        pytest.param((1, 1), (10.0, 10.0), (10.0, 10.0), id="never-above-request"),
    ],
)
def test_deserved_water_filling(weights: tuple, demand: tuple, expected: tuple) -> None:
    queues = {"a": q("a", weight=weights[0]), "b": q("b", weight=weights[1])}
    deserved = deserved_shares(queues, {"a": {"cpu": demand[0]}, "b": {"cpu": demand[1]}}, {"cpu": 100.0})
    assert (deserved["a"]["cpu"], deserved["b"]["cpu"]) == pytest.approx(expected)


def test_guarantee_and_capability_bound_deserved() -> None:
    queues = {"a": q("a", capability={"cpu": 30.0}), "b": q("b", guarantee={"cpu": 60.0})}
    deserved = deserved_shares(queues, {"a": {"cpu": 100.0}, "b": {"cpu": 10.0}}, {"cpu": 100.0})
    assert deserved["a"]["cpu"] == pytest.approx(30.0) and deserved["b"]["cpu"] == pytest.approx(60.0)


def test_queue_manifest_and_strict_fifo_annotation() -> None:
    queue = api.decode(
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "Queue",
            "metadata": {"name": "gold", "annotations": {"hyperjob.io/queue-ordering": "strict-fifo"}},
            "spec": {"weight": 4, "capability": {"nvidia.com/gpu": "64"}, "priority": 2},
        }
    )
    assert isinstance(queue, api.Queue)
    fq = fleet_queue(queue, created=5.0)
    assert (fq.weight, fq.capability, fq.priority, fq.strict_fifo, fq.state) == (4, {GPU: 64.0}, 2, True, "Open")


def test_hyperjob_request_counts_every_task_and_fan_out() -> None:
    hj = upstream("hj", rjob("a", job_spec(task("m", 1, gpus=0, cpu="2"), task("w", 4)), replicas=2))
    request = hyperjob_request(hj)
    assert request[GPU] == 8.0 and request["cpu"] == 2 * (2 + 4 * 8) and request["pods"] == 10.0
    assert fleet_capacity([cluster("a"), cluster("b")])[GPU] == 64.0


def test_candidates_from_manifests() -> None:
    template = job_spec(task("w", 4), queue="gold")
    template["priorityClassName"] = "high"
    cand = hyperjob_candidate(upstream("hj", rjob("w", template, replicas=2)), 7.0, {"high": 1000})
    assert (cand.name, cand.queue, cand.priority, cand.created, cand.request[GPU]) == ("hj", "gold", 1000, 7.0, 8.0)
    job = api.decode(
        {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "j"},
            "spec": job_spec(task("w", 2), queue=""),
        }
    )
    assert isinstance(job, api.Job)
    plain = job_candidate(job, 1.0)
    assert (plain.queue, plain.priority, plain.request[GPU]) == ("default", 0, 2.0)


def test_room_held_by_lower_priority_work_counts_for_a_higher_priority_candidate_only() -> None:
    """The fleet's 8 GPUs are promised to admitted work of priority 1: a candidate of priority 10
    is admitted on what coordinated preemption could take back; one of priority 1 still waits."""
    held = [(1, {GPU: 8.0})]
    urgent = Candidate(name="urgent", queue="a", request={GPU: 8.0}, priority=10)
    peer = Candidate(name="peer", queue="a", request={GPU: 8.0}, priority=1)
    assert admit({"a": q("a")}, {"a": {GPU: 8.0}}, [urgent], FLEET_8, held).admitted == ("urgent",)
    waits = admit({"a": q("a")}, {"a": {GPU: 8.0}}, [peer], FLEET_8, held)
    assert waits.admitted == () and "not yet promised" in waits.waiting["peer"]
    assert admit({"a": q("a")}, {"a": {GPU: 8.0}}, [urgent], FLEET_8).admitted == ()  # without: waits
