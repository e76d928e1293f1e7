"""The ``hyperjob`` command line."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import click
import yaml

from hyperjob import api, events, telemetry
from hyperjob.events import subjects

from . import views
from .admin import admin
from .agent import agent, logs
from .bench_live import bench_live
from .client import Client
from .config import home, load_config, resolve_endpoints
from .offline import bench, simulate
from .up import System, run_forever

KINDS = {
    "hyperjobs": views.hyperjobs,
    "jobs": views.jobs,
    "queues": views.queues,
    "clusters": views.clusters,
    "nodes": views.nodes,
}
ROWS = {
    "hyperjobs": views.hyperjob_rows,
    "jobs": views.job_rows,
    "queues": views.queue_rows,
    "clusters": views.cluster_rows,
    "nodes": views.node_rows,
}
ALIASES = {
    "hyperjob": "hyperjobs",
    "hj": "hyperjobs",
    "job": "jobs",
    "vcjob": "jobs",
    "queue": "queues",
    "cluster": "clusters",
    "node": "nodes",
}


@click.group()
def main() -> None:
    """HyperJob: one job across many clusters, scheduled with Volcano's semantics."""
    # stdout carries command output (often JSON for scripts); library logs go to stderr, errors only.
    telemetry.setup_logging("hyperjob-cli", "ERROR", file=sys.stderr.buffer)


main.add_command(simulate)
main.add_command(bench)
bench.add_command(bench_live)
main.add_command(admin)
main.add_command(agent)
main.add_command(logs)


def with_client(work: Callable[[Client], Awaitable[Any]]) -> Any:
    async def run() -> Any:
        client = await Client.connect(resolve_endpoints())
        try:
            return await work(client)
        finally:
            await client.close()

    return asyncio.run(run())


# -- running the system ---------------------------------------------------------------------------


@main.command()
@click.option(
    "--config", "config_path", type=click.Path(exists=True, dir_okay=False), help="clusters to simulate (YAML)"
)
def up(config_path: str | None) -> None:
    """Start NATS, Redis, every service and a simulated fleet per cluster; Ctrl-C stops it all."""
    import os

    system = System(load_config(config_path))
    endpoints = system.start(os.environ.get("NATS_URL"), os.environ.get("REDIS_URL"))
    click.echo(
        f"hyperjob is up: NATS {endpoints.nats_url}, Redis {endpoints.redis_url}; "
        f"{len(system.services)} service processes (logs in {home() / 'logs'}). Ctrl-C to stop."
    )
    run_forever(system, click.echo)


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False))
@click.option("--timeout", type=float, default=600.0, show_default=True, help="seconds to wait for the HyperJob")
def demo(file: str, config_path: str | None, timeout: float) -> None:
    """Start the system, apply FILE, watch its HyperJob until it finishes, then stop (what `make run` does).

    The demo always starts from empty state, in its own home (``<home>/demo``), so a second run
    shows the whole lifecycle again rather than the finished HyperJob of the first.
    """
    import os
    import shutil

    demo_home = home() / "demo"
    shutil.rmtree(demo_home, ignore_errors=True)
    os.environ["HYPERJOB_HOME"] = str(demo_home)
    system = System(load_config(config_path))
    started = time.monotonic()
    try:
        system.start()
        click.echo(f"system up ({len(system.services)} service processes); waiting for clusters to report ...")
        outcome = asyncio.run(_demo(file, len(system.config.clusters), timeout))
    finally:
        system.stop()
    click.echo(f"done in {time.monotonic() - started:.1f}s; system stopped.")
    sys.exit(0 if outcome == "Completed" else 1)


async def _demo(file: str, clusters: int, timeout: float) -> str:
    client = await Client.connect(resolve_endpoints())
    try:
        deadline = time.monotonic() + 60
        while len(await client.cluster_names()) < clusters:
            if time.monotonic() > deadline:
                raise click.ClickException("clusters did not report within 60s; see .hyperjob/logs")
            await asyncio.sleep(0.2)
        names = []
        for document in _documents(file):
            answer = await client.apply(document)
            _print_answer(answer)
            if isinstance(answer, events.RequestRejected):
                return "Rejected"
            if answer.kind == "HyperJob":
                names.append(answer.name)
        phase = ""
        for name in names:
            phase = await _watch(client, name, timeout)
        return phase
    finally:
        await client.close()


# -- talking to it ----------------------------------------------------------------------------------


@main.command()
@click.option("-f", "--filename", "file", required=True, type=click.Path(exists=True, dir_okay=False, allow_dash=True))
def apply(file: str) -> None:
    """Create or update the objects in FILE (multi-document YAML or JSON)."""
    documents = _documents(file)

    async def work(client: Client) -> bool:
        ok = True
        for document in documents:
            answer = await client.apply(document)
            _print_answer(answer)
            ok = ok and isinstance(answer, events.RequestAccepted)
        return ok

    sys.exit(0 if with_client(work) else 1)


def _documents(file: str) -> list[dict[str, Any]]:
    """Every document of the file, each checked the way the system will check it, before sending."""
    text = sys.stdin.read() if file == "-" else open(file, encoding="utf-8").read()
    try:
        documents = api.load_documents(text)
        api.load(text)
    except api.ManifestError as exc:
        raise click.ClickException(f"{file}: {exc}") from None
    return documents


def _print_answer(answer: events.RequestAccepted | events.RequestRejected) -> None:
    if isinstance(answer, events.RequestAccepted):
        click.echo(f"{answer.kind.lower()}/{answer.name} {answer.outcome}")
    else:
        click.echo(f"error: {answer.kind.lower()}/{answer.name} rejected: {answer.reason}", err=True)


@main.command()
@click.argument("kind")
@click.argument("name", required=False)
@click.option("-o", "--output", type=click.Choice(["table", "wide", "json", "yaml"]), default="table")
def get(kind: str, name: str | None, output: str) -> None:
    """List hyperjobs, jobs, queues, clusters or nodes (or one by NAME)."""
    kind = ALIASES.get(kind, kind)
    if kind not in KINDS:
        raise click.BadParameter(f"one of {', '.join(KINDS)}", param_hint="KIND")
    items = with_client(lambda client: KINDS[kind](client, name))
    if name and not items:
        raise click.ClickException(f"{kind[:-1]} {name!r} not found")
    _print(items, output, ROWS[kind], single=bool(name))


def _print(items: list[dict[str, Any]], output: str, rows: Callable[..., Any], single: bool = False) -> None:
    data: Any = items[0] if single and len(items) == 1 else items
    if output == "json":
        click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))
    elif output == "yaml":
        click.echo(yaml.safe_dump(data, sort_keys=False).rstrip())
    else:
        header, table = rows(items)
        widths = [max(len(str(c)) for c in column) for column in zip(header, *table, strict=False)]
        for row in [header, *table]:
            click.echo("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=False)).rstrip())


@main.command()
@click.argument("kind", type=click.Choice(["hyperjob", "hj"]))
@click.argument("name")
def describe(kind: str, name: str) -> None:
    """Everything about one HyperJob: spec, status, children and where they run."""

    async def work(client: Client) -> dict[str, Any] | None:
        found = await views.hyperjobs(client, name)
        if not found:
            return None
        children = [child["name"] for child in found[0]["children"]]
        jobs = [j for j in await views.jobs(client, None) if j["name"] in children]
        return {**found[0], "jobs": [{k: v for k, v in j.items() if k != "pods"} for j in jobs]}

    described = with_client(work)
    if described is None:
        raise click.ClickException(f"hyperjob {name!r} not found")
    click.echo(yaml.safe_dump(described, sort_keys=False).rstrip())


@main.command()
@click.argument("kind", type=click.Choice(["hyperjob", "hj", "job", "queue", "priorityclass"]))
@click.argument("name")
@click.option("--wait/--no-wait", default=True, show_default=True, help="wait until every child is gone")
@click.option("--timeout", type=float, default=300.0, show_default=True)
def delete(kind: str, name: str, wait: bool, timeout: float) -> None:
    """Delete an object; a HyperJob is gone only once every child is gone from every cluster."""
    api_kind = {
        "hyperjob": "HyperJob",
        "hj": "HyperJob",
        "job": "Job",
        "queue": "Queue",
        "priorityclass": "PriorityClass",
    }[kind]

    async def work(client: Client) -> bool:
        answer = await client.delete(api_kind, name)
        _print_answer(answer)
        if isinstance(answer, events.RequestRejected):
            return False
        deadline = time.monotonic() + timeout
        while wait and api_kind in ("HyperJob", "Job") and await client.store.get("hyperjob", name) is not None:
            if time.monotonic() > deadline:
                click.echo(f"{kind}/{name} still deleting after {timeout:g}s (a cluster may be down)", err=True)
                return False
            await asyncio.sleep(0.2)
        if wait and api_kind in ("HyperJob", "Job"):
            click.echo(f"{kind}/{name} deleted")
        return True

    sys.exit(0 if with_client(work) else 1)


@main.command()
@click.argument("kind", type=click.Choice(["hyperjob", "hj"]))
@click.argument("name")
@click.option("--timeout", type=float, default=3600.0, show_default=True)
def watch(kind: str, name: str, timeout: float) -> None:
    """Show a HyperJob's status as it changes, until it completes or fails."""
    phase = with_client(lambda client: _watch(client, name, timeout))
    sys.exit(0 if phase == "Completed" else 1)


async def _watch(client: Client, name: str, timeout: float) -> str:
    last, started = None, time.monotonic()
    while time.monotonic() - started < timeout:
        found = await views.hyperjobs(client, name)
        if not found:
            click.echo(f"hyperjob/{name} not found")
            return "NotFound"
        item = found[0]
        line = _status_line(item)
        if line != last:
            click.echo(f"[{time.monotonic() - started:6.1f}s] {line}")
            last = line
        if item["phase"] in views.TERMINAL_HYPERJOB_PHASES:
            return str(item["phase"])
        await asyncio.sleep(0.25)
    click.echo(f"hyperjob/{name}: still {last} after {timeout:g}s", err=True)
    return "Timeout"


def _status_line(item: dict[str, Any]) -> str:
    status = item["status"]
    counts = {
        k: sum(rj.get(k, 0) for rj in status.get("replicatedJobsStatus", []))
        for k in ("pending", "running", "succeeded", "failed")
    }
    placement = status.get("placement") or {}
    where = " ".join(f"{c}={n}" for c, n in sorted(placement.items()))
    waiting = f" waiting: {item['waitingReason']}" if item["waitingReason"] else ""
    return (
        f"{item['name']} {item['phase']} pods pending={counts['pending']} running={counts['running']} "
        f"succeeded={counts['succeeded']} failed={counts['failed']} placement: {where or '-'}{waiting}"
    )


def _hyperjob_command(action: str) -> click.Command:
    @click.command(name=action, help=f"{action.capitalize()} a HyperJob: act on every child job in every cluster.")
    @click.argument("name")
    def command(name: str) -> None:
        async def work(client: Client) -> bool:
            answer = await client.request(
                subjects.HYPERJOB_COMMAND,
                events.CommandHyperJob(
                    event_id=events.new_request_id(),
                    occurred_at=time.time(),
                    producer="hyperjob-cli",
                    name=name,
                    action=action,
                ),
            )  # type: ignore[arg-type]
            _print_answer(answer)
            return isinstance(answer, events.RequestAccepted)

        sys.exit(0 if with_client(work) else 1)

    return command


for _action in ("suspend", "resume", "restart", "abort"):
    main.add_command(_hyperjob_command(_action))
