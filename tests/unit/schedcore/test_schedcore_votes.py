"""Volcano's votes (JobEnqueueable, JobPipelined) as statuses: SUCCESS permits, SKIP abstains,
any other code rejects (volcano-semantics.md, "How extension points combine across tiers")."""

from __future__ import annotations

import pytest

from hyperjob.schedcore.hooks import Dispatch
from hyperjob.schedcore.status import SKIP, SUCCESS, Code, Status, unresolvable, unschedulable
from hyperjob.schedcore.testing import job

FULL = unschedulable("queue q is full", "proportion")
BROKEN = unresolvable("broken", "other")


@pytest.mark.parametrize(
    ("votes", "expected", "asked"),
    [
        ([], SUCCESS, 0),
        ([(1, SKIP), (1, SKIP), (2, SKIP)], SUCCESS, 3),
        ([(1, SUCCESS), (1, FULL)], FULL, 2),
        ([(1, FULL), (1, SUCCESS)], FULL, 1),
        ([(1, SUCCESS), (2, FULL)], SUCCESS, 1),
        ([(1, SKIP), (2, FULL), (2, SUCCESS)], FULL, 2),
        ([(1, SKIP), (2, SUCCESS), (3, FULL)], SUCCESS, 2),
        ([(1, SKIP), (2, BROKEN)], BROKEN, 2),
    ],
    ids=[
        "no-voter-admits",
        "all-abstain-admits",
        "reject-beats-permit-in-its-tier",
        "reject-ends-at-once",
        "permit-tier-decides-later-tiers-unasked",
        "abstaining-tier-passes-on",
        "first-permitting-tier-decides",
        "any-other-code-rejects",
    ],
)
def test_vote_combines_statuses_by_tier(votes, expected, asked):
    calls: list[Status] = []

    def voter(status: Status):
        def vote(_job):
            calls.append(status)
            return status

        return vote

    got = Dispatch._vote([(tier, voter(status)) for tier, status in votes], job("j").build())
    assert got == expected
    assert len(calls) == asked


def test_a_rejection_keeps_its_reason_and_plugin():
    got = Dispatch._vote([(1, lambda _job: FULL)], job("j").build())
    assert (got.code, got.message, got.plugin) == (Code.UNSCHEDULABLE, "queue q is full", "proportion")
