"""Fencing on the cluster side (issue 33): a cluster that gets no word from the fleet stops its
children's pods once its lease has lapsed, holds them while it stays lapsed, and starts them again
where they are once the fleet renews it. The services run in the simulator; the fleet's grants to
one cluster are dropped for a while (the fleet still hears the cluster and grants the others)."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from hyperjob import events, fleetcore, simulator
from hyperjob.events import subjects
from hyperjob.services.global_scheduler.leases import RENEW_STEP
from hyperjob.simulator.engine import Engine
from hyperjob.simulator.fleet import InstancePlan

SCENARIO = """
apiVersion: hyperjob.io/v1alpha1
kind: Scenario
metadata: {name: lease-lapses}
spec:
  clusters:
  - name: cluster-a
    nodes:
    - {name: a-node, allocatable: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "4"}}
  - name: cluster-b
    nodes:
    - {name: b-node, allocatable: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8"}}
  events:
  - at: 0s
    create:
      apiVersion: batch.volcano.sh/v1alpha1
      kind: Job
      metadata: {name: train}
      spec:
        tasks:
        - name: w
          replicas: 2
          template:
            spec:
              nodeSelector: {kubernetes.io/hostname: b-node}
              containers:
              - {name: w, image: train, resources: {requests: {cpu: "4", memory: 32Gi, nvidia.com/gpu: "1"}}}
  until: 90s
"""
CUT_FROM, CUT_TO = 10.0, 60.0  # the fleet's grants to cluster-b are lost in between
_DECODER = events.decoder(events.StopPods, events.StartPods)


class GrantsLost:
    """The global-scheduler's bus, less its grants to cluster-b while the clock is in the cut."""

    def __init__(self, bus: Any, now: Any) -> None:
        self._bus, self._now = bus, now

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._bus, name)
        if name != "publish_many":
            return attr

        async def publish_many(messages: Any, *a: Any, **k: Any) -> Any:
            cut = CUT_FROM <= self._now() < CUT_TO
            kept = [m for m in messages if not (cut and m[0] == subjects.fleet_lease("cluster-b"))]
            return await attr(kept, *a, **k)

        return publish_many


def run() -> list[tuple[float, str, list[str]]]:
    """(time, 'stop' | 'start', pods) for every StopPods / StartPods of cluster-b."""
    seen: list[tuple[float, str, list[str]]] = []

    class Cut(Engine):
        def bus_for(self, plan: InstancePlan) -> Any:
            return GrantsLost(self.bus, self.clock.now) if plan.service == "global-scheduler" else self.bus

    engine = Cut(simulator.load(SCENARIO))

    def observe(stream: str, subject: str, data: bytes, headers: dict[str, str]) -> None:
        if subject in (subjects.stop_pods("cluster-b"), subjects.start_pods("cluster-b")):
            message = _DECODER.decode(data)
            what = "stop" if isinstance(message, events.StopPods) else "start"
            seen.append((engine.clock.now(), what, sorted(p.pod for p in message.pods)))

    engine.bus.observers.append(observe)
    with simulator._quiet():
        result = asyncio.run(engine.run())
    assert [(p["name"], p["phase"]) for p in result["pods"]] == [("train-w-0", "Running"), ("train-w-1", "Running")]
    return seen


def test_a_lapsed_lease_stops_the_pods_and_a_renewed_one_starts_them_again() -> None:
    seen = run()
    pods = ["train-w-0", "train-w-1"]
    assert [(what, p) for _, what, p in seen] == [("start", pods), ("stop", pods), ("start", pods)]
    (started, _, _), (stopped, _, _), (restarted, _, _) = seen
    assert started < CUT_FROM
    # Stopped once the last lease (granted before the cut) lapsed, and before the fleet may move anything.
    assert CUT_FROM + fleetcore.FLEET_LEASE - RENEW_STEP - 1.0 <= stopped <= CUT_FROM + fleetcore.move_after() - 2.0
    assert CUT_TO <= restarted <= CUT_TO + 2.0


def test_the_stop_names_the_lapsed_lease() -> None:
    stops: list[events.StopPods] = []

    class Cut(Engine):
        def bus_for(self, plan: InstancePlan) -> Any:
            return GrantsLost(self.bus, self.clock.now) if plan.service == "global-scheduler" else self.bus

    engine = Cut(simulator.load(SCENARIO))
    engine.bus.observers.append(
        lambda stream, subject, data, headers: (
            stops.append(msgspec.json.decode(data, type=events.StopPods))
            if subject == subjects.stop_pods("cluster-b")
            else None
        )
    )
    with simulator._quiet():
        asyncio.run(engine.run())
    assert {p.reason for s in stops for p in s.pods} == {"FleetLeaseLapsed"}
