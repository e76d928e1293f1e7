"""``hyperjob bench api``: the Kubernetes API (services/apiserver) measured from outside.

Starts a system of its own as ``hyperjob up`` does (``up.System``: NATS and Redis with
authentication, every service, two simulated clusters, the apiserver over HTTPS) in a private
``HYPERJOB_HOME``, and talks to the apiserver as the CLI's user with the kubeconfig ``up`` wrote
(its server, CA and token), through aiohttp (one connection pool).

The HyperJobs go to a queue of their own whose capability (one CPU) none of them fits, so they are
accepted and listed but wait (``QueueLimit``) and start no pods: the figures are the API's, not the
fleet's. ``--hyperjobs`` of them are created first through the NATS contract in one burst
(``ApplyManifest`` on the namespace's subject, ``publish_many``; the splitter's answers awaited),
which is fast; then:

- ``list`` / ``listTable``: ``--lists`` sequential lists of every HyperJob in ``default``, as JSON
  and as the Table kubectl asks for (its Accept header, in chunks of ``limit=500`` following each
  chunk's ``continue`` token, as kubectl does), p50/p95/p99 seconds;
- ``watch``: ``--watchers`` watches opened at once from the list's ``resourceVersion`` (how long
  until the last one answered), then one HyperJob created (through NATS); seconds from its publish
  until each watcher reads its ADDED, p50/p99/max;
- ``applyApi`` / ``applyNats``: ``--applies`` HyperJobs created through HTTPS POST, then as many
  through the NATS contract (``Client.apply``, the CLI's path, awaiting each answer), both
  ``--concurrency`` at a time, with the ``--hyperjobs`` in place: HyperJobs per second.

Figures, never assertions; counts are checked (the exit status is 1 when one falls short).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from .bench_live import percentile, render

QUEUE = "bench-api"
NAMESPACE = "default"
HYPERJOBS_PATH = f"/apis/training.volcano.sh/v1alpha1/namespaces/{NAMESPACE}/hyperjobs"
# What kubectl 1.32 sends for `kubectl get hyperjobs`: a Table (either version), else the list.
KUBECTL_TABLE = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"  # noqa: E501
)


@dataclass(frozen=True)
class Plan:
    hyperjobs: int
    watchers: int
    lists: int
    applies: int
    concurrency: int


def queue_manifest() -> dict[str, Any]:
    """A queue no bench HyperJob fits (each asks two CPUs): they wait, and no pod starts."""
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": QUEUE},
        "spec": {"weight": 1, "capability": {"cpu": "1"}},
    }


def hyperjob_manifest(name: str) -> dict[str, Any]:
    """One small HyperJob (upstream form, as kubectl users write it) in the bench's queue."""
    pod = {
        "spec": {
            "restartPolicy": "OnFailure",
            "containers": [{"name": "c", "image": "example.com/x", "resources": {"requests": {"cpu": "2"}}}],
        }
    }
    task = {"name": "t", "replicas": 1, "template": pod}
    template = {"minAvailable": 1, "queue": QUEUE, "tasks": [task]}
    return {
        "apiVersion": "training.volcano.sh/v1alpha1",
        "kind": "HyperJob",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"replicatedJobs": [{"name": "trainer", "replicas": 1, "templateSpec": template}]},
    }


# -- figures (pure) -------------------------------------------------------------------------------


def latencies(values: Sequence[float], *shares: float) -> dict[str, float | None]:
    """``p50``, ``p95`` ... of ``values`` (nearest rank), in seconds rounded to the millisecond."""
    out: dict[str, float | None] = {}
    for share in shares:
        value = percentile(values, share)
        out[f"p{round(share * 100)}"] = None if value is None else round(value, 3)
    return out


def rate(count: int, seconds: float) -> float | None:
    return round(count / seconds, 1) if seconds > 0 and count else None


@dataclass
class Listed:
    """Sequential lists of one kind: each one's seconds, and the last one's items and bytes."""

    seconds: list[float]
    items: int
    size: int

    def figures(self, items_key: str) -> dict[str, Any]:
        return {items_key: self.items, "bytes": self.size} | latencies(self.seconds, 0.50, 0.95, 0.99)


@dataclass
class Applied:
    created: int
    failed: int
    seconds: float
    first_error: str = ""

    def figures(self) -> dict[str, Any]:
        errors = {"firstError": self.first_error} if self.first_error else {}
        return {
            "created": self.created,
            "failed": self.failed,
            "seconds": round(self.seconds, 3),
            "perSecond": rate(self.created, self.seconds),
        } | errors


@dataclass
class Watched:
    opened: int
    open_seconds: float  # from the first watch asked for to the last one answered
    seen: list[float]  # per watcher that saw the change: seconds from its publish
    accepted_after: float | None  # seconds from its publish to the splitter's answer

    def figures(self, watchers: int) -> dict[str, Any]:
        return {
            "watchers": watchers,
            "opened": self.opened,
            "openSeconds": round(self.open_seconds, 3),
            "saw": len(self.seen),
            **latencies(self.seen, 0.50, 0.99),
            "max": round(max(self.seen), 3) if self.seen else None,
            "acceptedAfter": None if self.accepted_after is None else round(self.accepted_after, 3),
        }


def report(
    plan: Plan,
    seeded: tuple[int, float],
    lists: tuple[Listed, Listed],
    watched: Watched,
    applied: tuple[Applied, Applied],
) -> dict[str, Any]:
    """The figures of one run as one JSON-able object (camelCase keys, seconds)."""
    count, seconds = seeded
    return {
        "hyperjobs": plan.hyperjobs,
        "seeded": count,
        "seedSeconds": round(seconds, 3),
        "seedPerSecond": rate(count, seconds),
        "seedPath": "NATS contract: ApplyManifest in one publish_many burst, the splitter's answers awaited",
        "listRequests": plan.lists,
        "list": lists[0].figures("items"),
        "listTable": lists[1].figures("rows"),
        "watch": watched.figures(plan.watchers),
        "applies": plan.applies,
        "applyConcurrency": plan.concurrency,
        "applyApi": applied[0].figures(),
        "applyNats": applied[1].figures(),
        "loadAverage": [round(x, 2) for x in os.getloadavg()],
    }


def complete(plan: Plan, figures: dict[str, Any]) -> bool:
    """Whether every count the run asked for was met (timings are never judged)."""
    return bool(
        figures["seeded"] == plan.hyperjobs
        and figures["list"]["items"] == plan.hyperjobs
        and figures["listTable"]["rows"] == plan.hyperjobs
        and figures["watch"]["saw"] == plan.watchers
        and figures["applyApi"]["created"] == plan.applies
        and figures["applyNats"]["created"] == plan.applies
    )


@click.command("api")
@click.option("--hyperjobs", type=click.IntRange(min=0), default=10_000, show_default=True, help="HyperJobs listed")
@click.option("--watchers", type=click.IntRange(min=1), default=100, show_default=True)
@click.option("--lists", type=click.IntRange(min=1), default=20, show_default=True, help="lists of each kind timed")
@click.option(
    "--applies", type=click.IntRange(min=1), default=100, show_default=True, help="HyperJobs created through each path"
)
@click.option("--concurrency", type=click.IntRange(min=1), default=8, show_default=True, help="creates in flight")
@click.option("--timeout", type=click.FloatRange(min=1.0), default=600.0, show_default=True, help="seconds per stage")
@click.option("--keep", is_flag=True, help="keep the run's directory (service logs) and print where it is")
@click.option("-o", "--output", type=click.Choice(["json", "table"]), default="table", show_default=True)
def bench_api(
    hyperjobs: int, watchers: int, lists: int, applies: int, concurrency: int, timeout: float, keep: bool, output: str
) -> None:
    """The Kubernetes API of a system started here: list latency, watch fan-out, apply throughput."""
    plan = Plan(hyperjobs, watchers, lists, applies, concurrency)
    home = Path(tempfile.mkdtemp(prefix="hyperjob-bench-api-"))
    os.environ["HYPERJOB_HOME"] = str(home)  # up.System, its services and the kubeconfig use it

    def echo(line: str) -> None:
        click.echo(line, err=True)

    from .bench_api_run import ApiBench  # noqa: PLC0415 - aiohttp only when the bench runs

    bench = ApiBench(plan, echo)
    signal.signal(signal.SIGTERM, _interrupt)  # a killed bench still stops what it started
    try:
        with ExitStack() as stack:
            bench.start(stack)
            echo(f"{len(bench.system.services)} service processes up in {home}; waiting for them ...")
            figures = asyncio.run(bench.run(timeout))
    finally:
        if keep:
            echo(f"kept {home}")
        else:
            shutil.rmtree(home, ignore_errors=True)
    click.echo(json.dumps(figures, indent=2) if output == "json" else render(figures))
    sys.exit(0 if complete(plan, figures) else 1)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
