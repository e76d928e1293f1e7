"""``-o table``: the same facts as the JSON result, laid out for a person.

Three plain-text tables (jobs and HyperJobs, queues, the timeline); no colour and no terminal
width detection, so the text is as deterministic as the JSON.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hyperjob.api.quantity import format_quantity

from .output import PodRow, Result


def render_table(result: Result) -> str:
    """Render a result of ``simulator.run`` as text tables."""
    parts = [f"scenario {result['scenario']} at t={_time(result['time'])}", ""]
    parts += _section("JOBS", ("KIND", "NAME", "CLUSTER", "PHASE", "DETAIL"), _job_rows(result))
    parts += _section("QUEUES", ("NAME", "CLUSTER", "STATE", "ALLOCATED", "DESERVED"), _queue_rows(result))
    parts += _section("TIMELINE", ("TIME", "TYPE", "OBJECT", "WHERE", "PHASE", "REASON"), _event_rows(result))
    return "\n".join(parts).rstrip() + "\n"


def _section(title: str, header: Sequence[str], rows: list[tuple[str, ...]]) -> list[str]:
    lines = [title]
    if not rows:
        return [*lines, "  (none)", ""]
    widths = [max(len(str(r[i])) for r in [tuple(header), *rows]) for i in range(len(header))]
    for row in [tuple(header), *rows]:
        lines.append("  " + "  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return [*lines, ""]


def _job_rows(result: Result) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for hj in result.get("hyperJobs", []):
        placement = ", ".join(f"{c}={n}" for c, n in hj["placement"].items()) or "-"
        conditions = "".join(f" {c['type']}={c['status']} ({c['reason']})" for c in hj["conditions"])
        rows.append(
            (
                "HyperJob",
                hj["name"],
                "-",
                hj["phase"],
                f"children={hj['splitCount']} placement: {placement}{conditions}",
            )
        )
    pods_by_job: dict[str, list[PodRow]] = {}
    for pod in result.get("pods", []):
        pods_by_job.setdefault(pod["job"], []).append(pod)
    for job in result.get("jobs", []):
        pods = pods_by_job.get(job["name"], [])
        counts: dict[str, int] = {}
        for pod in pods:
            counts[pod["phase"]] = counts.get(pod["phase"], 0) + 1
        detail = " ".join(f"{k.lower()}={v}" for k, v in sorted(counts.items())) or "no pods"
        owner = f" of {job['hyperJob']}" if job["hyperJob"] else ""
        rows.append(
            ("Job", job["name"] + owner, job["cluster"] or "-", job["phase"], f"{detail} retries={job['retryCount']}")
        )
    return rows


def _queue_rows(result: Result) -> list[tuple[str, ...]]:
    return [
        (q["name"], q["cluster"], q["state"], _resources(q["allocated"]), _resources(q["deserved"]))
        for q in result.get("queues", [])
    ]


def _event_rows(result: Result) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for e in result.get("events", []):
        where = "/".join(p for p in (e["cluster"], e["node"]) if p) or "-"
        rows.append((_time(e["time"]), e["type"], e["object"], where, e["phase"] or "-", e["reason"] or "-"))
    return rows


def _resources(values: Mapping[str, float]) -> str:
    # Kubernetes notation (256Gi, 500m) reads better than base units for a person.
    return ", ".join(f"{k}={format_quantity(k, float(v))}" for k, v in values.items()) or "-"


def _time(value: float | None) -> str:
    return "-" if value is None else f"{value:g}s"
