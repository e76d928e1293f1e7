"""The fleet's metrics on the dashboard's ``/metrics``: what the system's records say of queues,
clusters and nodes, read through the same views ``get`` uses at each scrape.

The services export what they do (``servicekit.metrics``: the bus; the status-aggregator: the
HyperJobs); this is the state no single service owns whole. Volcano's names where Volcano has one
that ``promtool check metrics`` accepts (``volcano_queue_*``, with Volcano's ``queue_name`` label,
plus ``cluster``: a queue spans every cluster; ``sum without (cluster)`` is the fleet's),
``hyperjob_*`` otherwise:

- ``volcano_queue_{allocated,deserved}_{milli_cpu,memory_bytes}``, ``..._scalar_resources{resource}``
  per cluster as its last scheduling session saw them; ``volcano_queue_capacity_*`` (fleet-wide);
- ``hyperjob_queue_podgroups{queue_name,phase}`` (``inqueue``, ``pending``, ``running``): Volcano's
  ``volcano_queue_pod_group_<phase>_count`` are gauges named like a histogram's count, which
  promtool refuses; ``deploy/prometheus/volcano.rules.yml`` records them from this one;
- ``hyperjob_cluster_{allocatable,free}{cluster,resource}``, ``hyperjob_cluster_nodes{cluster}``,
  ``hyperjob_cluster_ready_nodes``, ``hyperjob_cluster_gpu_healthy_nodes``,
  ``hyperjob_cluster_fabric_healthy_nodes``, ``hyperjob_cluster_report_age_seconds``;
- ``hyperjob_node_ready{cluster,node}``, ``hyperjob_node_gpu_healthy``, ``hyperjob_node_fabric_healthy``.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from hyperjob.api.quantity import parse_quantity
from hyperjob.client import Client, views

GaugeRows = list[tuple[list[str], float]]
# The phases a queue counts its podgroups in, as Volcano's queue metrics do.
QUEUE_PODGROUP_PHASES = ("inqueue", "pending", "running")


async def exposition(client: Client) -> bytes:
    """The fleet's metrics in Prometheus' text format, read now."""
    families = queue_families(await views.queues(client, None))
    families += cluster_families(await views.clusters(client, None), await views.nodes(client, None))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Families(families))
    return generate_latest(registry)


class _Families(Collector):
    def __init__(self, families: list[GaugeMetricFamily]) -> None:
        self.families = families

    def collect(self) -> list[GaugeMetricFamily]:
        return self.families


def queue_families(queues: list[dict[str, Any]]) -> list[GaugeMetricFamily]:
    families = []
    for what in ("allocated", "deserved"):
        rows: dict[str, GaugeRows] = {unit: [] for unit in ("milli_cpu", "memory_bytes", "scalar_resources")}
        for queue in queues:
            for cluster, usage in sorted(queue["usage"].items()):
                _resources(rows, [queue["name"], cluster], usage.get(what, {}))
        families += _volcano(f"queue_{what}", f"{what.capitalize()} resources of one queue", rows, ["cluster"])
    capacity: dict[str, GaugeRows] = {unit: [] for unit in ("milli_cpu", "memory_bytes", "scalar_resources")}
    for queue in queues:
        limits = {k: parse_quantity(v) for k, v in (queue["spec"].get("capability") or {}).items()}
        _resources(capacity, [queue["name"]], limits)
    families += _volcano("queue_capacity", "Capability of one queue (fleet-wide)", capacity, [])
    podgroups = GaugeMetricFamily(
        "hyperjob_queue_podgroups", "PodGroups of one queue in a phase", labels=["queue_name", "phase"]
    )
    for queue in queues:
        for phase in QUEUE_PODGROUP_PHASES:
            podgroups.add_metric([queue["name"], phase], queue["podgroups"][phase])
    families.append(podgroups)
    return families


def _resources(rows: dict[str, GaugeRows], labels: list[str], amounts: dict[str, float]) -> None:
    """Volcano's split: CPU in millicores, memory in bytes, every other resource by its name."""
    for resource, amount in sorted(amounts.items()):
        if resource == "cpu":
            rows["milli_cpu"].append((labels, amount * 1000))
        elif resource == "memory":
            rows["memory_bytes"].append((labels, amount))
        else:
            rows["scalar_resources"].append(([*labels, resource], amount))


def _volcano(stem: str, text: str, rows: dict[str, GaugeRows], extra: list[str]) -> list[GaugeMetricFamily]:
    families = []
    for unit, values in rows.items():
        labels = ["queue_name", *extra] + (["resource"] if unit == "scalar_resources" else [])
        family = GaugeMetricFamily(f"volcano_{stem}_{unit}", text, labels=labels)
        for label_values, value in values:
            family.add_metric(label_values, value)
        families.append(family)
    return families


def cluster_families(clusters: list[dict[str, Any]], nodes: list[dict[str, Any]]) -> list[GaugeMetricFamily]:
    families = []
    for what in ("allocatable", "free"):
        family = GaugeMetricFamily(
            f"hyperjob_cluster_{what}", f"A cluster's {what} resources", labels=["cluster", "resource"]
        )
        for cluster in clusters:
            for resource, amount in sorted(cluster[what].items()):
                family.add_metric([cluster["name"], resource], amount)
        families.append(family)
    counts = {
        "nodes": "Nodes of a cluster",
        "ready_nodes": "Ready nodes of a cluster",
        "gpu_healthy_nodes": "Nodes whose GPUs are all healthy",
        "fabric_healthy_nodes": "Nodes whose fabric (NVLink, InfiniBand) is healthy",
    }
    for key, text in counts.items():
        family = GaugeMetricFamily(f"hyperjob_cluster_{key}", text, labels=["cluster"])
        for cluster in clusters:
            family.add_metric([cluster["name"]], cluster[key])
        families.append(family)
    age = GaugeMetricFamily(
        "hyperjob_cluster_report_age_seconds", "Seconds since a cluster last reported", labels=["cluster"]
    )
    for cluster in clusters:
        age.add_metric([cluster["name"]], cluster["lastReportAge"])
    families.append(age)
    for key, name in (("ready", "ready"), ("gpuHealthy", "gpu_healthy"), ("fabricHealthy", "fabric_healthy")):
        family = GaugeMetricFamily(
            f"hyperjob_node_{name}", f"1 when the node is {name.replace('_', ' ')}", labels=["cluster", "node"]
        )
        for node in nodes:
            family.add_metric([node["cluster"], node["name"]], 1.0 if node[key] else 0.0)
        families.append(family)
    return families
