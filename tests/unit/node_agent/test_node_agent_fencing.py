"""Self-fencing's decision (issue 33): an agent is cut off once its last acknowledged heartbeat is
older than the fleet lease, by its own clock, strictly; a beat renews the contact from the moment it
was sent; and the fence (lease, check, kill grace) ends inside the margin the fleet waits beyond
the lease before it moves a child."""

from __future__ import annotations

import pytest

from hyperjob import fleetcore
from hyperjob.services.node_agent import domain, fencing
from hyperjob.services.node_agent.config import Settings

LEASE = 20.0


@pytest.mark.parametrize(
    ("silent_for", "cut"),
    [(0.0, False), (LEASE - 0.001, False), (LEASE, False), (LEASE + 0.001, True), (LEASE + 30.0, True)],
    ids=["just-beat", "just-below-the-lease", "exactly-the-lease", "just-above-the-lease", "long-gone"],
)
def test_an_agent_is_cut_off_only_once_its_last_beat_is_older_than_the_lease(silent_for: float, cut: bool) -> None:
    assert fencing.cut_off(contact=100.0, now=100.0 + silent_for, lease=LEASE) is cut


class FakeClock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_an_acknowledged_beat_renews_the_contact_from_when_it_was_sent() -> None:
    clock = FakeClock()
    contact = fencing.Contact(clock, LEASE)
    sent = clock.t + 5.0
    clock.t = sent + 4.0  # the ack took 4 s: the fleet may have heard the beat from ``sent`` on
    contact.reached(sent)
    clock.t = sent + LEASE
    assert not contact.lost()
    clock.t = sent + LEASE + 0.001
    assert contact.lost()


def test_a_late_ack_of_an_older_beat_does_not_move_the_contact_back() -> None:
    clock = FakeClock()
    contact = fencing.Contact(clock, LEASE)
    contact.reached(clock.t + 10.0)
    contact.reached(clock.t + 2.0)
    assert contact.last == clock.t + 10.0


def test_a_new_agent_has_its_contact_now_and_is_not_cut_off() -> None:
    clock = FakeClock()
    contact = fencing.Contact(clock, LEASE)
    clock.t += LEASE
    assert not contact.lost()
    assert contact.lost(at=clock.t + 0.5)


def test_the_freeze_is_done_before_the_fleet_may_move_a_child() -> None:
    """The pods stand still by lease + check after the last beat the fleet heard (SIGSTOP acts at
    once); the fleet moves nothing before lease + margin (``fleetcore.move_after``)."""
    stopped_by = fleetcore.FLEET_LEASE + fencing.FENCE_CHECK_PERIOD
    assert stopped_by < fleetcore.move_after()


def test_fenced_pods_leave_the_node_failed_with_the_reason() -> None:
    pods = {
        name: domain.RunningPod(
            pod=name,
            uid=f"u-{name}",
            job="j",
            node="n1",
            job_version=2,
            started_at=0.0,
            finishes_at=None,
            exit_code=0,
            restart_policy="OnFailure",
            restarts=1,
        )
        for name in ("j-w-1", "j-w-0", "j-w-2")
    }
    reports = domain.failed(pods, ["j-w-1", "j-w-0"], fencing.FENCE_EXIT_CODE, fencing.FENCE_REASON)
    assert [(r.pod, r.uid, r.phase, r.exit_code, r.reason, r.restarts) for r in reports] == [
        ("j-w-0", "u-j-w-0", "Failed", 137, "Fenced", 1),
        ("j-w-1", "u-j-w-1", "Failed", 137, "Fenced", 1),
    ]
    assert list(pods) == ["j-w-2"]


def test_a_lease_too_short_for_the_heartbeat_is_refused_naming_both_fields() -> None:
    with pytest.raises(ValueError, match=r"fleet_lease \(5 s\) must be at least 4 heartbeat periods"):
        Settings(cluster="c1", fleet_lease=5.0, heartbeat_period=2.0)
    assert Settings(cluster="c1", fleet_lease=8.0, heartbeat_period=2.0).fleet_lease == 8.0


def test_a_cut_off_is_fenced_once_and_a_beat_that_gets_through_ends_it() -> None:
    """Pods started after the fence came through a bus that delivers again (before the agent's next
    beat is acknowledged): the same cut-off does not stop them; a new cut-off does."""
    clock = FakeClock()
    contact = fencing.Contact(clock, LEASE)
    clock.t += LEASE
    assert not contact.must_fence()
    clock.t += 0.5
    assert contact.must_fence()
    clock.t += 5.0
    assert contact.lost() and not contact.must_fence()
    contact.reached(clock.t)
    assert not contact.must_fence()
    clock.t += LEASE + 0.5
    assert contact.must_fence()


# -- freeze and resume: the pods frozen at the lease wait for the fleet's word -----------------------


def frozen_at_the_lease(silent_for: float) -> tuple[FakeClock, fencing.Contact, fencing.Frozen]:
    """An agent silent for ``silent_for`` since its last beat, its round having frozen what it had."""
    clock = FakeClock()
    contact, frozen = fencing.Contact(clock, LEASE), fencing.Frozen(LEASE)
    clock.t += silent_for
    if contact.must_fence():
        frozen.freeze({"j-w-0": "u0", "j-w-1": "u1"})
    return clock, contact, frozen


@pytest.mark.parametrize(
    ("silent_for", "froze"),
    [(LEASE - 0.001, False), (LEASE, False), (LEASE + 0.001, True)],
    ids=["below-the-lease", "at-the-lease", "above-the-lease"],
)
def test_pods_freeze_only_once_the_agent_is_cut_off_longer_than_the_lease(silent_for: float, froze: bool) -> None:
    _, _, frozen = frozen_at_the_lease(silent_for)
    assert bool(frozen.pods) is froze


def test_a_frozen_pod_the_job_controller_confirms_resumes_and_only_that_incarnation() -> None:
    clock, contact, frozen = frozen_at_the_lease(LEASE + 1.0)
    clock.t += 5.0
    contact.reached(clock.t)
    frozen.reached(clock.t)
    assert not frozen.confirm("j-w-0", "another-uid")  # a newer incarnation: not the one frozen
    assert frozen.confirm("j-w-0", "u0")
    assert not frozen.confirm("j-w-0", "u0")  # resumed once
    assert frozen.pods == {"j-w-1": "u1"}


def test_frozen_pods_nobody_confirms_are_fenced_once_the_agent_is_back_longer_than_the_lease() -> None:
    """Moved while frozen (no word that the fleet still holds them here): killed, all at once, once."""
    clock, contact, frozen = frozen_at_the_lease(LEASE + 1.0)
    clock.t += 60.0  # still cut off: the wait has not started, they stand still
    assert frozen.expire(clock.t) == {}
    back = clock.t
    frozen.reached(back)
    frozen.reached(back + 1.0)  # later beats do not move the start of the wait
    assert frozen.expire(back + LEASE) == {}
    assert frozen.expire(back + LEASE + 0.001) == {"j-w-0": "u0", "j-w-1": "u1"}
    assert frozen.expire(back + 2 * LEASE) == {} and not frozen.pods


def test_a_stopped_frozen_pod_leaves_the_freeze_and_a_new_cut_off_restarts_the_wait() -> None:
    clock, _, frozen = frozen_at_the_lease(LEASE + 1.0)
    assert frozen.release("j-w-0") and not frozen.release("j-w-0")
    frozen.reached(clock.t)
    frozen.freeze({"j-w-2": "u2"})  # cut off again before the wait ran out
    assert frozen.expire(clock.t + LEASE + 1.0) == {}
    frozen.reached(clock.t + 30.0)
    assert frozen.expire(clock.t + 30.0 + LEASE + 0.001) == {"j-w-1": "u1", "j-w-2": "u2"}


def test_a_beat_with_nothing_frozen_starts_no_wait() -> None:
    frozen = fencing.Frozen(LEASE)
    frozen.reached(1000.0)
    frozen.freeze({"j-w-0": "u0"})
    assert frozen.expire(1000.0 + LEASE + 1.0) == {}


def test_the_job_controller_is_asked_about_the_frozen_pods_once_per_cut_off_once_back() -> None:
    clock, _, frozen = frozen_at_the_lease(LEASE + 1.0)
    assert frozen.unasked() == {}  # still cut off: nobody to ask
    frozen.reached(clock.t)
    assert frozen.unasked() == {"j-w-0": "u0", "j-w-1": "u1"}
    frozen.told()
    assert frozen.unasked() == {}
    frozen.freeze({"j-w-2": "u2"})  # cut off again: told again once back, of this cut-off's pods
    frozen.reached(clock.t + 30.0)
    assert frozen.unasked() == {"j-w-0": "u0", "j-w-1": "u1", "j-w-2": "u2"}


def test_a_pod_stopped_before_the_agents_first_beat_back_is_told_as_frozen_too() -> None:
    """Back on the bus, the agent may read its job-controller's stops before a beat goes through:
    the freeze is still told (when those pods stopped making progress)."""
    clock, _, frozen = frozen_at_the_lease(LEASE + 1.0)
    assert frozen.release("j-w-0") and frozen.release("j-w-1") and not frozen.pods
    frozen.reached(clock.t)
    assert frozen.unasked() == {"j-w-0": "u0", "j-w-1": "u1"}
