"""A system for the CLI's tests: the real services under the simulator (``hyperjob simulate``'s
engine), read afterwards through the same views and commands a person uses, as they read
JetStream and Redis; and the manifests the tests run."""

from __future__ import annotations

import asyncio
from typing import Any

from hyperjob.bus.memory import InMemoryBus
from hyperjob.client import Client
from hyperjob.simulator.engine import Engine
from hyperjob.simulator.scenario import load
from hyperjob.store.memory import InMemoryStore

CONTAINER = '{name: main, image: busybox, resources: {requests: {cpu: "%s"}}}'


class Reader:
    """The reads ``views`` makes of a client, over the simulator's log and store."""

    def __init__(self, bus: InMemoryBus, store: InMemoryStore, clusters: list[str]) -> None:
        self.bus = bus
        self.store = store
        self.clusters = clusters

    async def docs(self, kind: str, type_: type[Any]) -> dict[str, Any]:
        return {name: doc.decode(type_) for name, doc in sorted((await self.store.list(kind)).items())}

    async def doc(self, kind: str, name: str, type_: type[Any]) -> Any:
        stored = await self.store.get(kind, name)
        return stored.decode(type_) if stored is not None else None

    async def cluster_names(self) -> list[str]:
        return self.clusters

    # Read from the log as the client reads it.
    node_statuses = Client.node_statuses
    capacities = Client.capacities


def run(text: str) -> Reader:
    """Run a scenario to its end; the system as it is then."""

    async def go() -> Reader:
        scenario = load(text)
        engine = Engine(scenario)
        await engine.run()
        return Reader(engine.bus, engine.store, [c.name for c in scenario.clusters])

    return asyncio.run(go())


def scenario(name: str, cpu: str, *events: str, extra: str = "", until: str = "30s") -> str:
    """One cluster of one node with ``cpu`` CPUs; ``events`` as ``hyperjob``/``job`` build them."""
    return f"""\
apiVersion: hyperjob.io/v1alpha1
kind: Scenario
metadata: {{name: {name}}}
spec:
  clusters:
  - name: cluster-a
    nodes: [{{name: n, allocatable: {{cpu: "{cpu}", memory: 8Gi}}}}]
{extra}  events:
{"".join(events)}  until: {until}
"""


def hyperjob(name: str, namespace: str, duration: str = "10s") -> str:
    """A HyperJob of one child of two 1-CPU pods on cluster-a, succeeding after ``duration``."""
    return f"""\
  - at: 0s
    create:
      apiVersion: batch.volcano.sh/v1alpha1
      kind: HyperJob
      metadata: {{name: {name}, namespace: {namespace}}}
      spec:
        template:
          apiVersion: batch.volcano.sh/v1alpha1
          kind: Job
          spec:
            minAvailable: 2
            tasks:
            - name: w
              replicas: 2
              template:
                metadata: {{annotations: {{hyperjob.io/sim-duration: {duration}}}}}
                spec:
                  restartPolicy: Never
                  containers: [{CONTAINER % "1"}]
        splitPolicy: {{strategy: ByCluster, clusters: [{{name: cluster-a, replicas: 2}}]}}
"""


def job(name: str, namespace: str, cpu: str, queue: str = "default", at: str = "0s") -> str:
    """A plain Job of one pod asking ``cpu`` CPUs, created at ``at``, succeeding after 10 s."""
    return f"""\
  - at: {at}
    create:
      apiVersion: batch.volcano.sh/v1alpha1
      kind: Job
      metadata: {{name: {name}, namespace: {namespace}}}
      spec:
        queue: {queue}
        tasks:
        - name: w
          replicas: 1
          template:
            metadata: {{annotations: {{hyperjob.io/sim-duration: 10s}}}}
            spec:
              restartPolicy: Never
              containers: [{CONTAINER % cpu}]
"""


def command(at: str, name: str, action: str, kind: str = "HyperJob") -> str:
    return f"  - at: {at}\n    command: {{kind: {kind}, name: {name}, action: {action}}}\n"
