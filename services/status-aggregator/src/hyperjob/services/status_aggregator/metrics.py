"""The HyperJob metrics, derived from the news the aggregator folds (on its ``/metrics``).

Gauges are read from the aggregator's tables at scrape time (so a reload or a restart never leaves
them stale); counters and the latency histogram change only once a unit of work committed
(``Reaction.after``), so a batch handled again after a refused commit is not counted twice.

- ``hyperjob_hyperjobs{namespace,phase}``: HyperJobs by namespace and phase (Pending, Admitted,
  Running, ...);
- ``hyperjob_pending_hyperjobs{namespace,reason}``: HyperJobs not running yet with a waiting reason, by its
  code (``domain.waiting_reason_code``: QueueLimit, Inadmissible, Unschedulable, GangNotHeld,
  NodeFault, ClusterLost, ...), as the status shows it (a waiting child's podgroup message when
  nothing above the clusters holds it back);
- ``hyperjob_submit_to_running_seconds``: from acceptance to the first Running phase;
- ``hyperjob_admissions_total``: HyperJobs their queues admitted;
- ``hyperjob_failovers_total{from_cluster,to_cluster}``: children the plan moved between clusters;
- ``hyperjob_gang_reservations_total{cluster,outcome}``: cross-cluster gang members held or lost by
  a cluster, attempts released (``sched.reservation.held``, ``sched.gang.retry``);
- ``hyperjob_child_job_phase_transitions_total{cluster,phase}``: child Volcano Jobs entering a
  phase (the rate of ``phase="Running"`` is the fleet's scheduling throughput, per cluster).
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Protocol

from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from hyperjob import api
from hyperjob.servicekit.metrics import REGISTRY

from . import domain

if TYPE_CHECKING:
    from .handlers import StatusAggregator


class Statuses(Protocol):
    """The aggregated statuses by HyperJob name (the aggregator's table, or a dict)."""

    def get(self, name: str, /) -> domain.AggregateDoc | None: ...


# Submit→Running: seconds for a small job on an idle fleet, hours behind a full queue.
LATENCY_BUCKETS = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 4 * 3600.0)

SUBMIT_TO_RUNNING = Histogram(
    "hyperjob_submit_to_running_seconds",
    "Seconds from a HyperJob's acceptance to its first Running phase",
    buckets=LATENCY_BUCKETS,
    registry=REGISTRY,
)
ADMISSIONS = Counter("hyperjob_admissions", "HyperJobs admitted by their queues", registry=REGISTRY)
FAILOVERS = Counter(
    "hyperjob_failovers",
    "Child jobs the plan moved from one cluster to another",
    ["from_cluster", "to_cluster"],
    registry=REGISTRY,
)
GANG_RESERVATIONS = Counter(
    "hyperjob_gang_reservations",
    "Cross-cluster gang reservations by outcome: a cluster held a member (held) or lost it (lost); an attempt"
    " released because not every member held in time (released, no cluster)",
    ["cluster", "outcome"],
    registry=REGISTRY,
)
CHILD_PHASES = Counter(
    "hyperjob_child_job_phase_transitions",
    "Child Volcano Jobs entering a phase, by cluster",
    ["cluster", "phase"],
    registry=REGISTRY,
)


class Tables:
    """What the gauges read: the aggregator of this process (the last one built)."""

    aggregator: StatusAggregator | None = None


class HyperJobGauges(Collector):
    def collect(self) -> Iterator[GaugeMetricFamily]:
        aggregator = Tables.aggregator
        # Namespaces are few (an administrator makes them, as identities), so they bound the series.
        phases = GaugeMetricFamily(
            "hyperjob_hyperjobs", "HyperJobs by namespace and phase", labels=["namespace", "phase"]
        )
        pending = GaugeMetricFamily(
            "hyperjob_pending_hyperjobs",
            "HyperJobs waiting to run, by namespace and waiting reason",
            labels=["namespace", "reason"],
        )
        if aggregator is not None:
            by_phase, by_reason = census(aggregator.specs.items(), aggregator.statuses)
            for labels, count in sorted(by_phase.items()):
                phases.add_metric(list(labels), count)
            for labels, count in sorted(by_reason.items()):
                pending.add_metric(list(labels), count)
        yield phases
        yield pending


def census(
    specs: Iterable[tuple[str, domain.SpecDoc]], statuses: Statuses
) -> tuple[Tally[tuple[str, str]], Tally[tuple[str, str]]]:
    """HyperJobs by (namespace, phase), and those waiting (Pending or Admitted) by (namespace,
    reason code)."""
    by_phase: Tally[tuple[str, str]] = Tally()
    by_reason: Tally[tuple[str, str]] = Tally()
    for key, spec in specs:
        namespace, _ = api.split_key(key)
        doc = statuses.get(key)
        phase = doc.phase if doc is not None else "Pending"
        by_phase[namespace, phase] += 1
        reason = spec.waiting_reason or (_shown_reason(doc) if doc is not None else "")
        if phase in ("Pending", "Admitted") and reason:
            by_reason[namespace, domain.waiting_reason_code(reason)] += 1
    return by_phase, by_reason


def _shown_reason(doc: domain.AggregateDoc) -> str:
    """The reason its status shows (a waiting child's, when the scheduler gave none), else the
    scheduler's."""
    shown = doc.status.get("waitingReason", "") if isinstance(doc.status, dict) else ""
    return str(shown) or doc.waiting_reason


REGISTRY.register(HyperJobGauges())
