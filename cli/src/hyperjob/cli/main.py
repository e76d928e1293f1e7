"""The ``hyperjob`` command line."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

import click
import msgspec
import yaml
from opentelemetry.trace import SpanKind

from hyperjob import api, events, records, telemetry
from hyperjob.client import Answer
from hyperjob.events.manifest import HyperJobAction

from . import describe as describe_text
from . import fleet_state, journey, jsonpath_template, manifests, preflight, views, workloads
from .admin import admin
from .agent import agent, logs
from .bench_api import bench_api
from .bench_live import bench_live
from .client import Client, ClientError, connect
from .config import home, load_config, services_file
from .dlq import KIND as DLQ_KIND
from .dlq import dlq
from .kubeconfig import kubeconfig
from .offline import bench, simulate
from .schema import CONTRACT_VERSION, schema
from .up import HomeLock, System, UpError, holder_pid, run_forever
from .users import user

R = TypeVar("R")


class HyperJobCommand(click.Group):
    """The root command. Every failure ends as one line on stderr and exit code 1, as kubectl's do:
    usage errors, invalid manifests, an unreachable system; never a traceback (set
    ``HYPERJOB_DEBUG=1`` to see one)."""

    def main(self, *args: Any, **kwargs: Any) -> Any:  # click.Group.main's own signature, forwarded
        kwargs["standalone_mode"] = False
        try:
            code = super().main(*args, **kwargs)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            hint = f"\nSee '{exc.ctx.command_path} --help'." if exc.ctx is not None else ""
            _fail(f"{exc.format_message()}{hint}")
        except click.ClickException as exc:
            _fail(exc.format_message())
        except (click.Abort, KeyboardInterrupt):
            click.echo("interrupted", err=True)
            sys.exit(130)
        except (ClientError, api.ManifestError, OSError, TimeoutError) as exc:
            _fail(str(exc) or type(exc).__name__)
        except Exception as exc:  # anything else is a bug; still one line unless asked for more
            if os.environ.get("HYPERJOB_DEBUG"):
                raise
            _fail(f"{type(exc).__name__}: {exc} (HYPERJOB_DEBUG=1 shows where)")
        sys.exit(code if isinstance(code, int) else 0)


def _fail(message: str) -> None:
    first, _, rest = message.partition("\n")
    click.echo(f"error: {first.removeprefix('error: ')}{chr(10) + rest if rest else ''}", err=True)
    sys.exit(1)


@click.group(cls=HyperJobCommand, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="hyperjob", message="hyperjob %(version)s")
def main() -> None:
    """HyperJob: one job across many clusters, scheduled with Volcano's semantics."""
    # stdout carries command output (often JSON for scripts); library logs go to stderr, errors only.
    telemetry.setup_logging("hyperjob-cli", "ERROR", file=sys.stderr.buffer)


main.add_command(simulate)
main.add_command(bench)
bench.add_command(bench_live)
bench.add_command(bench_api)
main.add_command(admin)
main.add_command(agent)
main.add_command(logs)
main.add_command(schema)
main.add_command(user)
main.add_command(kubeconfig)
main.add_command(dlq)
views.KINDS[DLQ_KIND.plural] = DLQ_KIND  # `get dlq`
views.KINDS.update(workloads.KINDS)  # `get pytorchjobs`: Kubeflow's kinds by the name applied


@main.command()
def version() -> None:
    """Print the client version and the version of the submit contract it speaks."""
    from importlib.metadata import version as installed  # noqa: PLC0415

    click.echo(f"hyperjob {installed('hyperjob')} (contract {CONTRACT_VERSION}, Python {sys.version.split()[0]})")


@main.command()
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script (click's), e.g. `source <(hyperjob completion bash)`."""
    from click.shell_completion import get_completion_class  # noqa: PLC0415

    completer = get_completion_class(shell)
    assert completer is not None
    click.echo(completer(main, {}, "hyperjob", "_HYPERJOB_COMPLETE").source())


def with_client(work: Callable[[Client], Awaitable[R]]) -> R:
    async def run() -> R:
        client = await connect()
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
@click.option(
    "--wait-timeout", type=float, default=120.0, show_default=True, help="seconds for every cluster to register"
)
@click.option("-d", "--detach", is_flag=True, help="run in the background; return once every cluster has registered")
@click.option(
    "--dashboard-port", type=int, default=8765, show_default=True, help="the web dashboard's port on 127.0.0.1 (0: any)"
)
@click.option("--no-dashboard", is_flag=True, help="do not serve the web dashboard")
@click.option("--fresh", is_flag=True, help="start from empty state: forget what the last `up` here left")
@click.option(
    "--apiserver-port",
    type=int,
    default=6443,
    show_default=True,
    help="the Kubernetes API's port on 127.0.0.1 (0: any; kubectl reads $HYPERJOB_HOME/kubeconfig)",
)
def up(
    config_path: str | None,
    wait_timeout: float,
    detach: bool,
    dashboard_port: int,
    no_dashboard: bool,
    fresh: bool,
    apiserver_port: int,
) -> None:
    """Start NATS, Redis, every service and a simulated fleet per cluster; Ctrl-C or `hyperjob down`
    stops it all. "ready" is printed (and -d returns) only once every cluster has registered.

    The state the last `up` in this HYPERJOB_HOME left (HyperJobs, jobs, queues) is kept unless
    --fresh; nodes and clusters that --config no longer has are forgotten."""
    if detach:
        options = ["--dashboard-port", str(dashboard_port), "--apiserver-port", str(apiserver_port)]
        options += ["--no-dashboard"] if no_dashboard else []
        _up_detached(config_path, wait_timeout, options + (["--fresh"] if fresh else []))
        return
    config = load_config(config_path)
    lock = HomeLock()
    try:
        lock.acquire()
        if fresh:
            fleet_state.purge_state()
        system = System(config, dashboard_port=None if no_dashboard else dashboard_port, apiserver_port=apiserver_port)
        endpoints = system.start(os.environ.get("NATS_URL"), os.environ.get("REDIS_URL"))
        click.echo(
            f"starting: NATS {endpoints.nats_url}, Redis {endpoints.redis_url}; "
            f"{len(system.services)} service processes (logs in {home() / 'logs'})"
        )
        if system.forgotten:
            click.echo(f"forgot what the new fleet no longer has: {', '.join(system.forgotten)}")
        clusters = ", ".join(c.name for c in config.clusters)
        dashboard = f"; dashboard {system.dashboard_url}" if system.dashboard_url else ""
        if system.apiserver_url:
            dashboard += f"; kubectl: export KUBECONFIG={home() / 'kubeconfig'}"
        run_forever(
            system,
            click.echo,
            wait_timeout,
            ready=lambda: click.echo(
                f"hyperjob is ready: clusters {clusters} registered{dashboard}; {METRICS_HINT}. Ctrl-C to stop."
            ),
        )
    except UpError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        lock.release()


# Where `up` says each service's /metrics, /healthz and /readyz are (servicekit.health).
METRICS_HINT = "metrics and health of each service: `hyperjob get services -o wide`"


def _up_detached(config_path: str | None, wait_timeout: float, options: list[str]) -> None:
    if (pid := holder_pid()) is not None:
        raise click.ClickException(f"another `hyperjob up` (pid {pid}) is running in {home()}")
    home().mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "hyperjob.cli", "up", "--wait-timeout", str(wait_timeout)]
    command += (["--config", config_path] if config_path else []) + options
    with open(home() / "up.log", "ab") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + wait_timeout + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise click.ClickException(f"`hyperjob up` exited ({proc.returncode}); see {home() / 'up.log'}")
        status = _services_status()
        if status.get("ready") and status.get("pid") == proc.pid:
            dashboard = f"; dashboard {status['dashboard']}" if status.get("dashboard") else ""
            if status.get("apiserver"):
                dashboard += f"; kubectl: export KUBECONFIG={home() / 'kubeconfig'}"
            click.echo(
                f"hyperjob is ready (pid {proc.pid}; log {home() / 'up.log'}{dashboard}; {METRICS_HINT});"
                " stop it with `hyperjob down`"
            )
            return
        time.sleep(0.3)
    proc.terminate()
    raise click.ClickException(f"not ready within {wait_timeout:g}s; see {home() / 'up.log'}")


def _services_status() -> dict[str, object]:
    try:  # a file `hyperjob up` writes; anything but a JSON object reads as "not ready yet"
        return msgspec.json.decode(services_file().read_bytes(), type=dict[str, object])
    except (OSError, ValueError):
        return {}


@main.command()
@click.option("--timeout", type=float, default=60.0, show_default=True)
@click.option("--purge", is_flag=True, help="also remove the state, so that the next `up` starts empty")
def down(timeout: float, purge: bool) -> None:
    """Stop the system `hyperjob up` runs in this HYPERJOB_HOME (services first, then the servers).

    The state (HyperJobs, jobs, queues: NATS' and Redis' data in the home) is kept: the next `up`
    goes on with it. --purge removes it (credentials, users and logs stay)."""
    pid = holder_pid()
    if pid is None:
        click.echo(f"no `hyperjob up` is running in {home()}", err=True)
    else:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while holder_pid() is not None:
            if time.monotonic() > deadline:
                raise click.ClickException(f"`hyperjob up` (pid {pid}) did not stop within {timeout:g}s")
            time.sleep(0.2)
        click.echo(f"stopped (pid {pid})")
    if purge:
        removed = fleet_state.purge_state()
        click.echo(f"state removed from {home()}" if removed else f"no state in {home()}")
    elif pid is not None:
        click.echo(f"state kept in {home()} (`hyperjob down --purge` removes it)")


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False))
@click.option("--timeout", type=float, default=600.0, show_default=True, help="seconds to wait for the HyperJob")
def demo(file: str, config_path: str | None, timeout: float) -> None:
    """Start the system, apply FILE, watch its HyperJob until it finishes, then stop (what `make run` does).

    The demo always starts from empty state, in its own home (``<home>/demo``), so a second run
    shows the whole lifecycle again rather than the finished HyperJob of the first.
    """
    import shutil

    demo_home = home() / "demo"
    os.environ["HYPERJOB_HOME"] = str(demo_home)
    if (pid := holder_pid()) is not None:
        raise click.ClickException(f"another demo (pid {pid}) is running in {demo_home}")
    shutil.rmtree(demo_home, ignore_errors=True)
    lock = HomeLock()
    lock.acquire()
    system = System(load_config(config_path))
    started = time.monotonic()
    try:
        system.start()
        click.echo(f"system up ({len(system.services)} service processes); waiting for clusters to report ...")
        outcome = asyncio.run(_demo(file, len(system.config.clusters), timeout))
    finally:
        system.stop()
        lock.release()
    click.echo(f"done in {time.monotonic() - started:.1f}s; system stopped.")
    sys.exit(0 if outcome == "Completed" else 1)


async def _demo(file: str, clusters: int, timeout: float) -> str:
    client = await connect()
    try:
        deadline = time.monotonic() + 60
        while len(await client.cluster_names()) < clusters:
            if time.monotonic() > deadline:
                raise click.ClickException("clusters did not report within 60s; see .hyperjob/logs")
            await asyncio.sleep(0.2)
        names = []
        for obj in _load((file,), False, None):
            answer = await client.apply(obj.document)
            if not _print_answer(answer):
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

NAMESPACED_KINDS = ("HyperJob", "Job", "PodGroup")
OUTPUTS = ["table", "wide", "name", "json", "yaml"]


@main.command()
@click.option(
    "-f", "--filename", "filenames", multiple=True, required=True, help="a file, a directory, or - (repeatable)"
)
@click.option("-R", "--recursive", is_flag=True, help="also the files in subdirectories of a -f directory")
@click.option("-n", "--namespace", default=None, help="the namespace of objects that do not name one")
@click.option(
    "--dry-run",
    type=click.Choice(["none", "client", "server"]),
    default="none",
    help="client: check the objects alone; server: also against the running system; neither sends anything",
)
def apply(filenames: tuple[str, ...], recursive: bool, namespace: str | None, dry_run: str) -> None:
    """Create or update the objects in every -f file (multi-document YAML or JSON).

    Every object is checked first; if any is invalid, nothing is sent. Then each object is applied
    on its own (all of it or none of it) and reported: created, configured, unchanged, or the error.
    """
    found = _load(filenames, recursive, namespace)
    if dry_run == "client":
        for obj in found:
            click.echo(f"{obj.ref} valid (dry run)")
        return

    async def work(client: Client) -> bool:
        await preflight.check(client, found)
        if _report_invalid(found):
            return False
        if dry_run == "server":
            for obj in found:
                click.echo(f"{obj.ref} {await preflight.outcome(client, obj)} (server dry run)")
            return True
        ok = True
        for obj in found:
            # The root of the object's trace: every service's work for it joins this trace.
            with tracer.start_as_current_span(
                f"apply {obj.kind}", kind=SpanKind.PRODUCER, attributes=_span_attributes(obj)
            ):
                trace_id = telemetry.current_trace_id()
                answer = await client.apply(obj.document)
            ok = _print_answer(answer) and ok
            if trace_id and isinstance(answer, events.RequestAccepted) and _traced(answer):
                # On stderr: stdout stays kubectl's ("job/x created"), which scripts parse.
                click.echo(f"trace id: {trace_id}", err=True)
        return ok

    provider = telemetry.setup_tracing("hyperjob-cli")
    tracer = provider.get_tracer("hyperjob.cli")
    try:
        ok = with_client(work)
    finally:
        provider.shutdown()  # exports the root spans (when OTEL_EXPORTER_OTLP_ENDPOINT is set)
    sys.exit(0 if ok else 1)


def _traced(answer: events.RequestAccepted) -> bool:
    """A workload whose journey began with this request (a queue's change has no journey)."""
    workload = answer.kind in ("HyperJob", "Job", "PodGroup", *api.KUBEFLOW_KIND_NAMES)
    return workload and answer.outcome != "unchanged"


def _span_attributes(obj: manifests.Object) -> dict[str, str]:
    key = "hyperjob.name" if obj.kind in ("HyperJob", "Job") else "object.name"
    return {key: api.object_key(obj.namespace, obj.name), "object.kind": obj.kind}


def _load(filenames: tuple[str, ...], recursive: bool, namespace: str | None) -> list[manifests.Object]:
    """Every object of every -f source, checked; exits (nothing sent) when any is invalid."""
    try:
        found = [
            obj for source in manifests.paths(filenames, recursive) for obj in manifests.objects(source, namespace)
        ]
    except manifests.SourceError as exc:
        raise click.ClickException(str(exc)) from None
    found = _once_each(found)
    if _report_invalid(found):
        sys.exit(1)
    if not found:
        raise click.ClickException(f"no objects passed to apply (in {', '.join(filenames)})")
    return found


def _once_each(found: list[manifests.Object]) -> list[manifests.Object]:
    """Each object once: the same object defined alike in two sources is applied once (as
    kubectl would leave it, ``unchanged`` the second time); defined differently, it is an error."""
    seen: dict[tuple[str, str, str], manifests.Object] = {}
    kept = []
    for obj in found:
        key = (obj.kind, obj.namespace, obj.name)
        first = seen.setdefault(key, obj)
        if first is obj or obj.error:
            kept.append(obj)
        elif first.document != obj.document:
            obj.error = f"$.metadata.name: {obj.ref} is also defined, differently, in {first.source}"
            kept.append(obj)
    return kept


def _report_invalid(found: list[manifests.Object]) -> bool:
    """One line per invalid object, and that nothing was sent; True when there was any."""
    bad = [obj for obj in found if obj.error]
    for obj in bad:
        click.echo(f"error: {obj.source}: {obj.ref}: {obj.error}", err=True)
    if bad:
        click.echo(f"error: nothing applied: {len(bad)} of {len(found)} objects are invalid", err=True)
    return bool(bad)


def _print_answer(answer: Answer, ignore_not_found: bool = False) -> bool:
    """One line per object, as kubectl prints it; True when the request was accepted."""
    if isinstance(answer, events.RequestAccepted):
        click.echo(f"{answer.kind.lower()}/{answer.name} {answer.outcome}")
        return True
    if ignore_not_found and answer.reason.endswith("not found"):
        return True
    click.echo(f"error: {answer.kind.lower()}/{answer.name}: {answer.reason}", err=True)
    return False


@main.command()
@click.argument(
    "targets",
    nargs=-1,
    required=True,
    shell_complete=lambda ctx, param, incomplete: [k for k in views.KINDS if k.startswith(incomplete)],
)
@click.option(
    "-o",
    "--output",
    default="table",
    callback=lambda ctx, param, value: _output_format(value),
    help="table, wide, name, json, yaml or jsonpath=TEMPLATE",
)
@click.option("--no-headers", is_flag=True, help="no header line in table output")
@click.option("-n", "--namespace", default=None, help="only this namespace (default: default)")
@click.option("-A", "--all-namespaces", is_flag=True, help="every namespace (adds a NAMESPACE column)")
@click.option("-l", "--selector", default="", help="label selector: k=v, k!=v, k, !k (comma-separated)")
@click.option("-w", "--watch", is_flag=True, help="after listing, print each object again whenever it changes")
def get(
    targets: tuple[str, ...],
    output: str,
    no_headers: bool,
    namespace: str | None,
    all_namespaces: bool,
    selector: str,
    watch: bool,
) -> None:
    """List objects as kubectl does: KIND [NAME...], KIND,KIND... or KIND/NAME...; kinds:
    hyperjobs, jobs, pods, podgroups, queues, priorityclasses, cronjobs, jobflows, jobtemplates,
    hyperjobtemplates, clusters, nodes, services, events (of KIND/NAME)."""
    wanted = _get_targets(targets)
    try:
        match = views.selector(selector)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None

    async def load(shown: views.Kind, name: str | None, client: Client | None) -> list[views.View]:
        if shown.read_local:
            items = shown.read_local(name)
        else:
            assert client is not None and shown.load is not None
            items = await shown.load(client, name)
        if shown.namespaced and not all_namespaces:
            items = [i for i in items if i.get("namespace", "default") == (namespace or "default")]
        return [i for i in items if match(i.get("labels", {}))]

    if watch:
        if len(wanted) != 1:
            raise click.UsageError("-w watches one KIND [NAME]")
        shown, name = wanted[0]
        with_client(
            lambda client: _watch_kind(client, shown, partial(load, shown, name), output, no_headers, all_namespaces)
        )
        return

    async def load_all(client: Client | None) -> list[list[views.View]]:
        return [await load(shown, name, client) for shown, name in wanted]

    found = asyncio.run(load_all(None)) if all(s.read_local for s, _ in wanted) else with_client(load_all)
    missing = _not_found(wanted, found, None if all_namespaces else namespace or api.DEFAULT_NAMESPACE)
    if len(wanted) == 1:
        if missing:
            raise click.ClickException(missing[0])
        output_items(
            wanted[0][0],
            found[0],
            output,
            single=bool(wanted[0][1]),
            no_headers=no_headers,
            all_namespaces=all_namespaces,
        )
        return
    _output_kinds(_by_kind(wanted, found), output, no_headers, all_namespaces)
    for problem in missing:
        click.echo(f"Error from server (NotFound): {problem}", err=True)
    if missing:
        sys.exit(1)


def _not_found(
    wanted: list[tuple[views.Kind, str | None]], found: list[list[views.View]], namespace: str | None
) -> list[str]:
    """kubectl's NotFound for each named object that is not there (``namespace`` None: any)."""
    where = f" in namespace {namespace!r}" if namespace else ""
    return [
        f"{shown.singular} {name!r} not found" + (where if shown.namespaced else "")
        for (shown, name), items in zip(wanted, found, strict=True)
        if name and not items and shown.plural != "events"
    ]


def _get_targets(targets: tuple[str, ...]) -> list[tuple[views.Kind, str | None]]:
    """(kind, name or None) of each object ``get`` is asked for, read as kubectl reads them:
    ``KIND[,KIND...] [NAME...]`` or ``KIND/NAME...`` (``events KIND/NAME``: the events of one object)."""
    if "/" in targets[0]:
        pairs = [target.partition("/") for target in targets]
        for target, (kind, _, name) in zip(targets, pairs, strict=True):
            if not kind or not name or "/" in name:
                raise click.UsageError(f"{target!r}: give every object as KIND/NAME once the first is")
        return [(_kind(kind), name) for kind, _, name in pairs]
    kinds = [_kind(kind) for kind in targets[0].split(",")]
    if any("/" in name for name in targets[1:]) and any(k.plural != "events" for k in kinds):
        raise click.UsageError("arguments in KIND/NAME form may not have a KIND before them")
    names: list[str | None] = [*targets[1:]] or [None]
    return [(kind, name) for kind in kinds for name in names]


def _kind(name: str) -> views.Kind:
    shown = views.kind(name)
    if shown is None:
        raise click.UsageError(f'the server doesn\'t have a resource type "{name}" (known: {", ".join(views.KINDS)})')
    return shown


def _by_kind(
    wanted: list[tuple[views.Kind, str | None]], found: list[list[views.View]]
) -> list[tuple[views.Kind, list[views.View]]]:
    """The objects found, one group per kind in the order asked (``get hj a b``: one group)."""
    groups: dict[str, tuple[views.Kind, list[views.View]]] = {}
    for (shown, _), items in zip(wanted, found, strict=True):
        groups.setdefault(shown.plural, (shown, []))[1].extend(items)
    return list(groups.values())


def _output_kinds(
    groups: list[tuple[views.Kind, list[views.View]]], output: str, no_headers: bool, all_namespaces: bool
) -> None:
    """Objects of several kinds: a table per kind, names as ``kind/name`` when kinds are mixed, a
    blank line between tables (kubectl's); one List for json, yaml and jsonpath."""
    if len(groups) == 1:
        shown, items = groups[0]
        output_items(shown, items, output, no_headers=no_headers, all_namespaces=all_namespaces)
        return
    if output in ("json", "yaml") or output.startswith("jsonpath="):
        _print_data(_list([_object(shown, i) for shown, items in groups for i in items]), output)
        return
    if output == "name":
        for shown, items in groups:
            output_items(shown, items, output)
        return
    tables = []
    for shown, items in groups:
        header, table = _table(shown, items, output == "wide", all_namespaces)
        if table and "NAME" in header:
            column = header.index("NAME")
            table = [[*row[:column], f"{shown.singular}/{row[column]}", *row[column + 1 :]] for row in table]
        if table:
            tables.append(views.table(header, table, no_headers))
    if not tables:
        click.echo("No resources found.", err=True)
        return
    click.echo("\n\n".join(tables))


def _list(objects: list[views.View]) -> views.View:
    return {"apiVersion": "v1", "kind": "List", "items": objects}


def _print_data(data: views.View, output: str) -> None:
    """One object or a List, as json, yaml or a jsonpath template."""
    if output.startswith("jsonpath="):
        try:
            click.echo(jsonpath_template.render(output.removeprefix("jsonpath="), data))
        except jsonpath_template.TemplateError as exc:
            raise click.UsageError(f"error parsing jsonpath: {exc}") from None
    else:
        click.echo(_serialized(data, output))


def output_items(
    shown: views.Kind,
    items: list[views.View],
    output: str,
    single: bool = False,
    no_headers: bool = False,
    all_namespaces: bool = False,
) -> None:
    if output == "name":
        for item in items:
            click.echo(f"{shown.singular}/{item['name']}")
    elif output.startswith("jsonpath=") or output in ("json", "yaml"):
        objects = [_object(shown, i) for i in items]
        _print_data(objects[0] if single and len(objects) == 1 else _list(objects), output)
    else:
        header, table = _table(shown, items, output == "wide", all_namespaces)
        if not table and not no_headers:
            click.echo("No resources found.", err=True)
            return
        click.echo(views.table(header, table, no_headers))


def _output_format(value: str) -> str:
    if value in OUTPUTS or value.startswith("jsonpath="):
        return value
    raise click.BadParameter(f"{value!r}: one of {', '.join(OUTPUTS)} or jsonpath=TEMPLATE", param_hint="-o")


def _object(shown: views.Kind, item: views.View) -> views.View:
    return shown.manifest(item) if shown.manifest else _plain(item)


def _serialized(data: views.View, output: str) -> str:
    if output == "json":
        return json.dumps(data, indent=2, default=str)
    return yaml.safe_dump(data, sort_keys=False).rstrip()


def _table(
    shown: views.Kind, items: list[views.View], wide: bool, all_namespaces: bool
) -> tuple[list[str], list[list[str]]]:
    header, table = shown.rows(items, wide)
    if all_namespaces and shown.namespaced:
        header = ["NAMESPACE", *header]
        table = [[i.get("namespace", "default"), *row] for i, row in zip(items, table, strict=True)]
    return header, table


async def _watch_kind(
    client: Client,
    shown: views.Kind,
    load: Callable[[Client], Awaitable[list[views.View]]],
    output: str,
    no_headers: bool,
    all_namespaces: bool,
) -> None:
    """kubectl's -w: the list, then each object again (one line, or one document) when it changes."""
    last: dict[tuple[str, ...], str] = {}
    widths: list[int] = []
    while True:
        items = await load(client)
        shown_lines: list[str] | None = None
        if output in ("table", "wide"):
            header, rows = _table(shown, items, output == "wide", all_namespaces)
            if not widths:
                widths = [max(len(c) for c in column) for column in zip(header, *rows, strict=True)]
                if not no_headers:
                    click.echo("   ".join(c.ljust(w) for c, w in zip(header, widths, strict=True)).rstrip())
            shown_lines = ["   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
            # A row is printed again when it changed, not when only its age did.
            ticking = {
                i
                for i, column in enumerate(header)
                if column in ("AGE", "UPTIME", "REPORTED", "LAST SEEN", "FIRST SEEN")
            }
            lines = ["\0".join(c for i, c in enumerate(row) if i not in ticking) for row in rows]
        elif output == "name":
            lines = [f"{shown.singular}/{i['name']}" for i in items]
        else:
            lines = [_serialized(_object(shown, i), output) + ("" if output == "json" else "\n---") for i in items]
        current = {_key(i): line for i, line in zip(items, lines, strict=True)}
        printed = dict(zip(current, shown_lines or lines, strict=True))
        for key, line in current.items():
            if last.get(key) != line and (output != "name" or key not in last):
                click.echo(printed[key])
        last = current
        await asyncio.sleep(1.0)


def _key(item: views.View) -> tuple[str, ...]:
    return (item.get("namespace", ""), item.get("cluster", ""), item["name"])


def _plain(item: views.View) -> views.View:
    return {k: v for k, v in item.items() if k != "manifest"}


@main.command()
@click.argument("kind", type=click.Choice([*views.DESCRIBABLE, *workloads.NAMES], case_sensitive=False))
@click.argument("name")
@click.option("-n", "--namespace", default=api.DEFAULT_NAMESPACE, show_default=True)
@click.option(
    "-o", "--output", type=click.Choice(["text", "yaml"]), default="text", show_default=True, help="yaml: for programs"
)
def describe(kind: str, name: str, namespace: str, output: str) -> None:
    """Everything about one object, for people as kubectl prints it: a hyperjob (status, children
    and where they run), job (also an MPIJob, PyTorchJob or TFJob), pod, podgroup, queue, cluster,
    node, cronjob, jobflow or jobtemplate, ending with its Events."""

    async def work(client: Client) -> views.View | None:
        applied = workloads.kind_named(kind)
        if applied is None:
            return await views.describe(client, kind, name, namespace)
        if await workloads.stored_kind(client, name) != applied:
            return None
        return await views.describe(client, "job", name, namespace)  # the Volcano Job that runs it

    described = with_client(work)
    if described is None:
        raise click.ClickException(f"{kind} {name!r} not found" + _where(namespace))
    if output == "yaml":
        click.echo(yaml.safe_dump(described, sort_keys=False, allow_unicode=True).rstrip())
    else:
        click.echo(describe_text.render(described))


@main.command("trace")
@click.argument("name")
@click.option("-n", "--namespace", default=api.DEFAULT_NAMESPACE, show_default=True)
@click.option(
    "--jaeger",
    default=None,
    help="where Jaeger's UI is (default: on the host of OTEL_EXPORTER_OTLP_ENDPOINT, when it is set)",
)
@click.option("--life", default=0, type=int, help="which life of the name (1: the oldest; default: the latest)")
def trace_command(name: str, namespace: str, jaeger: str | None, life: int) -> None:
    """One life of a HyperJob as a waterfall of spans (from the event log: no tracing backend
    needed), its trace id, and its link in Jaeger where a Jaeger answers."""
    key = api.object_key(namespace, name)

    async def work(client: Client) -> list[journey.Step]:
        return await journey.load(client.bus, key)

    found = with_client(work)
    if not found:
        raise click.ClickException(f"no events of HyperJob {name!r}" + _where(namespace))
    url = journey.jaeger_url(jaeger, os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))
    click.echo(journey.render(found, key, (url, url is not None and journey.jaeger_answers(url)), life))


DELETABLE = {
    "hyperjob": "HyperJob",
    "hyperjobs": "HyperJob",
    "hj": "HyperJob",
    "job": "Job",
    "jobs": "Job",
    "vcjob": "Job",
    "queue": "Queue",
    "queues": "Queue",
    "priorityclass": "PriorityClass",
    "priorityclasses": "PriorityClass",
    "podgroup": "PodGroup",
    "podgroups": "PodGroup",
    "pg": "PodGroup",
    **{name: api.SHORT_KINDS[name] for name in views.DESCRIBED},
    **{name: workloads.kind_named(name) or "" for name in workloads.NAMES},
    **{name + "s": api.SHORT_KINDS[name] for name in ("cronjob", "jobflow", "jobtemplate", "hyperjobtemplate")},
}


@main.command()
@click.argument("args", nargs=-1)
@click.option("-f", "--filename", "filenames", multiple=True, help="delete the objects in these files or directories")
@click.option("-R", "--recursive", is_flag=True)
@click.option("--ignore-not-found", is_flag=True, help="an object that does not exist is not an error")
@click.option("--wait/--no-wait", default=True, show_default=True, help="wait until every child is gone")
@click.option("--timeout", type=float, default=300.0, show_default=True)
@click.option("-n", "--namespace", default=None, help="the namespace of the objects (default: default)")
def delete(
    args: tuple[str, ...],
    filenames: tuple[str, ...],
    recursive: bool,
    ignore_not_found: bool,
    wait: bool,
    timeout: float,
    namespace: str | None,
) -> None:
    """Delete objects: KIND NAME..., KIND/NAME..., or -f FILE (in the reverse of the file's order, so
    that what applied cleanly deletes cleanly). A HyperJob is gone only once every child is gone
    from every cluster; each workload is waited for before the next object is deleted."""
    targets = _delete_targets(args, filenames, recursive, namespace)

    async def work(client: Client) -> bool:
        ok = True
        owners = await views.child_owners(client)
        for applied, where, name in targets:
            kind = "Job" if applied in api.KUBEFLOW_KIND_NAMES else applied  # each runs as a Volcano Job
            if kind != applied and await workloads.stored_kind(client, name) != applied:
                ok = _print_not_found(applied, name, where, ignore_not_found) and ok
                continue
            if kind == "Job" and name in owners:
                owner_namespace, owner = api.split_key(owners[name])
                flag = f" -n {owner_namespace}" if owner_namespace != api.DEFAULT_NAMESPACE else ""
                click.echo(
                    f"error: job/{name}: belongs to HyperJob {owner!r}{_where(owner_namespace)}; delete the "
                    f"HyperJob (hyperjob delete hyperjob {owner}{flag}) or suspend it",
                    err=True,
                )
                ok = False
                continue
            answer = msgspec.structs.replace(await client.delete(kind, name, where), kind=applied)
            if not _print_answer(answer, ignore_not_found):
                ok = False
            elif isinstance(answer, events.RequestAccepted) and wait and kind in NAMESPACED_KINDS:
                ok = await _wait_gone(client, applied, where, name, timeout) and ok
        return ok

    sys.exit(0 if with_client(work) else 1)


def _print_not_found(kind: str, name: str, namespace: str, ignore_not_found: bool) -> bool:
    """kubectl's answer for an object that is not of the kind named; True when that is no error."""
    if not ignore_not_found:
        click.echo(f"error: {kind.lower()}/{name}: {kind} {name!r} not found{_where(namespace)}", err=True)
    return ignore_not_found


def _delete_targets(
    args: tuple[str, ...], filenames: tuple[str, ...], recursive: bool, namespace: str | None
) -> list[tuple[str, str, str]]:
    """(kind, namespace, name) of each object to delete."""
    if filenames:
        if args:
            raise click.UsageError("give either -f FILE or KIND NAME, not both")
        # Last applied, first deleted (a Job before the Queue it uses), each waited for in turn.
        return [(obj.kind, obj.namespace, obj.name) for obj in reversed(_load(filenames, recursive, namespace))]
    if not args:
        raise click.UsageError("give KIND NAME..., KIND/NAME... or -f FILE")
    if all("/" in a for a in args):
        pairs = [tuple(a.split("/", 1)) for a in args]
    elif len(args) >= 2 and "/" not in args[0]:
        pairs = [(args[0], n) for n in args[1:]]
    else:
        raise click.UsageError(f"cannot tell kind from name in {' '.join(args)!r}: use KIND NAME or KIND/NAME")
    targets = []
    for kind, name in pairs:
        if kind.lower() not in DELETABLE:
            raise click.UsageError(f'cannot delete resource type "{kind}" (one of {", ".join(sorted(DELETABLE))})')
        targets.append((DELETABLE[kind.lower()], namespace or api.DEFAULT_NAMESPACE, name))
    return targets


def _where(namespace: str) -> str:
    return f" in namespace {namespace!r}" if namespace != api.DEFAULT_NAMESPACE else ""


async def _wait_gone(client: Client, kind: str, namespace: str, name: str, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    key = api.object_key(namespace, name) if kind == "HyperJob" else name
    while await client.store.get(records.HYPERJOB, key) is not None:
        if time.monotonic() > deadline:
            click.echo(
                f"error: {kind.lower()}/{name} still deleting after {timeout:g}s (a cluster may be down)", err=True
            )
            return False
        await asyncio.sleep(0.2)
    click.echo(f"{kind.lower()}/{name} deleted")
    return True


@main.command()
@click.argument("kind", type=click.Choice(["hyperjob", "hj"]))
@click.argument("name")
@click.option("--timeout", type=float, default=3600.0, show_default=True)
@click.option("-n", "--namespace", default=api.DEFAULT_NAMESPACE, show_default=True)
def watch(kind: str, name: str, timeout: float, namespace: str) -> None:
    """Show a HyperJob's status as it changes, until it completes or fails."""
    phase = with_client(lambda client: _watch(client, name, timeout, namespace))
    sys.exit(0 if phase == "Completed" else 1)


async def _watch(client: Client, name: str, timeout: float, namespace: str = api.DEFAULT_NAMESPACE) -> str:
    last, started = None, time.monotonic()
    while time.monotonic() - started < timeout:
        found = [i for i in await views.hyperjobs(client, name) if i["namespace"] == namespace]
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


def _status_line(item: views.View) -> str:
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


# Volcano's final phases: a command on a finished HyperJob would be answered but change nothing.
FINISHED = ("Completed", "Failed", "Aborted", "Terminated")


def _hyperjob_command(action: HyperJobAction) -> click.Command:
    @click.command(name=action, help=f"{action.capitalize()} a HyperJob: act on every child job in every cluster.")
    @click.argument("name")
    @click.option("-n", "--namespace", default=api.DEFAULT_NAMESPACE, show_default=True)
    def command(name: str, namespace: str) -> None:
        async def work(client: Client) -> bool:
            found = [i for i in await views.hyperjobs(client, name) if i["namespace"] == namespace]
            problem = _command_refused(action, found[0]) if found else ""
            if problem:
                click.echo(f"error: hyperjob/{name}: {problem}", err=True)
                return False
            return _print_answer(await client.command(name, action, namespace))

        sys.exit(0 if with_client(work) else 1)

    return command


def _command_refused(action: str, item: views.View) -> str:
    """Why ``action`` cannot act on this HyperJob now, or "" (the splitter decides everything else)."""
    if item["phase"] in FINISHED:
        return f"is {item['phase']}: a finished HyperJob takes no {action} (delete it and apply it again)"
    if item["phase"] == "Terminating":
        return "is being deleted"
    if action == "resume" and item["lifecycle"] != "Suspended":
        return f"is not suspended (phase {item['phase']}): nothing to resume"
    if action == "suspend" and item["lifecycle"] == "Suspended":
        return "is suspended already: nothing to suspend"
    return ""


_ACTIONS: tuple[HyperJobAction, ...] = ("suspend", "resume", "restart", "abort")
for _action in _ACTIONS:
    main.add_command(_hyperjob_command(_action))
