"""The fleet's side of fencing (issue 33): a lease to every cluster the fleet still hears.

Every ``LEASE_RENEW_PERIOD`` the global-scheduler grants each cluster a ``FleetLease`` until its
own time on its latest report that holds the lease plus ``fleet_lease`` (``records.Capacity.basis``:
a summary with a Ready node, or a live node's beat while the control plane does not report that
none is Ready, so a hung control plane whose nodes run keeps its lease). A cluster the fleet no
longer hears gets no newer lease, and its job-controller stops its children's pods once the last
one lapsed; the splitter moves a child only ``fleet_lease + LEASE_MARGIN`` after that report
(``fleetcore.move_after``): the old copy is stopped before the new one starts.
"""

from __future__ import annotations

from hyperjob import events, fleetcore
from hyperjob.events import subjects
from hyperjob.records.capacity import Capacity
from hyperjob.servicekit import Runtime

LEASE_RENEW_PERIOD = 1.0
# A grant goes out once the cluster's basis has moved this far since its last one (the SCHED stream
# keeps every grant for its retention: one per 2 s per cluster, not one a second). A cluster's
# lease then runs 18-20 s past its latest report: shorter, never longer, so the fence only comes
# sooner. The grants to the other clusters are how a job-controller knows the fleet still speaks:
# they come at least this often.
RENEW_STEP = 2.0


class LeaseGrants:
    def __init__(self, runtime: Runtime, capacity: Capacity, lease: float = fleetcore.FLEET_LEASE) -> None:
        fleetcore.move_after(lease, fleetcore.LEASE_MARGIN)  # refuses a lease the fleet's margin cannot cover
        self.rt = runtime
        self.capacity = capacity
        self.lease = lease
        self.sent: dict[str, float] = {}  # cluster -> the basis of its latest grant

    def on_heartbeat(self, msg: events.AgentHeartbeat) -> None:
        self.capacity.beat(msg, self.rt.now())

    async def grant(self) -> None:
        """A new lease to every cluster whose latest report is ``RENEW_STEP`` newer than its last grant's."""
        batch = []
        for cluster, basis in sorted(self.capacity.basis.items()):
            if basis - self.sent.get(cluster, -RENEW_STEP) < RENEW_STEP:
                continue
            envelope = self.rt.envelope(f"lease/{cluster}", f"{basis!r}")
            grant = events.FleetLease(**envelope, cluster=cluster, basis=basis, lease=self.lease)
            batch.append((cluster, basis, grant))
        if not batch:
            return
        await self.rt.bus.publish_many([(subjects.fleet_lease(c), g.event_id, events.encode(g)) for c, _, g in batch])
        for cluster, basis, _ in batch:
            self.sent[cluster] = basis
