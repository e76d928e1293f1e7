"""Wiring: pod commands, fault commands, heartbeats, telemetry and (simulate mode) the pod clock."""

from __future__ import annotations

import hashlib
import time

import msgspec

import api
import events
import hwprobe
from events import subjects
from servicekit import Runtime

from .config import Settings
from .handlers import NodeAgent, node_names
from .sensors import NoSensors, RealSensors, Sensors, SimulatedSensors


def build_sensors(settings: Settings) -> Sensors:
    source = settings.telemetry
    if source == "auto":
        source = "simulated" if settings.mode == "simulate" else "real"
    if source == "off":
        return NoSensors()
    if source == "real":
        return RealSensors(hwprobe.NvmlReader(xid_hold=settings.xid_hold), settings.infiniband_sysfs)
    gpus = int(api.parse_resource_list(settings.allocatable).get("nvidia.com/gpu", 0))
    shape = settings.fleet_shape
    if gpus != shape.gpus_per_node:  # the node's allocatable is the truth about its GPU count
        shape = msgspec.structs.replace(shape, gpus_per_node=gpus)
    return SimulatedSensors(settings.cluster, node_names(settings), shape, settings.faults, settings.seed, time.time())


def consumer_name(settings: Settings) -> str:
    """The agent's durable consumer. The agent that runs a cluster's whole (generated) fleet keeps
    ``node-agent-<cluster>``; an agent of named nodes (one per real node) gets its own, so every
    agent sees every pod command of the cluster and takes those for its nodes."""
    if not settings.node_names:
        return f"node-agent-{settings.cluster}"
    digest = hashlib.sha1(",".join(sorted(settings.node_names)).encode()).hexdigest()[:10]
    return f"node-agent-{settings.cluster}-{digest}"


async def build(settings: Settings, runtime: Runtime) -> NodeAgent:
    agent = NodeAgent(runtime, settings, build_sensors(settings))
    await agent.load()
    await agent.heartbeat()
    await agent.telemetry()
    c, durable = settings.cluster, consumer_name(settings)
    await runtime.subscribe(durable, [subjects.start_pod(c), subjects.stop_pod(c)], {
        events.StartPod: agent.on_start,
        events.StopPod: agent.on_stop,
    })
    await runtime.subscribe(f"{durable}-faults", subjects.node_fault(c), {events.InjectNodeFault: agent.on_fault})
    runtime.every(settings.heartbeat_period, agent.heartbeat, "heartbeat")
    if not isinstance(agent.sensors, NoSensors):
        runtime.every(settings.telemetry_period, agent.telemetry, "telemetry")
    if settings.mode == "simulate":
        runtime.every(settings.tick_period, agent.advance, "pod-clock")
    else:
        runtime.spawn(agent.guard, "exec-guard")
    return agent
