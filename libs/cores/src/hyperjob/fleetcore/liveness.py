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
"""

from __future__ import annotations

from collections.abc import Collection


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
