"""Wiring: pod commands, fault commands, node status and heartbeats, telemetry, pod timers."""

from __future__ import annotations

import hashlib
import math

import msgspec

from hyperjob import api, events, hwprobe
from hyperjob.events import subjects
from hyperjob.servicekit import Rank, Runtime

from . import fencing
from .config import Settings
from .handlers import NodeAgent, node_specs
from .sensors import NoSensors, RealSensors, Sensors, SimulatedSensors


def build_sensors(settings: Settings, started: float) -> Sensors:
    source = settings.telemetry
    if source == "auto":
        source = "simulated" if settings.mode == "simulate" else "real"
    if source == "off":
        return NoSensors(real=settings.mode != "simulate")
    if source == "real":
        return RealSensors(hwprobe.NvmlReader(xid_hold=settings.xid_hold), settings.infiniband_sysfs)
    specs = node_specs(settings)
    gpus = int(api.parse_resource_list(specs[0].allocatable).get("nvidia.com/gpu", 0)) if specs else 0
    shape = settings.fleet_shape
    if gpus != shape.gpus_per_node:  # the node's allocatable is the truth about its GPU count
        shape = msgspec.structs.replace(shape, gpus_per_node=gpus)
    refresh_periods = max(1, round(settings.telemetry_refresh / settings.telemetry_period))
    return SimulatedSensors(
        settings.cluster,
        [s.name for s in specs],
        shape,
        settings.faults,
        settings.seed,
        started,
        refresh_periods=refresh_periods,
    )


def agent_name(settings: Settings) -> str:
    """The agent's name and durable consumer. The agent that runs a cluster's whole (generated)
    fleet is ``node-agent-<cluster>``; an agent of named nodes (one per real node) gets its own,
    so every agent sees every pod command of the cluster and takes those for its nodes."""
    if not settings.node_names:
        return f"node-agent-{settings.cluster}"
    digest = hashlib.sha1(",".join(sorted(settings.node_names)).encode()).hexdigest()[:10]
    return f"node-agent-{settings.cluster}-{digest}"


async def build(settings: Settings, runtime: Runtime) -> NodeAgent:
    agent = NodeAgent(runtime, settings, build_sensors(settings, runtime.now()), agent_name(settings))
    c, durable = settings.cluster, agent_name(settings)
    runtime.subscribe(
        durable,
        [subjects.start_pods(c), subjects.stop_pods(c)],
        {
            events.StartPods: agent.on_start,
            events.StopPods: agent.on_stop,
        },
    )
    runtime.subscribe(f"{durable}-faults", subjects.node_fault(c), {events.InjectNodeFault: agent.on_fault})
    runtime.every(settings.heartbeat_period, agent.heartbeat, "heartbeat", rank=Rank.REPORT)
    if settings.self_fence and math.isfinite(settings.fleet_lease):  # (the simulator's frozen clusters: none)
        # Not under the lock: a beat or a commit stuck on an unreachable bus must not delay the fence.
        runtime.every(fencing.FENCE_CHECK_PERIOD, agent.check_fence, "fence", rank=Rank.REPORT, exclusive=False)
    if not isinstance(agent.sensors, NoSensors):
        runtime.every(settings.telemetry_period, agent.telemetry, "telemetry", rank=Rank.REPORT)
    runtime.kick("heartbeat")
    runtime.on_stop(agent.close)
    return agent
