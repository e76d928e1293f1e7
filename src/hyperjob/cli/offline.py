"""Commands that need no running system: ``simulate`` and ``bench``."""

from __future__ import annotations

import json
import sys

import click


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", type=click.Choice(["json", "table"]), default="table", show_default=True)
@click.option("--chaos", "chaos_seed", type=int, default=None, metavar="SEED",
              help="run under deterministic fault injection (crashes, redeliveries, duplicates, reordering); "
                   "the same seed replays the same run")
@click.option("--chaos-runs", type=click.IntRange(min=1), default=None, metavar="N",
              help="soak: N chaos runs, seeds SEED .. SEED+N-1 (SEED from --chaos, else 1); one line per run")
def simulate(file: str, output: str, chaos_seed: int | None, chaos_runs: int | None) -> None:
    """Run a scenario file through the services themselves in virtual time (no NATS, no Redis).

    With --chaos every invariant is checked after every step and the run's end is compared with
    the run without chaos; the first violation is printed with its seed, virtual time and step
    (exit status 1)."""
    from hyperjob import simulator
    with open(file, encoding="utf-8") as handle:
        text = handle.read()
    try:
        if chaos_seed is None and chaos_runs is None:
            result = simulator.run(text)
        else:
            first = chaos_seed if chaos_seed is not None else 1
            runs = []
            for run in simulator.run_chaos(text, range(first, first + (chaos_runs or 1))):
                click.echo(run.summary(), err=chaos_runs is None)  # beside a result: on stderr
                runs.append(run)
            if chaos_runs is not None:
                click.echo(f"{len(runs)} chaos runs, {sum(r.steps for r in runs)} steps: every invariant held")
                return
            result = runs[0].result
    except simulator.ScenarioError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    except simulator.Violation as exc:
        click.echo(f"violation: {exc}", err=True)
        sys.exit(1)
    click.echo(simulator.to_json(result) if output == "json" else simulator.render_table(result))


@click.group()
def bench() -> None:
    """Benchmarks (figures, never assertions)."""


@bench.command("scheduler")
@click.option("--nodes", type=click.IntRange(min=1), default=10_000, show_default=True)
@click.option("--pods", type=click.IntRange(min=1), default=20_000, show_default=True)
@click.option("--gang", type=click.IntRange(min=1), default=1, show_default=True,
              help="pods per job; each job has minAvailable = gang")
@click.option("--initial", type=click.IntRange(min=0), default=0, show_default=True,
              help="pods already running before the measured cycles")
@click.option("--per-cycle", type=click.IntRange(min=0), default=0, show_default=True,
              help="pods submitted per cycle (0: all in one cycle)")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("-o", "--output", type=click.Choice(["json", "table"]), default="table", show_default=True)
def bench_scheduler(nodes: int, pods: int, gang: int, initial: int, per_cycle: int, seed: int, output: str) -> None:
    """The scheduling core alone on a synthetic cluster shaped like scheduler_perf's SchedulingBasic."""
    import msgspec

    from hyperjob.schedcore import bench as schedbench

    result = schedbench.run(nodes=nodes, pods=pods, gang=gang, seed=seed, initial=initial, per_cycle=per_cycle)
    _print_figures(msgspec.to_builtins(result), output)


@bench.command("simulate")
@click.option("--nodes", type=click.IntRange(min=1), default=1_000, show_default=True)
@click.option("--pods", type=click.IntRange(min=1), default=5_000, show_default=True)
@click.option("--duration", default="1h", show_default=True, help="virtual time the scenario covers")
@click.option("--clusters", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("-o", "--output", type=click.Choice(["json", "table"]), default="table", show_default=True)
def bench_simulate(nodes: int, pods: int, duration: str, clusters: int, seed: int, output: str) -> None:
    """hyperjob simulate on a generated fleet-sized scenario: wall time against virtual time."""
    import msgspec

    from hyperjob import api
    from hyperjob.simulator import bench as simbench

    result = simbench.run(nodes, pods, api.parse_duration(duration), clusters=clusters, seed=seed)
    _print_figures(msgspec.to_builtins(result), output)


def _print_figures(data: dict[str, object], output: str) -> None:
    if output == "json":
        click.echo(json.dumps(data, indent=2, sort_keys=True))
        return
    for key, value in data.items():
        click.echo(f"{key:>22}: {value:.1f}" if isinstance(value, float) else f"{key:>22}: {value}")
