"""The cluster's side of fencing (issue 33): run the fleet's children only while the fleet holds them.

The global-scheduler grants this cluster a lease (``FleetLease``: until ``basis + lease`` by the
cluster's own clock, ``basis`` being the cluster's time on its latest report the fleet heard). Once
the lease has lapsed while the fleet still speaks (it granted some cluster a lease after ours ran
out: it is alive, and no longer holds our children here), the job-controller stops the pods of
every child it runs and holds back any pod bound meanwhile (``fence``); the fleet moves a child
only ``LEASE_MARGIN`` after the lease lapsed (``fleetcore.liveness``), so at most one copy runs.
A renewed lease starts them again where they are (``unfence``); a child the fleet moved meanwhile
was removed first (its ``RemoveChild`` comes before the new lease, in the same stream).
A grant read in order after our lease had lapsed unread (the bus or the whole cluster cut off:
this job-controller fenced nothing) confirms the pods still ours to the node-agents
(``must_confirm``, a ``StartPods`` with ``resume_only``): those they froze meanwhile run on. An
agent cut off alone asks itself (``PodsFrozen``), answered the same way (``may_confirm_asked``).

The invariant enforced here: with a lapsed lease, no pod of this cluster's children runs.

What the job-controller cannot fence: itself hung (SIGSTOP), or cut off from the bus together with
its nodes (it can tell them nothing). The fleet does not move the children of a hung control plane
whose nodes still report (``fleetcore.control_plane_hung``); a cluster cut off whole is fenced by
its node-agents themselves (``node_agent.fencing``, docs/reliability.md). A fleet that grants no
one (the global-scheduler down, the bus down) is no reason to stop anything: nothing can move
then. Pure; the driver is ``handlers.JobController``.
"""

from __future__ import annotations

import msgspec

from hyperjob import events, fleetcore

FENCE_REASON = "FleetLeaseLapsed"


class LeaseDoc(msgspec.Struct, frozen=True, kw_only=True):
    """Stored only when it changes (not on every grant): while the lease has lapsed (``fenced``),
    the children whose pods were stopped or held back (``held``); ``until``: the lease that lapsed.
    The lease itself lives in memory: after a restart the watch gives back the newest grant."""

    fenced: bool = False
    held: tuple[str, ...] = ()
    until: float = 0.0


def lease_end(grant: events.FleetLease) -> float:
    """Until when a grant lets this cluster run its children (its own clock)."""
    return grant.basis + grant.lease


def may_run(until: float, now: float) -> bool:
    """Whether the lease holds at ``now`` (never granted yet, 0: a new cluster runs what it is given)."""
    return until == 0.0 or now < until


FLEET_SPOKE_GRACE = 1.0
"""How long the fleet must have granted others, and not us, since our lease lapsed: one grant round
sends every cluster's lease at once, so a grant to another cluster read just before ours (after an
outage of the fleet) is no sign that the fleet has let us go."""


def must_fence(doc: LeaseDoc, until: float, now: float, fleet_since: float | None, awake: bool) -> bool:
    """Fence now: the lease lapsed, the fleet has granted other clusters (and not us) since then
    for ``FLEET_SPOKE_GRACE`` (``fleet_since``: its first grant to another after our lapse), and this
    job-controller was awake for the whole check period (after a pause of its own, it first reads
    the grants that waited for it)."""
    spoke = fleet_since is not None and now - fleet_since >= FLEET_SPOKE_GRACE
    return not doc.fenced and not may_run(until, now) and spoke and awake


def must_unfence(doc: LeaseDoc, grant: events.FleetLease, now: float) -> bool:
    """A grant read in order (after any removal that came before it) that holds now ends the fence."""
    return doc.fenced and may_run(lease_end(grant), now)


def must_confirm(ordered_until: float, grant: events.FleetLease, now: float) -> bool:
    """Confirm our pods to the node-agents: a grant read in order holds now, and the lease read in
    order before it had lapsed. The agents may have been cut off longer than the lease too and
    frozen their pods (``node_agent.fencing``); every removal the fleet made before this grant was
    read first, so what is still ours runs on. Not after a start (none read yet, 0): that is no
    sign of a cut-off, and every pod would be sent again."""
    lapsed = ordered_until != 0.0 and not may_run(ordered_until, now)
    return lapsed and may_run(lease_end(grant), now)


def may_confirm_asked(doc: LeaseDoc, ordered_until: float, now: float) -> bool:
    """Answer a node-agent that asks about the pods it froze (``PodsFrozen``: it was cut off, maybe
    alone, while this job-controller kept its lease): only under a grant read in order that holds
    now, so every removal the fleet made before it was read and the fleet has not let this cluster
    go. Not while fenced (the unfence starts what is ours) nor before any grant was read in order
    (after a start, removals may still wait in the consumer): then the agent kills them, or the
    lease's own confirmation resumes them."""
    return not doc.fenced and ordered_until != 0.0 and may_run(ordered_until, now)


class CheckClock:
    """Whether the lease check ran without a gap: a check that comes more than two periods after
    the previous one (this process was stopped or starved) does not fence; the next one may."""

    def __init__(self, period: float = fleetcore.LEASE_CHECK_PERIOD) -> None:
        self.period = period
        self.last: float | None = None

    def tick(self, now: float) -> bool:
        awake = self.last is not None and now - self.last <= 2 * self.period
        self.last = now
        return awake
