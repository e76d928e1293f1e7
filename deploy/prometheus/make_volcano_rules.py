#!/usr/bin/env python3
"""Writes deploy/prometheus/volcano.rules.yml, the recording rules that give Volcano's metric names
to what the services export under names ``promtool check metrics`` accepts:
``.venv/bin/python deploy/prometheus/make_volcano_rules.py``. Edit the rules here, not the YAML
(tests/unit/deploy checks that the YAML is this script's output, that promtool finds it sound and
that volcano.test.yml's recorded series are Volcano's).

Volcano exports two histograms in milliseconds and four gauges whose names end in ``_count``, as a
histogram's count does; promtool refuses both. The services export them in seconds and under
``hyperjob_`` names (``cluster_scheduler.metrics``, ``dashboard.metrics``); these rules record
Volcano's series from them, so that Volcano's own dashboards and alerts work on a Prometheus that
loads this file (docker-compose.yml's does). A histogram's buckets are Volcano's: each ``le`` in
seconds is given Volcano's bound in milliseconds.
"""

from pathlib import Path

from hyperjob.services.cluster_scheduler.metrics import JOB_SCHEDULING_BUCKETS, SCHEDULING_BUCKETS

OUT = Path(__file__).parent / "volcano.rules.yml"
HISTOGRAMS = (
    ("volcano_e2e_scheduling_latency_milliseconds", "hyperjob_e2e_scheduling_latency_seconds", SCHEDULING_BUCKETS),
    (
        "volcano_e2e_job_scheduling_latency_milliseconds",
        "hyperjob_e2e_job_scheduling_latency_seconds",
        JOB_SCHEDULING_BUCKETS,
    ),
)
GAUGES = (
    ("volcano_unschedule_job_count", "hyperjob_unschedulable_jobs"),
    ("volcano_unschedule_task_count", "hyperjob_unschedulable_tasks"),
    *(
        (f"volcano_queue_pod_group_{phase}_count", f'sum without (phase) (hyperjob_queue_podgroups{{phase="{phase}"}})')
        for phase in ("inqueue", "pending", "running")
    ),
)


def histogram(volcano: str, exported: str, buckets: tuple[float, ...]) -> list[tuple[str, str]]:
    """Volcano's ``_bucket``, ``_sum`` and ``_count`` in milliseconds from ``exported`` in seconds.
    ``le`` is matched as the exporter writes it (Python's shortest float, as Prometheus keeps it)."""
    terms = [
        f'label_replace({exported}_bucket{{le="{le!r}"}}, "le", "{round(le * 1000, 6)!r}", "", "")' for le in buckets
    ]
    return [
        (f"{volcano}_bucket", "\n  or ".join([*terms, f'{exported}_bucket{{le="+Inf"}}'])),
        (f"{volcano}_sum", f"{exported}_sum * 1000"),
        (f"{volcano}_count", f"{exported}_count"),
    ]


def render() -> str:
    rules = [rule for volcano, exported, buckets in HISTOGRAMS for rule in histogram(volcano, exported, buckets)]
    rules += list(GAUGES)
    lines = [
        "# Written by make_volcano_rules.py (edit it, not this file): Volcano's metric names, recorded from",
        "# the lint-clean names the services export.",
        "groups:",
        "  - name: volcano-names",
        "    rules:",
    ]
    for record, expr in rules:
        lines += [f"      - record: {record}", "        expr: >-"]
        lines += [f"          {line.strip()}" for line in expr.splitlines()]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    OUT.write_text(render())
