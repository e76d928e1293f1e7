"""The cluster side of coordinated preemption (ADR 0011): a cluster evicts only the named pods that
run there now (a redelivered order evicts nothing more), and the victims wait until the gang's
child holds its room."""

from __future__ import annotations

from hyperjob import events
from hyperjob.services.cluster_scheduler import domain
from hyperjob.store import Binding

ORDER = [events.PreemptVictims(job="batch", pods=["batch-w-0", "batch-w-1", "batch-w-9"])]


def pod(name: str, phase: str = "Running", uid: str = "u") -> events.PodState:
    return events.PodState(name=name, task="w", index=int(name.rsplit("-", 1)[1]), uid=uid, version=0, phase=phase)


def view(jobs: dict[str, list[events.PodState]], bound: list[str]) -> domain.ClusterView:
    return domain.ClusterView(
        nodes={},
        queues={},
        jobs={
            name: domain.JobView(name=name, uid=name, version=0, created=0.0, pods={p.name: p for p in pods})
            for name, pods in jobs.items()
        },
        bound={p: Binding("c1", p, "n0", {"nvidia.com/gpu": 1.0}, "u") for p in bound},
        phases={},
        reservations={},
    )


def test_only_the_named_pods_running_here_are_evicted_with_the_reason() -> None:
    state = view({"batch": [pod("batch-w-0"), pod("batch-w-1", phase="Pending"), pod("batch-w-2")]},
                 ["batch-w-0", "batch-w-1", "batch-w-2"])  # fmt: skip
    out = domain.CycleOutcome()
    assert domain.evict_for_gang("c1", state, ORDER, "preempt: for HyperJob urgent", out) == 1
    assert [u.pod for u in out.unbinds] == ["batch-w-0"]
    (ref,) = out.evicted["batch"]
    assert (ref.pod, ref.node, ref.reason) == ("batch-w-0", "n0", "preempt: for HyperJob urgent")


def test_a_redelivered_order_evicts_nothing_more() -> None:
    state = view({"batch": [pod("batch-w-0", phase="Pending", uid="u2")]}, [])  # evicted, made again
    out = domain.CycleOutcome()
    assert domain.evict_for_gang("c1", state, ORDER, "preempt", out) == 0
    assert out.unbinds == [] and out.evicted == {}


def test_the_victims_wait_until_the_child_holds_pods_or_the_wait_expires() -> None:
    state = view({"urgent-0": [pod("urgent-0-t-0", phase="Pending")]}, [])
    assert not domain.gate_lifted(state, "urgent-0", expired=False)
    assert domain.gate_lifted(state, "urgent-0", expired=True)
    assert domain.gate_lifted(state, "gone", expired=False)
    held = view({"urgent-0": [pod("urgent-0-t-0", phase="Pending")]}, ["urgent-0-t-0"])
    assert domain.gate_lifted(held, "urgent-0", expired=False)
