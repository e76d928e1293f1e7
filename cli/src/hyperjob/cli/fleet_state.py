"""What ``hyperjob up`` keeps of an earlier life in its ``HYPERJOB_HOME``, and what it forgets.

``down`` keeps the state (NATS' JetStream store and Redis' data, under the home): the next ``up``
goes on with the same HyperJobs. ``down --purge`` and ``up --fresh`` reset it (the credentials,
the people ``user add`` added and the logs stay). A fleet changes with ``up --config``: the nodes
and clusters the new fleet no longer has are forgotten before any service starts (their latest
node status, telemetry, heartbeats and capacity summaries), so no scheduler takes a node of the
old fleet for Ready and nothing is bound to it.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping

from hyperjob import events
from hyperjob.bus.natsbus import NatsBus
from hyperjob.events import subjects
from hyperjob.services.node_agent.config import Settings as AgentSettings
from hyperjob.services.node_agent.handlers import node_specs

from .config import UpConfig, endpoints_file, home, services_file

# The parts of a home that are the system's state (the rest: credentials, logs, the lock).
STATE_DIRS = ("nats", "redis")


def purge_state() -> list[str]:
    """Remove the system's state from the home (nothing may run there); what was removed."""
    removed = []
    for name in STATE_DIRS:
        path = home() / name
        if path.exists():
            shutil.rmtree(path)
            removed.append(str(path))
    for path in (endpoints_file(), services_file()):
        path.unlink(missing_ok=True)
    return removed


def fleet_nodes(config: UpConfig) -> dict[str, set[str]]:
    """Each cluster's node names, as its node-agent will name them from what ``up`` gives it."""
    return {
        c.name: {spec.name for spec in node_specs(AgentSettings(cluster=c.name, nodes=c.nodes))}
        for c in config.clusters
    }


async def forget_removed_nodes(operator_url: str, fleet: Mapping[str, set[str]]) -> list[str]:
    """Forget every node (``cluster/node``) and cluster that ``fleet`` no longer has: their latest
    values go from the streams. Returns what was forgotten, in order."""
    bus = await NatsBus.connect(operator_url, subjects.STREAMS, name="hyperjob-up")
    try:
        return await _forget(bus, fleet)
    finally:
        await bus.close()


async def _forget(bus: NatsBus, fleet: Mapping[str, set[str]]) -> list[str]:
    decoder = events.decoder(events.NodeStatus)
    forgotten = []
    for subject, delivery in sorted((await bus.last_per_subject("nodestatus.>")).items()):
        status = decoder.decode(delivery.data)
        if status.node in fleet.get(status.cluster, set()):
            continue
        for gone in (
            subject,
            subjects.gpu_telemetry(status.cluster, status.node),
            subjects.fabric_telemetry(status.cluster, status.node),
        ):
            await bus.purge(gone)
        forgotten.append(f"{status.cluster}/{status.node}")
    for subject in sorted(await bus.last_per_subject(subjects.CAPACITY_ALL)):
        cluster = subject.removeprefix("capacity.cluster.")
        if cluster not in fleet:
            await bus.purge(subject)
            for beat in await bus.last_per_subject(subjects.heartbeats(cluster)):
                await bus.purge(beat)
            forgotten.append(cluster)
    return forgotten
