"""Commands that need no running system: ``simulate`` and ``bench`` (scheduler, placement)."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", type=click.Choice(["json", "table"]), default="table", show_default=True)
@click.option(
    "--chaos",
    "chaos_seed",
    type=int,
    default=None,
    metavar="SEED",
    help="run under deterministic fault injection (crashes, redeliveries, duplicates, reordering); "
    "the same seed replays the same run",
)
@click.option(
    "--chaos-runs",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="soak: N chaos runs, seeds SEED .. SEED+N-1 (SEED from --chaos, else 1); one line per run",
)
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
@click.option(
    "--gang",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="pods per job; each job has minAvailable = gang",
)
@click.option(
    "--initial",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="pods already running before the measured cycles",
)
@click.option(
    "--per-cycle",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="pods submitted per cycle (0: all in one cycle)",
)
@click.option(
    "--gpus",
    type=click.IntRange(min=0, max=8),
    default=0,
    show_default=True,
    help="whole GPUs per pod (the nodes have 8), as the live benchmark's trainers ask one",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--conf",
    "conf_file",
    type=click.Path(exists=True, dir_okay=False),
    help="volcano-scheduler.conf to measure (default: Volcano's default conf)",
)
@click.option("-o", "--output", type=click.Choice(["json", "table"]), default="table", show_default=True)
def bench_scheduler(
    nodes: int,
    pods: int,
    gang: int,
    initial: int,
    per_cycle: int,
    gpus: int,
    seed: int,
    conf_file: str | None,
    output: str,
) -> None:
    """The scheduling core alone on a synthetic cluster shaped like scheduler_perf's SchedulingBasic."""
    import msgspec

    from hyperjob.schedcore import DEFAULT_CONF, ConfError, parse_conf
    from hyperjob.schedcore import bench as schedbench

    conf = DEFAULT_CONF
    if conf_file:
        try:
            with open(conf_file, encoding="utf-8") as f:
                conf = parse_conf(f.read())
        except ConfError as exc:
            raise click.UsageError(f"{conf_file}: {exc}") from None
    result = schedbench.run(
        nodes=nodes, pods=pods, gang=gang, seed=seed, initial=initial, per_cycle=per_cycle, conf=conf, gpus=gpus
    )
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


@bench.command("placement")
@click.option(
    "--nodes",
    "nodes_file",
    type=click.Path(exists=True, dir_okay=False),
    required=True,
    help="node list CSV: sn,cpu_milli,memory_mib,gpu,model",
)
@click.option(
    "--pods",
    "pods_file",
    type=click.Path(exists=True, dir_okay=False),
    required=True,
    help="pod list CSV: name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec]",
)
@click.option(
    "--conf",
    "conf_file",
    type=click.Path(exists=True, dir_okay=False),
    help="a volcano-scheduler.conf to replay instead of a named policy",
)
@click.option(
    "--policy",
    "policies",
    multiple=True,
    help="gpufrag (the live default conf; default), random, dotprod, clustering, packing, bestfit, "
    "fgd, or all; repeat or comma-separate to compare",
)
@click.option("--seed", type=int, default=42, show_default=True, help="arrival sampling and order, tie order")
@click.option(
    "--demand",
    type=click.FloatRange(min=0.01, max=10.0),
    default=1.3,
    show_default=True,
    help="total GPU request of the arrivals, as a share of the fleet's GPUs",
)
@click.option("-o", "--output", type=click.Choice(["json", "table"]), default="table", show_default=True)
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False), help="PNG of the allocation curves")
def bench_placement(
    nodes_file: str,
    pods_file: str,
    conf_file: str | None,
    policies: tuple[str, ...],
    seed: int,
    demand: float,
    output: str,
    plot_file: str | None,
) -> None:
    """Replay a GPU cluster trace pod by pod, FGD's way (USENIX ATC'23), through the scheduler core."""
    import msgspec

    from hyperjob.schedcore import ConfError, parse_conf, trace, tracebench

    runs = _placement_runs(conf_file, policies)
    try:
        with open(nodes_file, encoding="utf-8") as f:
            nodes = trace.parse_nodes(f.read(), source=nodes_file)
        with open(pods_file, encoding="utf-8") as f:
            pods = trace.parse_pods(f.read(), source=pods_file)
        results = []
        for label, conf_text in runs:
            conf = parse_conf(conf_text) if conf_text is not None else tracebench.policy_conf(label, seed)
            results.append(tracebench.run(nodes, pods, conf, label, seed=seed, demand=demand))
    except (trace.TraceError, ConfError, ValueError) as exc:
        raise click.UsageError(str(exc)) from None
    if plot_file:
        _plot_placement(results, plot_file, title=os.path.basename(pods_file))
    if output == "json":
        data = [msgspec.to_builtins(r) for r in results]
        click.echo(json.dumps(data[0] if len(data) == 1 else data, indent=2))
        return
    click.echo(
        f"{'POLICY':<14} {'SEED':>5} {'GPUS':>6} {'SCHEDULED':>9} {'SKIPPED':>8} "
        f"{'ALLOC@100%':>10} {'ALLOC@END':>9} {'FRAG@END':>8} {'SECONDS':>7}"
    )
    for r in results:
        at100 = r.gpu_allocation_percent[min(100, len(r.gpu_allocation_percent) - 1)]
        click.echo(
            f"{r.policy:<14} {r.seed:>5} {r.total_gpus:>6} {r.pods_scheduled:>9} {r.pods_skipped:>8} "
            f"{at100:>10.2f} {r.gpu_allocation_percent[-1]:>9.2f} {r.gpu_fragmentation_percent[-1]:>8.2f} "
            f"{r.seconds:>7.1f}"
        )


def _placement_runs(conf_file: str | None, policies: tuple[str, ...]) -> list[tuple[str, str | None]]:
    """(label, conf text or None for a named policy) per replay; bad combinations are usage errors."""
    from hyperjob.schedcore import tracebench

    names = [p.strip() for item in policies for p in item.split(",") if p.strip()]
    if conf_file:
        if names:
            raise click.UsageError("--conf and --policy: give one or the other")
        with open(conf_file, encoding="utf-8") as f:
            return [(os.path.basename(conf_file), f.read())]
    if "all" in names:
        names = list(tracebench.POLICIES)
    for name in names:
        if name not in tracebench.POLICIES:
            raise click.UsageError(f"--policy: unknown policy {name!r} (known: {', '.join(tracebench.POLICIES)}, all)")
    return [(name, None) for name in dict.fromkeys(names or [tracebench.DEFAULT_POLICY])]


def _plot_placement(results: list[Any], path: str, title: str) -> None:
    """Allocation (left) and fragmentation (right) against arrived demand, like the paper's fig. 9a / 7a."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (alloc, frag) = plt.subplots(1, 2, figsize=(11, 4.2))
    points = len(results[0].gpu_allocation_percent)
    alloc.plot(range(points), range(points), color="0.75", linestyle="--", linewidth=1, label="arrived")
    for r in results:
        label = f"{r.policy} ({r.gpu_allocation_percent[-1]:.2f} %)"
        alloc.plot(range(len(r.gpu_allocation_percent)), r.gpu_allocation_percent, linewidth=1.4, label=label)
        frag.plot(range(len(r.gpu_fragmentation_percent)), r.gpu_fragmentation_percent, linewidth=1.4, label=r.policy)
    alloc.set(
        xlabel="arrived GPU demand (% of the fleet's GPUs)",
        ylabel="GPUs allocated (%)",
        ylim=(max(0, min(r.gpu_allocation_percent[-1] for r in results) - 15), 100),
        xlim=(60, points - 1),
    )
    frag.set(
        xlabel="arrived GPU demand (% of the fleet's GPUs)",
        ylabel="GPUs fragmented (%, FGD's definition)",
        xlim=(0, points - 1),
    )
    alloc.legend(fontsize=8, loc="lower right")
    frag.legend(fontsize=8)
    for ax in (alloc, frag):
        ax.grid(alpha=0.3)
    fig.suptitle(f"{title}: seed {results[0].seed}, {results[0].total_gpus} GPUs on {results[0].nodes} nodes")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
