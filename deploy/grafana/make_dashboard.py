#!/usr/bin/env python3
# ruff: noqa: E501 - PromQL and panel descriptions read better unbroken
"""Writes deploy/grafana/dashboards/hyperjob.json, the dashboard docker-compose.yml's Grafana loads:
``python deploy/grafana/make_dashboard.py``. Edit the panels here, not the JSON
(tests/unit/deploy checks that the JSON is this script's output and that every metric it plots is
exported by the code).
"""

import json
import re
from pathlib import Path

OUT = Path(__file__).parent / "dashboards" / "hyperjob.json"
panels = []
# Every panel reads the data source the $datasource variable names (the provisioned one by default).
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
# Metrics whose series carry a `cluster` label (every series of a per-cluster service, the fleet's
# per-cluster families): their panels follow the $cluster variable. Global services' series have
# none, and `=~".*"` (All) keeps them.
CLUSTER_SCOPED = re.compile(
    r"\b((?:volcano_(?!queue_capacity)|hyperjob_(?:cluster|node|bus|round|child_job|gang))[a-z_]*)(\{)?"
)
# Metrics with Volcano's `queue_name` label: their panels follow the $queue variable.
QUEUE_SCOPED = re.compile(r"\b(volcano_queue_[a-z_]*|hyperjob_queue_podgroups)(\{)?")
# The HyperJob census, by `namespace`: its panels follow the $namespace variable.
NAMESPACE_SCOPED = re.compile(r"\b(hyperjob_(?:pending_)?hyperjobs)\b(\{)?")


def scoped(expr: str) -> str:
    """``expr`` with the dashboard's variables as label matchers on the metrics that carry them."""
    for pattern, matcher in (
        (CLUSTER_SCOPED, 'cluster=~"$cluster"'),
        (QUEUE_SCOPED, 'queue_name=~"$queue"'),
        (NAMESPACE_SCOPED, 'namespace=~"$namespace"'),
    ):
        expr = pattern.sub(lambda m, matcher=matcher: f"{m[1]}{{{matcher}" + ("," if m[2] else "}"), expr)
    return expr


def variable(name, label, query):
    """A multi-value query variable over the $datasource, All (any value, or none) by default."""
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": DATASOURCE,
        "definition": query,
        "query": {"query": query, "refId": name},
        "refresh": 2,
        "multi": True,
        "includeAll": True,
        "allValue": ".*",
        "current": {"text": "All", "value": "$__all"},
        "sort": 1,
    }


TEMPLATING = [
    {
        "name": "datasource",
        "label": "Data source",
        "type": "datasource",
        "query": "prometheus",
        "current": {"text": "Prometheus", "value": "prometheus"},
    },
    variable("cluster", "Cluster", "label_values(hyperjob_cluster_nodes, cluster)"),
    variable("queue", "Queue", "label_values(volcano_queue_allocated_milli_cpu, queue_name)"),
    variable("namespace", "Namespace", "label_values(hyperjob_hyperjobs, namespace)"),
]


def panel(title, exprs, x, y, w=12, h=8, kind="timeseries", unit=None, stack=False, desc=""):
    p = {
        "id": len(panels) + 1,
        "type": kind,
        "title": title,
        "description": desc,
        "datasource": DATASOURCE,
        "gridPos": {"x": x, "y": y, "w": w, "h": h},
        "targets": [
            {
                "refId": chr(65 + i),
                "expr": scoped(e),
                "legendFormat": legend,
                "datasource": DATASOURCE,
            }
            for i, (e, legend) in enumerate(exprs)
        ],
        "fieldConfig": {"defaults": {"unit": unit or "short"}, "overrides": []},
        "options": {"legend": {"displayMode": "table", "placement": "right", "calcs": ["lastNotNull"]}},
    }
    if stack:
        p["fieldConfig"]["defaults"]["custom"] = {"stacking": {"mode": "normal"}, "fillOpacity": 30}
    panels.append(p)


def row(title, y):
    panels.append(
        {
            "id": len(panels) + 1,
            "type": "row",
            "title": title,
            "collapsed": False,
            "gridPos": {"x": 0, "y": y, "w": 24, "h": 1},
            "panels": [],
        }
    )


row("HyperJobs", 0)
panel(
    "HyperJobs by phase",
    [("sum by (phase) (hyperjob_hyperjobs)", "{{phase}}")],
    0,
    1,
    stack=True,
    desc="status-aggregator: every HyperJob it knows, by its aggregated phase",
)
panel(
    "Waiting HyperJobs by reason",
    [("sum by (reason) (hyperjob_pending_hyperjobs)", "{{reason}}")],
    12,
    1,
    stack=True,
    desc="Pending or Admitted HyperJobs with a waiting reason (QueueLimit, Unschedulable, GangNotHeld, ClusterLost, ...)",
)
panel(
    "Submit → Running latency",
    [
        (
            "histogram_quantile(0.5, sum by (le) (rate(hyperjob_submit_to_running_seconds_bucket[$__rate_interval])))",
            "p50",
        ),
        (
            "histogram_quantile(0.95, sum by (le) (rate(hyperjob_submit_to_running_seconds_bucket[$__rate_interval])))",
            "p95",
        ),
        (
            "histogram_quantile(0.99, sum by (le) (rate(hyperjob_submit_to_running_seconds_bucket[$__rate_interval])))",
            "p99",
        ),
    ],
    0,
    9,
    unit="s",
    desc="From the splitter's acceptance to the first Running phase",
)
panel(
    "Admissions, failovers, gang reservations",
    [
        ("sum(rate(hyperjob_admissions_total[$__rate_interval]))", "admitted/s"),
        (
            "sum by (from_cluster, to_cluster) (rate(hyperjob_failovers_total[$__rate_interval]))",
            "failover {{from_cluster}} → {{to_cluster}}",
        ),
        (
            "sum by (outcome) (rate(hyperjob_gang_reservations_total[$__rate_interval]))",
            "gang {{outcome}}",
        ),
    ],
    12,
    9,
    unit="ops",
)
row("Queues", 17)
panel(
    "GPUs allocated per queue and cluster",
    [
        (
            'sum by (queue_name, cluster) (volcano_queue_allocated_scalar_resources{resource="nvidia.com/gpu"})',
            "{{queue_name}} @ {{cluster}}",
        ),
        (
            'sum by (queue_name, cluster) (volcano_queue_deserved_scalar_resources{resource="nvidia.com/gpu"})',
            "deserved {{queue_name}} @ {{cluster}}",
        ),
    ],
    0,
    18,
    desc="As each cluster's last scheduling session saw them (Volcano's queue metrics, per cluster)",
)
panel(
    "Queue usage fleet-wide",
    [
        (
            'sum by (queue_name) (volcano_queue_allocated_scalar_resources{resource="nvidia.com/gpu"})',
            "GPUs {{queue_name}}",
        ),
        (
            'max by (queue_name) (volcano_queue_capacity_scalar_resources{resource="nvidia.com/gpu"})',
            "GPU capability {{queue_name}}",
        ),
        ("sum by (queue_name) (volcano_queue_allocated_milli_cpu) / 1000", "CPUs {{queue_name}}"),
    ],
    12,
    18,
)
panel(
    "PodGroups per queue",
    [
        ("sum by (queue_name, phase) (hyperjob_queue_podgroups)", "{{phase}} {{queue_name}}"),
    ],
    0,
    26,
)
panel(
    "Scheduling throughput",
    [
        (
            'sum by (cluster) (rate(hyperjob_child_job_phase_transitions_total{phase="Running"}[$__rate_interval]))',
            "jobs running/s {{cluster}}",
        ),
        (
            'sum by (cluster) (rate(hyperjob_child_job_phase_transitions_total{phase=~"Completed|Failed"}[$__rate_interval]))',
            "jobs finished/s {{cluster}}",
        ),
    ],
    12,
    26,
    unit="ops",
    desc="Child Volcano Jobs entering Running (scheduled and started) per cluster",
)
panel(
    "Scheduling cycle latency (p95) per cluster",
    [
        (
            'histogram_quantile(0.95, sum by (le, cluster) (rate(hyperjob_round_duration_seconds_bucket{round="cycle"}[$__rate_interval])))',
            "{{cluster}}",
        ),
    ],
    0,
    34,
    w=24,
    unit="s",
    desc="The cluster-scheduler's cycle: one Volcano session (allocate, backfill, preempt, reclaim) and its binds",
)
row("Bus", 42)
panel(
    "Messages handled",
    [
        (
            'sum by (instance) (rate(hyperjob_bus_messages_handled_total{outcome="ok"}[$__rate_interval]))',
            "{{instance}}",
        ),
        (
            'sum by (instance) (rate(hyperjob_bus_messages_handled_total{outcome="failed"}[$__rate_interval]))',
            "failed {{instance}}",
        ),
        ("sum by (instance) (rate(hyperjob_bus_redeliveries_total[$__rate_interval]))", "redelivered {{instance}}"),
    ],
    0,
    43,
    unit="ops",
)
panel(
    "Handler latency p95 by subject",
    [
        (
            "histogram_quantile(0.95, sum by (le, subject) (rate(hyperjob_bus_handler_duration_seconds_bucket[$__rate_interval])))",
            "{{subject}}",
        ),
    ],
    12,
    43,
    unit="s",
)
panel(
    "Dead letters and consumer lag",
    [
        ("sum by (durable) (hyperjob_bus_dead_letters)", "dlq {{durable}}"),
        ("sum by (durable) (hyperjob_bus_consumer_pending)", "pending {{durable}}"),
    ],
    0,
    51,
)
panel("Services up", [('up{job=~"hyperjob.*"}', "{{instance}}")], 12, 51, kind="state-timeline")
row("Clusters and GPUs", 59)
panel(
    "Nodes: ready, GPU and fabric healthy",
    [
        ("hyperjob_cluster_nodes", "nodes {{cluster}}"),
        ("hyperjob_cluster_ready_nodes", "ready {{cluster}}"),
        ("hyperjob_cluster_gpu_healthy_nodes", "GPU healthy {{cluster}}"),
        ("hyperjob_cluster_fabric_healthy_nodes", "fabric healthy {{cluster}}"),
    ],
    0,
    60,
)
panel(
    "GPUs free of allocatable",
    [
        ('hyperjob_cluster_free{resource="nvidia.com/gpu"}', "free {{cluster}}"),
        ('hyperjob_cluster_allocatable{resource="nvidia.com/gpu"}', "allocatable {{cluster}}"),
    ],
    12,
    60,
)
panel("Nodes with sick GPUs", [("hyperjob_node_gpu_healthy == 0", "{{cluster}}/{{node}}")], 0, 68, w=24, kind="table")

dash = {
    "uid": "hyperjob",
    "title": "HyperJob",
    "tags": ["hyperjob", "volcano"],
    "timezone": "browser",
    "schemaVersion": 41,
    "version": 1,
    "refresh": "15s",
    "time": {"from": "now-1h", "to": "now"},
    "editable": False,
    "panels": panels,
    "templating": {"list": TEMPLATING},
    "annotations": {"list": []},
    "description": "HyperJobs by phase and why they wait, submit→Running latency, queue usage per cluster and fleet-wide, scheduling throughput, bus health and GPU health (docker-compose.yml; metrics from every service's /metrics and the dashboard's fleet /metrics)",
}


def render() -> str:
    return json.dumps(dash, indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    OUT.write_text(render())
