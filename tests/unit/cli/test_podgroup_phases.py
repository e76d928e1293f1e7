"""What ``get podgroups``, ``get queues`` and the dashboard's ``hyperjob_queue_podgroups`` say of
finished jobs: their podgroups are Completed, not left Running (issue 32, item 1).

The jobs run through the real services under the simulator; the views then read its store, as
``get`` reads Redis."""

from __future__ import annotations

import asyncio
from typing import Any

from hyperjob.cli import views
from hyperjob.dashboard import metrics
from hyperjob.simulator.engine import Engine
from hyperjob.simulator.scenario import load
from tests.unit.cli import simulated


def job(name: str, *, extra: str = "", annotations: str = "") -> str:
    return f"""\
  - at: 0s
    create:
      apiVersion: batch.volcano.sh/v1alpha1
      kind: Job
      metadata: {{name: {name}}}
      spec:{extra}
        tasks:
        - name: w
          replicas: 1
          template:
            metadata: {{annotations: {{{annotations}}}}}
            spec:
              restartPolicy: Never
              containers:
              - {{name: main, image: busybox, resources: {{requests: {{cpu: "1"}}}}}}
"""


SCENARIO = (
    """\
apiVersion: hyperjob.io/v1alpha1
kind: Scenario
metadata: {name: finished-podgroups}
spec:
  clusters:
  - name: cluster-a
    nodes: [{name: n, allocatable: {cpu: "8", memory: 8Gi}}]
  events:
"""
    + job("done", annotations="hyperjob.io/sim-duration: 10s")
    + job(
        "broken",
        extra="\n        maxRetry: 1\n        policies: [{event: PodFailed, action: RestartJob}]",
        annotations='hyperjob.io/sim-duration: 10s, hyperjob.io/sim-exit-code: "1"',
    )
    + job("stopped")
    + job("busy")
    + """\
  - at: 20s
    command: {kind: Job, name: stopped, action: abort}
  until: 60s
"""
)


async def _after_the_run() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    engine = Engine(load(SCENARIO))
    result = await engine.run()
    assert {j["name"]: j["phase"] for j in result["jobs"]} == {
        "done": "Completed",
        "broken": "Failed",
        "stopped": "Aborted",
        "busy": "Running",
    }
    client: Any = simulated.Reader(engine.bus, engine.store, ["cluster-a"])
    return await views.podgroups(client, None), await views.queues(client, None)


def test_the_podgroups_of_finished_jobs_are_completed_and_counted_by_no_queue_as_running() -> None:
    groups, queues = asyncio.run(_after_the_run())

    assert {g["name"]: g["phase"] for g in groups} == {
        "done": "Completed",
        "broken": "Completed",
        "stopped": "Completed",
        "busy": "Running",
    }
    default = next(q for q in queues if q["name"] == "default")
    assert default["podgroups"] == {"inqueue": 0, "pending": 0, "running": 1}
    podgroups = next(f for f in metrics.queue_families(queues) if f.name == "hyperjob_queue_podgroups")
    running = [(s.labels["queue_name"], s.value) for s in podgroups.samples if s.labels["phase"] == "running"]
    assert running == [("default", 1.0)]
