"""The whole system in-process on real JetStream and Redis: every service of a two-cluster fleet
(per cluster a node-agent, a cluster-scheduler and a job-controller; the splitter, the
global-scheduler and the status-aggregator), each its own ``build`` on its own runtime. A HyperJob
split across both clusters runs to Completed: admitted, planned, held as one cross-cluster gang,
started — each pod once, on a node of its child's cluster, with its rank in the HyperJob's world —
and every pod's resources given back at the end."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from hyperjob import events, records
from hyperjob.events import subjects
from hyperjob.services.status_aggregator.domain import AggregateDoc
from tests.service import service_helpers as sh

pytestmark = pytest.mark.service

HJ = "llm"
CLUSTERS = ("c1", "c2")


async def apply(bus: Any, probe: sh.Probe, manifest: dict[str, Any]) -> None:
    msg = sh.apply(manifest)
    await sh.send(bus, subjects.APPLY, msg)
    [answer] = await probe.wait(subjects.result(msg.event_id))
    assert isinstance(answer, events.RequestAccepted), answer


async def phase(store: Any, name: str, wanted: str, timeout: float = 60.0) -> AggregateDoc:
    return await sh.doc(
        store, records.HYPERJOB_STATUS, name, AggregateDoc, timeout=timeout, where=lambda d: d.phase == wanted
    )


async def test_a_hyperjob_across_two_clusters_runs_to_completed_each_pod_started_once_with_its_rank(
    bus, store, probe
) -> None:
    async with sh.Fleet(bus, store, CLUSTERS, nodes=2):
        await apply(bus, probe, sh.queue_manifest("global-ai"))
        manifest = sh.hyperjob_manifest(
            HJ,
            {"c1": 3, "c2": 3},
            queue="global-ai",
            duration="1s",
            plugins={"pytorch": ["--master=worker", "--port=23456"]},
        )
        await apply(bus, probe, manifest)
        done = await phase(store, HJ, "Completed")
        assert [c["type"] for c in done.status["conditions"]] == ["Completed"]
        assert done.status["placement"] == {"c1": 3, "c2": 3}
        for c in CLUSTERS:  # every pod's resources are given back
            await sh.until(lambda c=c: _no_bindings(store, c), what=f"no bindings left in {c}")

    starts = {
        c: [p for m in await probe.decoded(subjects.start_pods(c), events.StartPods) for p in m.pods] for c in CLUSTERS
    }
    pods = [p for c in CLUSTERS for p in starts[c]]
    assert len(pods) == 6 and max(Counter(p.pod for p in pods).values()) == 1  # each pod started once
    for c in CLUSTERS:
        assert all(p.node.startswith(f"{c}-node-") for p in starts[c])
    ranks = sorted(int(p.env["HYPERJOB_RANK"]) for p in pods)
    assert ranks == list(range(6)) and {p.env["HYPERJOB_WORLD_SIZE"] for p in pods} == {"6"}
    assert {p.env["RANK"] for p in pods} == {str(r) for r in range(6)} and {p.env["WORLD_SIZE"] for p in pods} == {"6"}
    master = {p.env["MASTER_ADDR"] for p in pods}
    assert len(master) == 1 and master.pop().startswith(f"{HJ}-")  # one master for the whole world

    for c in CLUSTERS:
        reports = [r for m in await probe.decoded(subjects.pod_phases(c), events.PodPhasesReported) for r in m.reports]
        assert Counter((r.pod, r.phase) for r in reports) == Counter(
            {(p.pod, phase): 1 for p in starts[c] for phase in ("Running", "Succeeded")}
        )
        phases = [m.new for m in await probe.decoded(subjects.job_phase(c), events.JobPhaseChanged)]
        assert phases == ["Pending", "Running", "Completed"]
        [held] = [m for m in await probe.decoded(subjects.RESERVATION_HELD, events.ReservationHeld) if m.cluster == c]
        assert (held.hyperjob, held.held, held.attempt) == (HJ, True, 1)
        controls = await probe.decoded(subjects.gang_control(c), events.GangControl)
        assert [g.action for g in controls] == ["start"]
    assert await probe.messages("dlq.>") == []


async def _no_bindings(store: Any, cluster: str) -> bool:
    return await store.allocations(cluster) == {}
