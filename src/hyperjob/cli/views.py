"""What ``get`` and ``describe`` show: rows for people, plain data for ``-o json|yaml``."""

from __future__ import annotations

import time
from typing import Any

import msgspec

from hyperjob import api, jobcore, records
from hyperjob.api.quantity import format_quantity
from hyperjob.jobcore import model as jm

from .client import Client

TERMINAL_HYPERJOB_PHASES = ("Completed", "Failed")


async def hyperjobs(client: Client, name: str | None) -> list[dict[str, Any]]:
    docs = await client.docs(records.HYPERJOB, records.HyperJobDoc)
    statuses = await client.docs(records.HYPERJOB_STATUS, records.HyperJobStatusDoc)
    items = []
    for doc in docs.values():
        if doc.plain or (name and doc.name != name):
            continue
        status = statuses.get(doc.name)
        phase = "Terminating" if doc.deleting else status.phase if status else "Pending"
        items.append(
            {
                "name": doc.name,
                "phase": phase,
                "generation": doc.generation,
                "splitCount": len(doc.children),
                "children": [msgspec.to_builtins(c) for c in doc.children],
                "waitingReason": doc.waiting_reason or (status.status.get("waitingReason", "") if status else ""),
                "status": status.status if status else {},
                "created": doc.created,
            }
        )
    return items


def hyperjob_rows(items: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    rows = []
    for item in items:
        placement = item["status"].get("placement") or _planned(item["children"])
        rows.append(
            [
                item["name"],
                item["phase"],
                str(item["splitCount"]),
                ",".join(f"{c}:{n}" for c, n in sorted(placement.items())) or "-",
                _age(item["created"]),
                item["waitingReason"],
            ]
        )
    return ["NAME", "PHASE", "CHILDREN", "PLACEMENT", "AGE", "WAITING"], rows


def _planned(children: list[dict[str, Any]]) -> dict[str, int]:
    placement: dict[str, int] = {}
    for child in children:
        if child.get("cluster"):
            placement[child["cluster"]] = placement.get(child["cluster"], 0) + child["replicas"]
    return placement


async def jobs(client: Client, name: str | None) -> list[dict[str, Any]]:
    items = []
    for cluster in await client.cluster_names():
        for record in (await client.docs(records.job_kind(cluster), jm.JobRecord)).values():
            if name and record.name != name:
                continue
            counts = jobcore.counts(record)
            items.append(
                {
                    "name": record.name,
                    "cluster": cluster,
                    "hyperJob": record.job.metadata.labels.get("volcano.sh/hyperjob-name"),
                    "phase": record.phase,
                    "retryCount": record.retry_count,
                    "queue": record.spec.queue,
                    "pending": counts.pending,
                    "running": counts.running,
                    "succeeded": counts.succeeded,
                    "failed": counts.failed,
                    "terminating": counts.terminating,
                    "pods": [
                        {"name": p.name, "phase": p.phase, "node": p.node, "restarts": p.restarts}
                        for p in sorted(record.pods.values(), key=lambda p: (p.task, p.index))
                    ],
                }
            )
    return sorted(items, key=lambda i: (i["name"], i["cluster"]))


def job_rows(items: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    rows = [
        [
            i["name"],
            i["cluster"],
            i["hyperJob"] or "-",
            i["phase"],
            str(i["retryCount"]),
            f"{i['pending']}/{i['running']}/{i['succeeded']}/{i['failed']}",
        ]
        for i in items
    ]
    return ["NAME", "CLUSTER", "HYPERJOB", "PHASE", "RETRIES", "PENDING/RUNNING/SUCCEEDED/FAILED"], rows


async def queues(client: Client, name: str | None) -> list[dict[str, Any]]:
    docs = await client.docs(records.QUEUE, records.QueueDoc)
    items = [
        {"name": n, "state": d.state, "spec": d.manifest.get("spec", {})}
        for n, d in docs.items()
        if not name or n == name
    ]
    if api.DEFAULT_QUEUE not in docs and (not name or name == api.DEFAULT_QUEUE):
        items.append({"name": api.DEFAULT_QUEUE, "state": "Open", "spec": {"weight": 1, "reclaimable": True}})
    return sorted(items, key=lambda i: i["name"])


def queue_rows(items: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    rows = [
        [
            i["name"],
            i["state"],
            str(i["spec"].get("weight", 1)),
            ",".join(f"{k}={v}" for k, v in (i["spec"].get("capability") or {}).items()) or "-",
        ]
        for i in items
    ]
    return ["NAME", "STATE", "WEIGHT", "CAPABILITY"], rows


async def clusters(client: Client, name: str | None) -> list[dict[str, Any]]:
    now = time.time()
    return [
        {
            "name": n,
            **{
                k: v
                for k, v in msgspec.to_builtins(r).items()
                if k not in ("node_classes", "cluster") and k not in _ENVELOPE
            },
            "lastReportAge": round(now - r.occurred_at, 1),
        }
        for n, r in (await client.capacities()).items()
        if not name or n == name
    ]


_ENVELOPE = (
    "type",
    "event_id",
    "occurred_at",
    "producer",
    "correlation_id",
    "causation_id",
    "aggregate_id",
    "aggregate_version",
)


def cluster_rows(items: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    rows = [
        [
            i["name"],
            f"{i['ready_nodes']}/{i['nodes']}",
            _resources(i["free"]),
            ",".join(f"{m}={n:g}" for m, n in sorted(i["free_accelerators"].items())) or "-",
            ",".join(f"{s}={n}" for s, n in i["gangs"].items()) or "-",
            f"{i['gpu_healthy_nodes']}/{i['fabric_healthy_nodes']}",
            f"{i['lastReportAge']:g}s",
        ]
        for i in items
    ]
    return ["NAME", "READY", "FREE", "FREE GPUS", "PODS THAT FIT", "HEALTHY GPU/FABRIC", "REPORTED"], rows


async def nodes(client: Client, name: str | None) -> list[dict[str, Any]]:
    items = []
    for cluster in await client.cluster_names():
        usage = await client.store.nodes(cluster)
        for node in (await client.node_statuses(cluster)).values():
            if name and node.node != name:
                continue
            used = usage[node.node].used if node.node in usage else {}
            items.append(
                {
                    "name": node.node,
                    "cluster": cluster,
                    "ready": node.ready,
                    "labels": node.labels,
                    "allocatable": node.allocatable,
                    "used": used,
                    "gpuHealthy": node.gpu_ok,
                    "fabricHealthy": node.fabric_ok,
                    "health": node.health_reasons,
                }
            )
    return sorted(items, key=lambda i: (i["cluster"], i["name"]))


def node_rows(items: list[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    rows = [
        [
            i["cluster"],
            i["name"],
            "Ready" if i["ready"] else "NotReady",
            _resources(i["used"]),
            _resources(i["allocatable"]),
        ]
        for i in items
    ]
    return ["CLUSTER", "NAME", "STATUS", "USED", "ALLOCATABLE"], rows


def _resources(values: dict[str, float]) -> str:
    shown = ("cpu", "memory", "nvidia.com/gpu", "pods")
    return ",".join(f"{k.split('/')[-1]}={format_quantity(k, v)}" for k, v in values.items() if k in shown) or "-"


def _age(created: float) -> str:
    seconds = max(0, int(time.time() - created))
    return f"{seconds}s" if seconds < 120 else f"{seconds // 60}m" if seconds < 7200 else f"{seconds // 3600}h"
