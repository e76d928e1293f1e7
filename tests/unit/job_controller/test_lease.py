"""The job-controller's fleet lease rules (issue 33): when a cluster fences its children, and when not."""

from __future__ import annotations

from hyperjob import events
from hyperjob.services.job_controller import lease
from hyperjob.services.job_controller.lease import CheckClock, LeaseDoc


def grant(basis: float, length: float = 20.0) -> events.FleetLease:
    return events.FleetLease(event_id="g", occurred_at=basis, producer="t", cluster="c", basis=basis, lease=length)


def test_a_grant_runs_from_the_clusters_own_report() -> None:
    assert lease.lease_end(grant(10.0)) == 30.0
    assert lease.may_run(30.0, now=29.9) and not lease.may_run(30.0, now=30.0)


def test_a_lapsed_lease_fences_only_once_the_fleet_granted_others_a_while_and_the_check_ran_on_time() -> None:
    doc = LeaseDoc()
    assert not lease.must_fence(doc, 30.0, now=29.9, fleet_since=20.0, awake=True)  # still held
    assert lease.must_fence(doc, 30.0, now=32.0, fleet_since=30.5, awake=True)
    # The fleet granted no one since our lease ran out: it is down, nothing can move: no fence.
    assert not lease.must_fence(doc, 30.0, now=60.0, fleet_since=None, awake=True)
    # It granted another cluster a moment ago: ours may come in the same round (after an outage).
    assert not lease.must_fence(doc, 30.0, now=60.0, fleet_since=59.9, awake=True)
    # This process was stopped: it first reads the grants that waited for it.
    assert not lease.must_fence(doc, 30.0, now=60.0, fleet_since=40.0, awake=False)
    assert not lease.must_fence(LeaseDoc(fenced=True), 30.0, now=60.0, fleet_since=40.0, awake=True)


def test_a_cluster_never_granted_runs_what_it_is_given() -> None:
    assert lease.may_run(0.0, now=1000.0)
    assert not lease.must_fence(LeaseDoc(), 0.0, now=1000.0, fleet_since=900.0, awake=True)


def test_only_a_grant_that_holds_now_unfences() -> None:
    fenced = LeaseDoc(fenced=True, held=("j",), until=30.0)
    assert not lease.must_unfence(fenced, grant(15.0), now=40.0)  # an old grant read late
    assert lease.must_unfence(fenced, grant(35.0), now=40.0)
    assert not lease.must_unfence(LeaseDoc(), grant(35.0), now=40.0)  # nothing fenced


def test_a_check_after_a_gap_is_not_awake() -> None:
    clock = CheckClock(period=2.0)
    assert not clock.tick(0.0)  # the first check after a start
    assert clock.tick(2.0) and clock.tick(6.0)
    assert not clock.tick(50.0)  # stopped 44 s
    assert clock.tick(52.0)


def test_a_grant_read_in_order_after_our_lease_lapsed_unread_confirms_the_pods_to_the_agents() -> None:
    """The agents may have frozen their pods at the lease (node_agent.fencing): a grant that holds
    now, read after every removal before it, tells them which run on."""
    assert lease.must_confirm(30.0, grant(35.0), now=40.0)  # lapsed at 30, renewed
    assert not lease.must_confirm(30.0, grant(15.0), now=40.0)  # an old grant read late: not now
    assert not lease.must_confirm(50.0, grant(35.0), now=40.0)  # never lapsed: nothing to confirm
    assert not lease.must_confirm(0.0, grant(35.0), now=40.0)  # none read since a start: no cut-off


def test_an_agent_asking_about_its_frozen_pods_is_answered_only_under_a_lease_read_in_order_that_holds() -> None:
    """It was cut off, maybe alone (with its cluster-scheduler) while this job-controller kept the
    lease: no renewal would confirm its pods, so it asks."""
    assert lease.may_confirm_asked(LeaseDoc(), ordered_until=50.0, now=40.0)
    assert not lease.may_confirm_asked(LeaseDoc(), ordered_until=30.0, now=40.0)  # lapsed: the fleet may move them
    assert not lease.may_confirm_asked(LeaseDoc(), ordered_until=0.0, now=40.0)  # none read in order since a start
    assert not lease.may_confirm_asked(LeaseDoc(fenced=True, until=30.0), ordered_until=50.0, now=40.0)
