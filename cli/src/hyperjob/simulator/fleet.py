"""The services of a scenario's fleet: every instance, its settings, and how it is built.

Per cluster: a node-agent (the scenario's nodes, as declared), a cluster-scheduler (the
scenario's scheduler conf and period) and a job-controller; for the fleet: the splitter, the
global-scheduler, the status-aggregator and the workflow-controller (CronJobs, JobFlows). Each is
built by its service's own ``build`` on a runtime over the in-process bus and store and the virtual
clock — the same code that runs live.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from hyperjob.schedcore import DEFAULT_CONF_TEXT
from hyperjob.servicekit import instance_name
from hyperjob.services.cluster_scheduler import app as cs_app
from hyperjob.services.cluster_scheduler import config as cs_config
from hyperjob.services.global_scheduler import app as gs_app
from hyperjob.services.global_scheduler import config as gs_config
from hyperjob.services.job_controller import app as jc_app
from hyperjob.services.job_controller import config as jc_config
from hyperjob.services.node_agent import app as na_app
from hyperjob.services.node_agent import config as na_config
from hyperjob.services.splitter import app as sp_app
from hyperjob.services.splitter import config as sp_config
from hyperjob.services.status_aggregator import app as sa_app
from hyperjob.services.status_aggregator import config as sa_config
from hyperjob.services.workflow_controller import app as wc_app
from hyperjob.services.workflow_controller import config as wc_config

from .scenario import ClusterSpec, Scenario

# Each service's ``app.build(settings, runtime)``: the services' Settings and apps are types of
# their own (one per service, no common base), so a table of all of them holds them as Any.
Build = Callable[[Any, Any], Awaitable[Any]]


class InstancePlan(msgspec.Struct, frozen=True, kw_only=True):
    """One service instance of the fleet: which service, its settings, its name, its cluster."""

    service: str
    name: str
    settings: Any  # the service's own Settings struct (see ``Build``)
    cluster: str = ""

    @property
    def build(self) -> Build:
        return _BUILDS[self.service]


# One per service of ``events.services`` (tests/unit/deploy/test_service_registry.py checks it).
_BUILDS: dict[str, Build] = {
    "node-agent": na_app.build,
    "cluster-scheduler": cs_app.build,
    "job-controller": jc_app.build,
    "splitter": sp_app.build,
    "global-scheduler": gs_app.build,
    "status-aggregator": sa_app.build,
    "workflow-controller": wc_app.build,
}


def plan_instances(scenario: Scenario) -> list[InstancePlan]:
    """Every instance, in the order they start: the nodes first, then each cluster's controllers,
    then the fleet's services (each finds the others' latest values when it starts)."""
    period = f"{scenario.period!r}s"
    # Without a schedulerConf a scenario runs Volcano's default conf (scenario-format.md), not the
    # live default that adds the fragmentation-aware GPU scorer.
    plans = [_agent(c) for c in scenario.clusters]
    for c in scenario.clusters:
        cs = cs_config.Settings(
            cluster=c.name,
            schedule_period=period,
            scheduler_conf=scenario.scheduler_conf or DEFAULT_CONF_TEXT,
            labels=dict(c.labels),
            prices=dict(c.prices),
            data_sets=list(c.data_sets),
            data_links=dict(c.data_links),
        )
        jc = jc_config.Settings(cluster=c.name, ssh_keys="deterministic")
        plans += [_plan("cluster-scheduler", cs, c.name), _plan("job-controller", jc, c.name)]
    plans += [
        _plan("splitter", sp_config.Settings(replan_period=scenario.period)),
        _plan("global-scheduler", gs_config.Settings(retry_period=scenario.period)),
        _plan("status-aggregator", sa_config.Settings()),
        _plan("workflow-controller", wc_config.Settings()),
    ]
    return plans


def _agent(cluster: ClusterSpec) -> InstancePlan:
    specs = [
        na_config.NodeSpec(
            name=n.name,
            allocatable=dict(n.allocatable),
            labels=dict(n.labels),
            taints=[msgspec.to_builtins(t) for t in n.taints],
        )
        for n in cluster.nodes
    ]
    settings = na_config.Settings(
        cluster=cluster.name,
        node_specs=specs,
        telemetry="off",
        pod_duration="never",
        heartbeat_period=2.0,
        # No self-fencing (node_agent.fencing): a cluster cut off here (``clusterDown``) is frozen
        # whole, its pods and its agent's clock with it, so nothing of it runs while it is away.
        fleet_lease=math.inf,
    )
    return InstancePlan(service="node-agent", name=na_app.agent_name(settings), settings=settings, cluster=cluster.name)


def _plan(service: str, settings: Any, cluster: str = "") -> InstancePlan:
    return InstancePlan(service=service, name=instance_name(service, settings), settings=settings, cluster=cluster)
