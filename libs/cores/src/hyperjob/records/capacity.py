"""The fleet as the clusters' capacity summaries describe it, for the splitter and the
global-scheduler (each keeps its own, from the ``capacity.cluster.<c>`` stream). Pure."""

from __future__ import annotations

import msgspec

from hyperjob import api, events, fleetcore


class Capacity:
    """The latest summary of every cluster, stamped with when it arrived here.

    A cluster's ``last_report`` is the arrival of its latest summary that showed a Ready node, and
    liveness is judged against the newest summary from any cluster (``now``): a scheduler cut off
    from the bus receives nothing and so judges no cluster lost. When summaries resume after a
    break (the bus restarted, this scheduler was cut off), the break is not counted as any cluster's
    silence (``fleetcore.Hearing``): the first cluster to reconnect does not make the others
    look lost for the time nobody could be heard.

    ``nodes_heard`` is when each cluster's node-agents last beat with a live node: a silent cluster
    whose nodes beat on has a hung control plane, and its children stay (``fleetcore.failover``).

    A cluster's summary is the newest by the cluster's own time (``occurred_at``; of equal times,
    the last to arrive): one redelivered or held up on the bus arrives after a newer one, and would
    otherwise put back room taken since, or look like a new sign of life. Its arrival still counts
    as the fleet hearing (``now``): the bus delivers.
    """

    def __init__(self) -> None:
        self.clusters: dict[str, fleetcore.ClusterCapacity] = {}
        self.newest = 0.0
        self.hearing = fleetcore.Hearing(gap=fleetcore.CLUSTER_SILENCE_TIMEOUT / 3)
        self.nodes_heard: dict[str, float] = {}
        # The fleet lease's basis: each cluster's own time on its latest report that holds the lease
        # (a summary with a Ready node; a live node's beat, unless its control plane says none is Ready).
        self.basis: dict[str, float] = {}
        self.unready: set[str] = set()
        self.stamped: dict[str, float] = {}  # each cluster's own time on the summary kept

    def beat(self, msg: events.AgentHeartbeat, arrived: float) -> None:
        """An agent's beat: its cluster's nodes are alive when one of its nodes is not silent."""
        if msg.nodes > len(msg.silent):
            self.nodes_heard[msg.cluster] = max(arrived, self.nodes_heard.get(msg.cluster, arrived))
            if msg.cluster not in self.unready:
                self._hold(msg.cluster, msg.occurred_at)

    def _hold(self, cluster: str, at: float) -> None:
        self.basis[cluster] = max(at, self.basis.get(cluster, at))

    def report(self, msg: events.ClusterCapacityReported, arrived: float) -> bool:
        """Take a summary in; True when what placement sees changed."""
        if deaf := self.hearing.heard(arrived):
            self.clusters = {
                name: msgspec.structs.replace(
                    cap,
                    last_report=fleetcore.forgive(cap.last_report, deaf, arrived),
                    last_summary=fleetcore.forgive(cap.last_summary, deaf, arrived),
                )
                for name, cap in self.clusters.items()
            }
        self.newest = max(self.newest, arrived)
        if msg.occurred_at < self.stamped.get(msg.cluster, msg.occurred_at):
            return False  # older than the summary kept: what it says has changed since
        self.stamped[msg.cluster] = msg.occurred_at
        if msg.ready_nodes > 0:
            self.unready.discard(msg.cluster)
            self._hold(msg.cluster, msg.occurred_at)
        else:
            self.unready.add(msg.cluster)
        known = self.clusters.get(msg.cluster)
        last = arrived if msg.ready_nodes > 0 else (known.last_report if known is not None else arrived)
        capacity = msgspec.structs.replace(cluster_capacity(msg, last), last_summary=arrived)
        self.clusters[msg.cluster] = capacity
        return known is None or msgspec.structs.replace(
            known, last_report=0.0, last_summary=0.0
        ) != msgspec.structs.replace(capacity, last_report=0.0, last_summary=0.0)

    def now(self, clock: float) -> float:
        return self.newest if self.clusters else clock

    def live(self, now: float) -> dict[str, fleetcore.ClusterCapacity]:
        return fleetcore.live_clusters(self.clusters, now)


def cluster_capacity(msg: events.ClusterCapacityReported, last_report: float) -> fleetcore.ClusterCapacity:
    """A summary as fleetcore's ``ClusterCapacity`` (node classes with their counts)."""
    nodes = tuple(
        fleetcore.NodeCapacity(
            name=c.name,
            free=dict(c.free),
            allocatable=dict(c.allocatable),
            labels=dict(c.labels),
            taints=tuple(msgspec.convert(t, api.Taint) for t in c.taints),
            count=c.count,
        )
        for c in msg.node_classes
    )
    return fleetcore.ClusterCapacity(
        name=msg.cluster,
        labels=dict(msg.labels),
        free=dict(msg.free),
        allocatable=dict(msg.allocatable),
        nodes=nodes,
        last_report=last_report,
        ready=msg.ready_nodes > 0,
        links=dict(msg.links),
        prices=dict(msg.prices),
        data_sets=tuple(msg.data_sets),
        data_links=dict(msg.data_links),
    )
