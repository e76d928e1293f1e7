"""A service's Prometheus metrics: the bus's, kept here for every service, and a registry that a
service adds its own to (``REGISTRY``; the status-aggregator's HyperJob metrics).

Names follow Prometheus' conventions (``_total`` counters, ``_seconds`` durations) and carry no
instance label: the scraper adds ``instance``/``job`` from its target, so one process exposes
only its own. A per-cluster service (cluster-scheduler, job-controller, node-agent) puts its
``cluster`` on every series it exposes (``label_every_series``), so a panel grouped by cluster
works whatever scrapes it. Subjects label the bus series in their bounded form
(``subject_label``): the tokens that name an object (a request, a namespace, a job, a node) are
``*``, a cluster's name is kept; no label's values grow with the requests served.

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
from collections.abc import Iterator, Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, ProcessCollector, disable_created_metrics
from prometheus_client.metrics_core import Metric

from hyperjob.bus import Delivery

from .timers import Work

__all__ = [
    "ACTIVE",
    "BUS",
    "REGISTRY",
    "BusMetrics",
    "LATENCY_BUCKETS",
    "ServiceRegistry",
    "label_every_series",
    "subject_label",
]


class ServiceRegistry(CollectorRegistry):
    """The process's registry. ``constant`` labels go on every series it exposes (as Go's
    ``ConstLabels``), a label the series has itself left as it is."""

    def __init__(self) -> None:
        super().__init__(auto_describe=True)
        self.constant: dict[str, str] = {}

    def collect(self) -> Iterator[Metric]:
        for family in super().collect():
            if self.constant:  # each collect builds its families afresh: changing them is safe
                family.samples = [s._replace(labels={**self.constant, **s.labels}) for s in family.samples]
            yield family


# No ``*_created`` series: when a series started is not worth doubling the page.
disable_created_metrics()  # type: ignore[no-untyped-call]
REGISTRY = ServiceRegistry()
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
            subject = subject_label(delivery.subject)
            outcomes[(subject, "failed" if failures is None or i in failures else "ok")] += 1
            if delivery.num_delivered > 1:
                self.redeliveries.labels(subject).inc()
        for (subject, outcome), count in outcomes.items():
            self.handled.labels(subject, outcome).inc(count)
        for subject in {subject_label(d.subject) for d in deliveries}:
            self.latency.labels(subject).observe(seconds)

    def timed(self, name: str, work: Work) -> Work:
        """``work`` (a round), its duration observed under ``name`` each time it runs."""

        # The labelled series, looked up on the first run and kept: ``labels`` validates and locks
        # on every call, and rounds run every second of every instance.
        series: list[Histogram] = []

        async def run() -> None:
            started = time.perf_counter()
            try:
                await work()
            finally:
                if not series:
                    series.append(self.rounds.labels(name))
                series[0].observe(time.perf_counter() - started)

        return run


# The subject families whose tokens after the stem name objects, with how many of those tokens are
# a cluster's name (kept: a fleet has few clusters). The rest of the ``events.subjects`` families
# name a kind of message and at most a cluster already.
_OBJECT_TOKENS: tuple[tuple[str, int], ...] = (
    ("hj.result", 0),  # .<request id>
    ("hj.manifest.apply", 0),  # .<namespace>, as the other requests
    ("hj.object.delete", 0),
    ("hj.hyperjob.command", 0),
    ("hj.object.command", 0),
    ("cfg.queue", 0),  # .<queue>
    ("cfg.priorityclass", 0),
    ("jobstate", 1),  # .<cluster>.<job>.<part>
    ("nodestatus", 1),  # .<cluster>.<node>
    ("podaddr", 0),  # .<pod>
    ("heartbeat", 1),  # .<cluster>.<agent>
    ("telemetry.gpu", 1),  # .<cluster>.<node>
    ("telemetry.fabric", 1),
    ("state", 2),  # .<instance>.<kind>.<document>
    ("admin.command", 0),  # .<instance>
    ("admin.instance", 0),
)


def subject_label(subject: str) -> str:
    """The bounded form of a subject, as the bus series label it: each token that names an
    object is ``*`` (``hj.result.<uuid>`` → ``hj.result.*``, ``jobstate.c1.<job>.0`` →
    ``jobstate.c1.*.*``)."""
    for stem, kept in _OBJECT_TOKENS:
        if subject.startswith(stem + "."):
            rest = subject[len(stem) + 1 :].split(".")
            return ".".join([stem, *rest[:kept], *("*" for _ in rest[kept:])])
    return subject


def label_every_series(settings: object) -> None:
    """A per-cluster service's ``cluster`` (its settings name one) on every series of this
    process; called once, by the process that serves ``/metrics`` (not by the simulator, whose one
    process runs every cluster's services)."""
    cluster = getattr(settings, "cluster", "")
    if isinstance(cluster, str) and cluster:
        REGISTRY.constant = {"cluster": cluster}


BUS = BusMetrics(REGISTRY)
ACTIVE = Gauge(
    "hyperjob_instance_active",
    "1 while this replica runs its service instance (it holds the instance's lease), 0 while it waits",
    registry=REGISTRY,
)
