"""Judging liveness on what the judge actually heard, and keeping failovers few and slow.

A judge (the splitter and the global-scheduler over clusters' capacity summaries, a
cluster-scheduler over its agents' beats) declares a source silent once it has heard nothing from
it for a timeout. Measured on the wall clock, that is wrong whenever the judge itself could not
hear: its bus connection was down, the bus restarted, or it was partitioned away. ``Hearing``
measures silence only over the time the judge was hearing *something*: when its stream of
reports resumes after a break, the break is taken off every source's silence (Kubernetes'
node-lifecycle controller does the same after its own outage: it does not evict nodes it merely
could not hear). A source that stays silent while the others speak is then judged as before.

``FailoverGate`` is the fleet's brake on moving children (Kubernetes' "full disruption" and
eviction rate limit): while more than half of the known clusters look lost at once the silence is
far likelier ours than theirs and nothing moves; otherwise moves are spent from a token bucket,
so a mass failover that does happen goes at a bounded rate. Pure, clock injected.

Fencing (issue 33): at most one copy of a child runs at any time. A cluster holds a *fleet lease*
of ``FLEET_LEASE`` seconds, renewed by each word of the fleet it can verify (the global-scheduler's
``FleetLease``, answering the cluster's own reports); its job-controller stops the pods of every
child it runs once the lease has lapsed. The fleet moves a child off a silent cluster only once that
lease has surely lapsed: ``FLEET_LEASE + LEASE_MARGIN`` after the last report it heard from the
cluster (``CLUSTER_SILENCE_TIMEOUT``). The margin covers the job-controller's lease check period,
the time its node-agents take to stop the pods, the clocks' skew between the fleet and the cluster,
and the lag between the fleet's judges (``move_after``).
"""

from __future__ import annotations

from collections.abc import Collection

FLEET_LEASE = 20.0
"""Seconds a cluster keeps running its children with no word from the fleet it can verify."""
LEASE_MARGIN = 10.0
"""Seconds the fleet waits beyond the lease before moving a child: the job-controller's lease check
(every ``LEASE_CHECK_PERIOD``), its node-agents stopping the pods (≤ 2 s), clock skew (≤ 2 s) and
the lag between the fleet's judges (≤ 4 s)."""
LEASE_CHECK_PERIOD = 2.0
"""How often a job-controller checks its fleet lease."""


def move_after(lease: float = FLEET_LEASE, margin: float = LEASE_MARGIN) -> float:
    """Seconds of silence after which a cluster's lease has surely lapsed and its children may move.

    The invariant it keeps: a child moves only after its old cluster stopped its pods. It holds when
    ``margin`` is at least the lease check period plus the time to stop pods plus clock skew plus
    the judges' lag; a margin below the check period could not hold it and is refused."""
    if lease <= 0 or margin < LEASE_CHECK_PERIOD:
        raise ValueError(
            f"fleet lease {lease:g}s with margin {margin:g}s: need lease > 0 and margin ≥ {LEASE_CHECK_PERIOD:g}s"
        )
    return lease + margin


class Hearing:
    """How long the judge could not hear anything: breaks longer than ``gap`` between two
    reports from any source are the judge's deafness, not the sources' silence."""

    def __init__(self, gap: float) -> None:
        self.gap = gap
        self.last: float | None = None

    def heard(self, at: float) -> float:
        """Something arrived at ``at``; returns how long the judge was deaf before it (0 when the
        break was short): the caller moves every source's last report that much later."""
        deaf = 0.0 if self.last is None or at - self.last <= self.gap else at - self.last
        self.last = at if self.last is None else max(self.last, at)
        return deaf


class BusWeather:
    """Whether the bus has been fair lately, read off the beats themselves, so that a node is judged
    lost only when it is silent while the bus is healthy.

    A beat carries when its sender stamped it; one that arrives ``late`` seconds or more later than
    that sender's beats usually take (its fastest, which absorbs a constant clock skew) was held up
    by the bus: a server lost, a stream leader being elected, a consumer behind. So was the judge's
    own deafness (``trouble``, from ``Hearing``). A node is lost after ``timeout`` seconds of silence
    on a fair bus, and after ``stormy`` seconds while the bus was troubled within the last
    ``stormy`` seconds: an agent whose server was lost is silent for as long as its client takes to
    reach another one, and the beats of the others come late meanwhile. A node that died in the
    storm is lost ``stormy`` seconds after its last beat at the latest."""

    def __init__(self, timeout: float, *, stormy: float | None = None, late: float | None = None) -> None:
        self.timeout = timeout
        self.stormy = stormy if stormy is not None else 3 * timeout
        self.late = late if late is not None else timeout / 4
        self.fastest: dict[str, float] = {}  # sender -> its smallest (arrival - stamp) seen
        self.troubled_at: float | None = None

    def beat(self, sender: str, stamped: float, arrived: float) -> None:
        """A beat ``sender`` stamped at ``stamped`` arrived at ``arrived`` (the judge's clock)."""
        took = arrived - stamped
        fastest = min(self.fastest.get(sender, took), took)
        self.fastest[sender] = fastest
        if took - fastest >= self.late:
            self.trouble(arrived)

    def trouble(self, at: float) -> None:
        """The bus was troubled at ``at`` (the judge could not hear, a beat came late)."""
        self.troubled_at = at if self.troubled_at is None else max(self.troubled_at, at)

    def limit(self, now: float) -> float:
        """Seconds of silence after which a node is lost, judged at ``now``."""
        if self.troubled_at is not None and now - self.troubled_at <= self.stormy:
            return self.stormy
        return self.timeout


def forgive(last_heard_from: float, deaf: float, now: float) -> float:
    """A source's last report once the judge's ``deaf`` seconds are not counted as its silence."""
    return min(last_heard_from + deaf, now)


class FailoverGate:
    """Whether children may move now, and how many: paused while most clusters look lost,
    rate-limited (``burst`` moves at once, then ``rate`` per second) otherwise."""

    def __init__(self, rate: float, burst: int, pause_share: float = 0.5) -> None:
        self.rate = rate
        self.burst = float(burst)
        self.pause_share = pause_share
        self.tokens = float(burst)
        self.at: float | None = None

    def paused(self, lost: Collection[str], known: Collection[str]) -> str:
        """Why failovers are paused now ('' when they are not)."""
        if len(known) > 1 and len(lost) > self.pause_share * len(known):
            return f"{len(lost)} of {len(known)} clusters silent at once: the silence is likelier the control plane's"
        return ""

    def take(self, now: float) -> bool:
        """Spend one move if the bucket holds one at ``now``."""
        if self.at is not None:
            self.tokens = min(self.burst, self.tokens + max(0.0, now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False
