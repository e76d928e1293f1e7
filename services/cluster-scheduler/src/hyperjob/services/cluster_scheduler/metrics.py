"""Volcano's scheduler metrics (``pkg/scheduler/metrics``), with Volcano's labels and buckets, on
the cluster-scheduler's ``/metrics``, under names ``promtool check metrics`` accepts: Volcano's own
where they are (``volcano_schedule_attempts_total``, ``volcano_pod_preemption_victims``), else a
``hyperjob_`` name in base units, from which ``deploy/prometheus/volcano.rules.yml`` records
Volcano's name (so Volcano's dashboards work on a Prometheus that loads it):

- ``hyperjob_e2e_scheduling_latency_seconds`` (Volcano's ``volcano_e2e_scheduling_latency_milliseconds``):
  one cycle, session and binding commit;
- ``hyperjob_e2e_job_scheduling_latency_seconds`` (``volcano_e2e_job_scheduling_latency_milliseconds``):
  a job's creation to its gang bound;
- ``volcano_schedule_attempts_total{result}``: pods a session tried to place, by result
  (``scheduled``; ``unschedulable``: no node for it this cycle; ``error``: the cycle failed);
- ``volcano_pod_preemption_victims``: victims the last session chose (preempt and reclaim), and
  ``volcano_total_preemption_attempts_total``: sessions that chose any;
- ``hyperjob_unschedulable_jobs`` (``volcano_unschedule_job_count``) and
  ``hyperjob_unschedulable_tasks{job_id}`` (``volcano_unschedule_task_count``; ``namespace/name``):
  jobs left unschedulable by the last session, and their pods still waiting.

The gauges describe the last session of each cluster this process schedules (one under
``hyperjob up``; the simulator runs several in one process, and their figures add up).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from hyperjob import schedcore
from hyperjob.servicekit.metrics import REGISTRY


def _exponential(start: float, factor: float, count: int) -> tuple[float, ...]:
    """Prometheus' ``ExponentialBuckets``, as Volcano declares them."""
    return tuple(start * factor**i for i in range(count))


# Volcano's buckets (5 ms doubling 15 times; 32 ms doubling 10 times), in seconds: each bound is
# Volcano's divided by 1000 exactly as written (doubling is exact), so the recording rules can
# name each bucket's `le` and give it Volcano's.
SCHEDULING_BUCKETS = _exponential(0.005, 2, 15)
JOB_SCHEDULING_BUCKETS = _exponential(0.032, 2, 10)
E2E_SCHEDULING_LATENCY = Histogram(
    "hyperjob_e2e_scheduling_latency_seconds",
    "E2e scheduling latency in seconds (scheduling algorithm + binding)",
    buckets=SCHEDULING_BUCKETS,
    registry=REGISTRY,
)
E2E_JOB_SCHEDULING_LATENCY = Histogram(
    "hyperjob_e2e_job_scheduling_latency_seconds",
    "E2e job scheduling latency in seconds",
    buckets=JOB_SCHEDULING_BUCKETS,
    registry=REGISTRY,
)
SCHEDULE_ATTEMPTS = Counter(
    "volcano_schedule_attempts",
    "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be scheduled,"
    " while 'error' means an internal scheduler problem.",
    ["result"],
    registry=REGISTRY,
)
PREEMPTION_ATTEMPTS = Counter(
    "volcano_total_preemption_attempts", "Total preemption attempts in the cluster till now", registry=REGISTRY
)


class LastSession:
    """Per cluster: the victims and the unschedulable jobs' waiting pods of its last session."""

    victims: dict[str, int] = {}
    waiting: dict[str, dict[str, int]] = {}  # cluster -> job id -> pods still waiting


def observe_session(
    cluster: str, decision: schedcore.Decision, waiting_pods: Mapping[str, int], seconds: float
) -> None:
    """One session's figures: ``waiting_pods`` is each job's pods it left unplaced (job id → count)."""
    E2E_SCHEDULING_LATENCY.observe(seconds)
    scheduled = len(decision.binds)
    if scheduled:
        SCHEDULE_ATTEMPTS.labels("scheduled").inc(scheduled)
    unschedulable = sum(waiting_pods.values())
    if unschedulable:
        SCHEDULE_ATTEMPTS.labels("unschedulable").inc(unschedulable)
    if decision.evictions:
        PREEMPTION_ATTEMPTS.inc()
    LastSession.victims[cluster] = len(decision.evictions)
    LastSession.waiting[cluster] = dict(waiting_pods)


def failed_session() -> None:
    SCHEDULE_ATTEMPTS.labels("error").inc()


class SessionGauges(Collector):
    def collect(self) -> Iterator[GaugeMetricFamily]:
        victims = GaugeMetricFamily("volcano_pod_preemption_victims", "Number of selected preemption victims")
        victims.add_metric([], sum(LastSession.victims.values()))
        jobs = GaugeMetricFamily("hyperjob_unschedulable_jobs", "Number of jobs could not be scheduled")
        jobs.add_metric([], sum(len(w) for w in LastSession.waiting.values()))
        tasks = GaugeMetricFamily(
            "hyperjob_unschedulable_tasks", "Number of tasks could not be scheduled", labels=["job_id"]
        )
        by_job: dict[str, int] = {}
        for waiting in LastSession.waiting.values():
            for job, count in waiting.items():
                by_job[job] = by_job.get(job, 0) + count
        for job, count in sorted(by_job.items()):
            tasks.add_metric([job], count)
        yield victims
        yield jobs
        yield tasks


REGISTRY.register(SessionGauges())
