"""``hyperjob agent``: run a node-agent for one cluster (a simulated fleet, pods as local processes,
or pods as podman containers: ``--runtime podman``), inject faults into a running simulated fleet;
``hyperjob logs POD``: show the output of a pod this machine's agents ran (process or container).

``agent`` starts the ``node_agent`` service in this process's place (``exec``), configured through
its ``NODE_AGENT_*`` settings, against the running system (``NATS_URL``/``REDIS_URL`` or what
``hyperjob up`` recorded). Thousands of simulated nodes fit in one agent process.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

import click
import msgspec

from hyperjob import events
from hyperjob.client.podlogs import LogReader, log_paths
from hyperjob.events import subjects
from hyperjob.events.access import OPERATOR

from .client import connect
from .config import Endpoints, home, resolve_endpoints

SHAPE_OPTIONS = {
    "gpu_model": "gpu_model",
    "nvlinks": "nvlinks_per_gpu",
    "nvlink_version": "nvlink_version",
    "nvlink_domain_nodes": "nodes_per_nvlink_domain",
    "nodes_per_leaf": "nodes_per_leaf",
    "leaves_per_spine": "leaves_per_spine",
    "ib_ports": "ib_ports_per_node",
    "ib_rate": "ib_rate_gbps",
}


@click.group(invoke_without_command=True)
@click.option("--cluster", required=True, help="the cluster whose nodes this agent serves")
@click.option(
    "--simulate/--exec",
    "simulate",
    default=True,
    show_default=True,
    help="simulated pods and telemetry, or pods as local processes with the real telemetry readers",
)
@click.option(
    "--runtime",
    type=click.Choice(["process", "podman"]),
    default=None,
    help="what runs the pods (implies --exec): local processes, or OCI containers through podman "
    "(podman's settings from containers.conf or CONTAINERS_CONF)",
)
@click.option(
    "--oci-runtime",
    default="runc",
    show_default=True,
    help="with --runtime podman: the OCI runtime podman uses ('' for podman's own choice)",
)
@click.option("--nodes", type=int, default=4, show_default=True)
@click.option("--node-prefix", default="", help="node names are <prefix>-<i> (default <cluster>-node)")
@click.option(
    "--node-name",
    "node_names",
    multiple=True,
    help="serve exactly these nodes (repeatable; e.g. this host's name for a real node's agent)",
)
@click.option(
    "--node-address",
    default="",
    help="the address other hosts reach this host's pods at (default: the host's own address)",
)
@click.option("--gpus", type=int, default=8, show_default=True, help="GPUs per node (nvidia.com/gpu)")
@click.option("--cpu", default="96", show_default=True)
@click.option("--memory", default="1Ti", show_default=True)
@click.option("--gpu-model", default="H100", show_default=True)
@click.option("--nvlinks", type=int, default=18, show_default=True, help="NVLinks per GPU")
@click.option("--nvlink-version", type=int, default=4, show_default=True)
@click.option("--nvlink-domain-nodes", type=int, default=1, show_default=True, help="nodes per NVLink domain")
@click.option("--nodes-per-leaf", type=int, default=4, show_default=True)
@click.option("--leaves-per-spine", type=int, default=4, show_default=True)
@click.option("--ib-ports", type=int, default=-1, show_default=True, help="InfiniBand ports per node (-1: one per GPU)")
@click.option("--ib-rate", type=float, default=400.0, show_default=True, help="Gb/s per port")
@click.option(
    "--fault",
    "faults",
    multiple=True,
    metavar="KIND@NODE[,k=v]",
    help="inject: gpu-xid|gpu-ecc|ib-down|silent@NODE with gpu=, xid=, device=, after=, for= (repeatable)",
)
@click.option("--telemetry-period", type=float, default=10.0, show_default=True)
@click.option("--heartbeat-period", type=float, default=2.0, show_default=True)
@click.option("--pod-duration", default="30s", show_default=True, help="simulated pods without a sim-duration")
@click.pass_context
def agent(
    ctx: click.Context,
    /,
    cluster: str,
    simulate: bool,
    runtime: str | None,
    oci_runtime: str,
    nodes: int,
    node_prefix: str,
    node_names: tuple[str, ...],
    node_address: str,
    gpus: int,
    cpu: str,
    memory: str,
    faults: tuple[str, ...],
    telemetry_period: float,
    heartbeat_period: float,
    pod_duration: str,
    **shape: object,
) -> None:
    """Run a node-agent for CLUSTER (or, with a subcommand, talk to a running one)."""
    ctx.ensure_object(dict)["cluster"] = cluster
    if ctx.invoked_subcommand is not None:
        return
    _check_faults(faults)
    mode = _mode(ctx, simulate, runtime)
    endpoints = agent_endpoints(cluster, list(node_names))
    settings = {
        "CLUSTER": cluster,
        "MODE": mode,
        "OCI_RUNTIME": oci_runtime,
        "NODES": str(nodes),
        "NODE_PREFIX": node_prefix,
        "ALLOCATABLE": _json({"cpu": cpu, "memory": memory, "nvidia.com/gpu": str(gpus), "pods": "110"}),
        "FLEET_SHAPE": _json({field: shape[option] for option, field in SHAPE_OPTIONS.items()}),
        "NODE_NAMES": _json(list(node_names)),
        "NODE_ADDRESS": node_address,
        "FAULTS": _json(list(faults)),
        "TELEMETRY_PERIOD": str(telemetry_period),
        "HEARTBEAT_PERIOD": str(heartbeat_period),
        "POD_DURATION": pod_duration,
        "WORK_DIR": str(home() / "pods"),
    }
    env = {
        **os.environ,
        "NATS_URL": endpoints.nats_url,
        "REDIS_URL": endpoints.redis_url,
        **{f"NODE_AGENT_{key}": value for key, value in settings.items()},
    }
    count = len(node_names) or nodes
    click.echo(f"node-agent for {cluster}: {count} {mode}-mode nodes", err=True)
    os.execve(sys.executable, [sys.executable, "-m", "hyperjob.services.node_agent"], env)


def _mode(ctx: click.Context, simulate: bool, runtime: str | None) -> str:
    if runtime is None:
        return "simulate" if simulate else "exec"
    if simulate and ctx.get_parameter_source("simulate") is not click.core.ParameterSource.DEFAULT:
        raise click.BadParameter("--simulate runs no pods: it takes no --runtime", param_hint="--runtime")
    return "container" if runtime == "podman" else "exec"


def agent_endpoints(cluster: str, node_names: list[str]) -> Endpoints:
    """The URLs the agent connects with: as its own node-agent user (created for it in a system
    with authentication: an agent speaks for its cluster only)."""
    from hyperjob.services.node_agent.app import agent_name  # noqa: PLC0415 - only to run an agent
    from hyperjob.services.node_agent.config import Settings  # noqa: PLC0415

    endpoints = resolve_endpoints()
    if not endpoints.secured:
        return endpoints
    from hyperjob.testkit.auth import Identity  # noqa: PLC0415

    from .up import grant  # noqa: PLC0415

    name = agent_name(Settings(cluster=cluster, node_names=node_names))
    grant(Identity(name=name, role="node-agent", cluster=cluster))
    return resolve_endpoints(as_user=name)


@agent.command("fault")
@click.argument("spec", metavar="KIND@NODE[,k=v]")
@click.pass_context
def fault(ctx: click.Context, spec: str) -> None:
    """Inject a fault into a running simulated fleet (kind ``clear`` undoes every fault of the node)."""
    from hyperjob.hwprobe.simfleet import parse_fault  # noqa: PLC0415 - only this subcommand needs it

    try:
        parsed = parse_fault(spec)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    cluster = ctx.obj["cluster"]
    message = events.InjectNodeFault(
        event_id=events.new_request_id(),
        occurred_at=time.time(),
        producer="hyperjob-cli",
        cluster=cluster,
        node=parsed.node,
        kind=parsed.kind,
        gpu=parsed.gpu,
        xid=parsed.xid,
        device=parsed.device,
        port=parsed.port,
    )

    async def send() -> None:
        client = await connect(resolve_endpoints(as_user=OPERATOR))  # injecting faults is the operator's
        try:
            # A fault for a node nobody serves would be dropped silently: refuse it here instead.
            if cluster not in await client.cluster_names():
                raise click.ClickException(f"cluster {cluster!r} not found (see `hyperjob get clusters`)")
            if parsed.node not in await client.node_statuses(cluster):
                raise click.ClickException(f"node {parsed.node!r} not found in cluster {cluster!r}")
            await client.bus.publish(subjects.node_fault(cluster), events.encode(message), msg_id=message.event_id)
        finally:
            await client.close()

    asyncio.run(send())
    click.echo(f"{parsed.kind} injected into {cluster}/{parsed.node}")


@click.command()
@click.argument("pod")
@click.option("--follow", "-f", is_flag=True, help="keep printing new output until Ctrl-C")
@click.option("--cluster", default="", help="the pod's cluster, when two clusters have a pod of that name")
def logs(pod: str, follow: bool, cluster: str) -> None:
    """Print the output of pod POD (stdout and stderr, every restart) run by an exec- or
    container-mode agent on this machine."""
    with LogReader(find_log(home() / "pods", pod, cluster)) as log:
        while True:
            if chunk := log.read(final=not follow):
                click.echo(chunk, nl=False)
            elif not follow:
                return
            else:
                time.sleep(0.5)


def find_log(root: Path, pod: str, cluster: str = "") -> Path:
    """``<root>/<cluster>/<pod>/log``; a clear error when there is none or the name is ambiguous."""
    found = log_paths(root, pod, cluster)
    if not found:
        raise click.ClickException(
            f"no log for pod {pod!r} under {root} (logs exist only for pods of exec- or container-mode agents "
            "on this machine)"
        )
    if len(found) > 1:
        clusters = ", ".join(p.parent.parent.name for p in found)
        raise click.ClickException(f"pod {pod!r} exists in several clusters ({clusters}): pass --cluster")
    return found[0]


def _check_faults(faults: tuple[str, ...]) -> None:
    from hyperjob.hwprobe.simfleet import parse_fault  # noqa: PLC0415 - keep CLI start-up light

    for text in faults:
        try:
            parse_fault(text)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--fault") from None


def _json(value: object) -> str:
    return msgspec.json.encode(value).decode()
