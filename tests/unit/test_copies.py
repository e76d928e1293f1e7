"""The fault suites' concurrent-copies figure (``tests.service.copies``): two copies of a pod that
run at overlapping times count; a copy its agent froze stops counting from the freeze, and runs
again from its confirmation."""

from __future__ import annotations

from hyperjob import events
from tests.service.copies import Copies


def report(pod: str, node: str, uid: str, phase: str, at: float) -> tuple[str, events.PodReport]:
    cluster = "c1" if node.startswith("a") else "c2"
    return cluster, events.PodReport(pod=pod, uid=uid, job="j", node=node, phase=phase, at=at)


def frozen(pod: str, node: str, uid: str, at: float) -> events.PodsFrozen:
    return events.PodsFrozen(
        event_id="f",
        cluster="c1",
        agent="a",
        pods=[events.FrozenPod(pod=pod, uid=uid, job="j", node=node)],
        frozen_at=at,
    )


def confirmed(pod: str, node: str, uid: str, at: float) -> events.StartPods:
    start = events.PodStart(pod=pod, uid=uid, node=node, task="t")
    return events.StartPods(
        event_id="s", occurred_at=at, cluster="c1", job="j", job_version=1, pods=[start], resume_only=True
    )


MOVED = [report("p", "a1", "u1", "Running", 10), report("p", "b1", "u2", "Running", 40)]


def test_a_copy_still_running_when_its_pod_starts_elsewhere_is_a_concurrent_copy() -> None:
    assert Copies(MOVED).concurrent() == 1
    ended = [*MOVED, report("p", "a1", "u1", "Deleted", 39)]
    assert Copies(ended).concurrent() == 0
    assert Copies([*MOVED, report("p", "a1", "u1", "Running", 20)]).concurrent() == 1  # a restart in place


def test_a_copy_frozen_before_its_pod_starts_elsewhere_is_not_and_one_frozen_after_is() -> None:
    assert Copies(MOVED, frozen=[frozen("p", "a1", "u1", 31)]).concurrent() == 0
    assert Copies(MOVED, frozen=[frozen("p", "a1", "u1", 41)]).concurrent() == 1


def test_a_frozen_copy_confirmed_runs_again_from_its_confirmation() -> None:
    back = [frozen("p", "a1", "u1", 31)]
    assert Copies(MOVED, back, confirmed=[confirmed("p", "a1", "u1", 60)]).concurrent() == 1
    assert Copies(MOVED[:1], back, confirmed=[confirmed("p", "a1", "u1", 60)]).spans == {
        "p": [(10, 31), (60, float("inf"))]
    }
