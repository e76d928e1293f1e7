"""The services of a scenario's fleet: every instance, its settings, and how it is built.

Per cluster: a node-agent (the scenario's nodes, as declared), a cluster-scheduler (the
scenario's scheduler conf and period) and a job-controller; for the fleet: the splitter, the
global-scheduler and the status-aggregator. Each is built by its service's own ``build`` on a
runtime over the in-process bus and store and the virtual clock — the same code that runs live.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

import cluster_scheduler.app
import cluster_scheduler.config
import global_scheduler.app
import global_scheduler.config
import job_controller.app
import job_controller.config
import node_agent.app
import node_agent.config
import splitter.app
import splitter.config
import status_aggregator.app
import status_aggregator.config
from servicekit import instance_name

from .scenario import ClusterSpec, Scenario

Build = Callable[[Any, Any], Awaitable[Any]]


class InstancePlan(msgspec.Struct, frozen=True, kw_only=True):
    """One service instance of the fleet: which service, its settings, its name, its cluster."""

    service: str
    name: str
    settings: Any
    cluster: str = ""

    @property
    def build(self) -> Build:
        return _BUILDS[self.service]


_BUILDS: dict[str, Build] = {
    "node-agent": node_agent.app.build, "cluster-scheduler": cluster_scheduler.app.build,
    "job-controller": job_controller.app.build, "splitter": splitter.app.build,
    "global-scheduler": global_scheduler.app.build, "status-aggregator": status_aggregator.app.build,
}


def plan_instances(scenario: Scenario) -> list[InstancePlan]:
    """Every instance, in the order they start: the nodes first, then each cluster's controllers,
    then the fleet's services (each finds the others' latest values when it starts)."""
    period = f"{scenario.period!r}s"
    plans = [_agent(c) for c in scenario.clusters]
    for c in scenario.clusters:
        cs = cluster_scheduler.config.Settings(cluster=c.name, schedule_period=period,
                                               scheduler_conf=scenario.scheduler_conf or "", labels=dict(c.labels))
        jc = job_controller.config.Settings(cluster=c.name, ssh_keys="deterministic")
        plans += [_plan("cluster-scheduler", cs, c.name), _plan("job-controller", jc, c.name)]
    plans += [
        _plan("splitter", splitter.config.Settings(replan_period=scenario.period)),
        _plan("global-scheduler", global_scheduler.config.Settings(retry_period=scenario.period)),
        _plan("status-aggregator", status_aggregator.config.Settings()),
    ]
    return plans


def _agent(cluster: ClusterSpec) -> InstancePlan:
    specs = [node_agent.config.NodeSpec(name=n.name, allocatable=dict(n.allocatable), labels=dict(n.labels),
                                        taints=[msgspec.to_builtins(t) for t in n.taints]) for n in cluster.nodes]
    settings = node_agent.config.Settings(cluster=cluster.name, node_specs=specs, telemetry="off",
                                          pod_duration="never", heartbeat_period=2.0)
    return InstancePlan(service="node-agent", name=node_agent.app.agent_name(settings), settings=settings,
                        cluster=cluster.name)


def _plan(service: str, settings: Any, cluster: str = "") -> InstancePlan:
    return InstancePlan(service=service, name=instance_name(service, settings), settings=settings, cluster=cluster)
