"""A service's Prometheus metrics: the bus's, kept here for every service, and a registry that a
service adds its own to (``REGISTRY``; the status-aggregator's HyperJob metrics).

Names follow Prometheus' conventions (``_total`` counters, ``_seconds`` durations) and carry no
instance label: the scraper adds ``instance``/``job`` from its target, so one process exposes
only its own. Subjects label the bus series: a service consumes a bounded set of them (one per
kind of message and per cluster), never one per object.

What the bus series say, per subject a handler consumed:

- ``hyperjob_bus_messages_handled_total{subject,outcome}``: ``ok`` (committed or acked) or
  ``failed`` (the handler or its commit failed: the bus redelivers it or dead-letters it);
- ``hyperjob_bus_redeliveries_total{subject}``: deliveries after the first;
- ``hyperjob_bus_handler_duration_seconds{subject}``: one batch's handling, commit included,
  observed once per subject in the batch;
- ``hyperjob_round_duration_seconds{round}``: each round a service runs (``Runtime.every``): the
  cluster-scheduler's ``cycle`` is Volcano's session, scheduling and binding;
- ``hyperjob_bus_dead_letters{durable}``: letters waiting on ``dlq.<durable>``, and
  ``hyperjob_bus_consumer_pending{durable}``: messages not delivered yet (both read every
  ``DLQ_PERIOD``; absent when this service's user may not read them).

And ``hyperjob_instance_active``: 1 while this replica runs its instance (holds its lease), 0
while it waits as a standby (docs/scale-out.md).
"""

from __future__ import annotations

import time
from collections import Counter as Tally
from collections.abc import Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, disable_created_metrics

from hyperjob.bus import Delivery

from .timers import Work

__all__ = ["ACTIVE", "BUS", "REGISTRY", "BusMetrics", "LATENCY_BUCKETS"]

# No ``*_created`` series: when a series started is not worth doubling the page.
disable_created_metrics()  # type: ignore[no-untyped-call]
REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)  # process_cpu_seconds_total, process_resident_memory_bytes, ...
# Handler latency: a batch commits in a few ms; a scheduling session can take seconds.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
DLQ_PERIOD = 15.0


class BusMetrics:
    """The bus series of one process (``BUS``); ``registry`` lets tests keep their own."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.handled = Counter(
            "hyperjob_bus_messages_handled",
            "Messages handled by this service's consumers, by subject and outcome (ok, failed)",
            ["subject", "outcome"],
            registry=registry,
        )
        self.redeliveries = Counter(
            "hyperjob_bus_redeliveries",
            "Deliveries of a message after its first (a failed or timed-out handling before)",
            ["subject"],
            registry=registry,
        )
        self.latency = Histogram(
            "hyperjob_bus_handler_duration_seconds",
            "Time to handle one batch of messages, its commit included, by subject",
            ["subject"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.dead_letters = Gauge(
            "hyperjob_bus_dead_letters",
            "Dead letters of this service's durable consumers waiting on the DLQ stream",
            ["durable"],
            registry=registry,
        )
        self.rounds = Histogram(
            "hyperjob_round_duration_seconds",
            "Time one round of a service takes (the cluster-scheduler's cycle: a scheduling session and its binds)",
            ["round"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.pending = Gauge(
            "hyperjob_bus_consumer_pending",
            "Messages stored for a durable consumer of this service and not delivered to it yet",
            ["durable"],
            registry=registry,
        )

    def batch(
        self, deliveries: Sequence[Delivery], failures: Mapping[int, BaseException] | None, seconds: float
    ) -> None:
        """One handled batch: what each delivery became (``failures`` None: the whole batch
        failed), and how long its handling took."""
        outcomes: Tally[tuple[str, str]] = Tally()
        for i, delivery in enumerate(deliveries):
            outcomes[(delivery.subject, "failed" if failures is None or i in failures else "ok")] += 1
            if delivery.num_delivered > 1:
                self.redeliveries.labels(delivery.subject).inc()
        for (subject, outcome), count in outcomes.items():
            self.handled.labels(subject, outcome).inc(count)
        for subject in {d.subject for d in deliveries}:
            self.latency.labels(subject).observe(seconds)

    def timed(self, name: str, work: Work) -> Work:
        """``work`` (a round), its duration observed under ``name`` each time it runs."""

        async def run() -> None:
            started = time.perf_counter()
            try:
                await work()
            finally:
                self.rounds.labels(name).observe(time.perf_counter() - started)

        return run


BUS = BusMetrics(REGISTRY)
ACTIVE = Gauge(
    "hyperjob_instance_active",
    "1 while this replica runs its service instance (it holds the instance's lease), 0 while it waits",
    registry=REGISTRY,
)
