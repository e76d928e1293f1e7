"""The servicekit pipeline on real JetStream and Redis: decode → handler → one atomic apply with the
dedup marker → publish the recorded outputs → ack.

The last test runs every real service in-process on one bus and store. Elsewhere a tiny service
stands in for the real ones: ``DeleteObject(kind="Counter", name=n)`` increments
document ``counter/n`` (version +1 per effect) and publishes two outputs (the request's answer and
a ``HyperJobDeleted``). Faults are injected with flags that fire on the first attempt only.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

import events
import records
from bus import PublishError
from cluster_scheduler.app import build as build_cluster_scheduler
from cluster_scheduler.config import Settings as ClusterSchedulerSettings
from events import subjects
from global_scheduler.app import build as build_global_scheduler
from global_scheduler.config import Settings as GlobalSchedulerSettings
from job_controller.app import build as build_job_controller
from job_controller.config import Settings as JobControllerSettings
from node_agent.app import build as build_node_agent
from node_agent.config import Settings as NodeAgentSettings
from servicekit import Cause, Reaction, Runtime, emit
from splitter.app import build as build_splitter
from splitter.config import Settings as SplitterSettings
from status_aggregator.app import build as build_status_aggregator
from status_aggregator.config import Settings as StatusAggregatorSettings
from store import Write

sys.path.insert(0, str(Path(__file__).parent))
import service_helpers as sh  # noqa: E402

pytestmark = pytest.mark.service

DURABLE = "pipeline-test"
KIND = "counter"


class CounterDoc(msgspec.Struct, frozen=True):
    count: int
    last: str


class CounterService:
    """Handles DeleteObject: count it in a document, answer, announce."""

    def __init__(self, runtime: Runtime, fail_handler_once: bool = False) -> None:
        self.rt = runtime
        self.calls: list[str] = []
        self.fail_handler_once = fail_handler_once

    async def on_delete(self, msg: events.DeleteObject) -> Reaction:
        self.calls.append(msg.event_id)
        if self.fail_handler_once:
            self.fail_handler_once = False
            raise RuntimeError("injected: handler crashed before ack")
        stored = await self.rt.store.get(KIND, msg.name)
        count = stored.decode(CounterDoc).count if stored else 0
        reaction = Reaction(writes=[Write.put(KIND, msg.name, CounterDoc(count + 1, msg.event_id),
                                              stored.version if stored else 0)])
        reaction.publish(subjects.result(msg.event_id), emit(events.RequestAccepted, msg, "answer", "test",
                                                             kind=msg.kind, name=msg.name, outcome="deleted"))
        return reaction.publish(subjects.HYPERJOB_DELETED, emit(events.HyperJobDeleted, msg, "deleted", "test",
                                                                name=msg.name))


async def start(bus: Any, store: Any, fault: str = "none") -> tuple[Runtime, CounterService]:
    runtime = Runtime("pipeline", sh.FlakyBus(bus) if fault == "publish" else bus,
                      sh.FlakyStore(store) if fault == "store" else store)
    service = CounterService(runtime, fail_handler_once=fault == "handler")
    await runtime.subscribe(DURABLE, subjects.DELETE, {events.DeleteObject: service.on_delete},
                            backoff=[0.05], max_deliver=4)
    return runtime, service


def counter_request(name: str = "c1") -> events.DeleteObject:
    return sh.message(events.DeleteObject, kind="Counter", name=name)


async def test_same_message_delivered_twice_has_one_effect(bus, store, probe) -> None:
    runtime, service = await start(bus, store)
    msg = counter_request()
    await sh.send(bus, subjects.DELETE, msg)
    await sh.send(bus, subjects.DELETE, msg, copy=1)
    await sh.until(lambda: len(service.calls) == 2, what="both deliveries handled")
    await probe.settled(DURABLE, subjects.DELETE)
    await runtime.stop()

    stored = await store.get(KIND, "c1")
    assert stored is not None and stored.version == 1 and stored.decode(CounterDoc) == CounterDoc(1, msg.event_id)
    answers = await probe.messages(subjects.result(msg.event_id))
    announced = await probe.messages(subjects.HYPERJOB_DELETED)
    assert len(answers) == 1 and len(announced) == 1
    assert answers[0].msg_id == events.derive_id(msg.event_id, "answer")
    assert await probe.messages(subjects.dlq(DURABLE)) == []


async def test_distinct_messages_each_have_their_effect(bus, store, probe) -> None:
    runtime, _ = await start(bus, store)
    first, second = counter_request(), counter_request()
    await sh.send(bus, subjects.DELETE, first)
    await sh.send(bus, subjects.DELETE, second)
    await probe.settled(DURABLE, subjects.DELETE)
    await runtime.stop()
    stored = await store.get(KIND, "c1")
    assert stored.version == 2 and stored.decode(CounterDoc) == CounterDoc(2, second.event_id)
    assert len(await probe.messages(subjects.HYPERJOB_DELETED)) == 2


@pytest.mark.parametrize("fault", ["none", "handler", "store", "publish"],
                         ids=["clean-run", "handler-raises-before-ack", "store-fails", "publish-fails-after-write"])
async def test_a_failed_first_attempt_is_redelivered_and_ends_like_a_clean_run(bus, store, probe, fault) -> None:
    runtime, service = await start(bus, store, fault)
    msg = counter_request()
    await sh.send(bus, subjects.DELETE, msg)
    await probe.wait(subjects.result(msg.event_id), events.RequestAccepted)
    await probe.settled(DURABLE, subjects.DELETE)
    await runtime.stop()

    # The same final state whatever failed on the way: one effect, each output stored once.
    stored = await store.get(KIND, "c1")
    assert stored is not None and stored.version == 1 and stored.decode(CounterDoc) == CounterDoc(1, msg.event_id)
    answers = await probe.messages(subjects.result(msg.event_id))
    announced = await probe.messages(subjects.HYPERJOB_DELETED)
    assert [m.msg_id for m in answers] == [events.derive_id(msg.event_id, "answer")]
    assert [m.msg_id for m in announced] == [events.derive_id(msg.event_id, "deleted")]
    assert await probe.messages(subjects.dlq(DURABLE)) == []
    assert len(service.calls) == (1 if fault == "none" else 2)


@pytest.mark.parametrize("payload", [
    b'{"type":"hj.object.delete.v1","event_id":"e-1","kind":"Counter"}',
    b'{"type":"hj.object.delete.v1","event_id":"e-1","kind":"Counter","name":7}',
    b'not json at all',
], ids=["missing-field", "wrong-field-type", "not-json"])
async def test_malformed_payload_of_a_handled_type_goes_to_the_dlq(bus, store, probe, payload) -> None:
    runtime, service = await start(bus, store)
    await bus.publish(subjects.DELETE, payload, msg_id="bad-1")
    dead = await sh.until(lambda: probe.messages(subjects.dlq(DURABLE)), what="dead letter")
    await probe.settled(DURABLE, subjects.DELETE)
    await runtime.stop()
    assert [m.data for m in dead] == [payload]
    assert service.calls == [] and await store.list(KIND) == {}


async def test_message_of_an_unhandled_type_is_acked_and_ignored(bus, store, probe) -> None:
    runtime, service = await start(bus, store)
    other = sh.message(events.CommandHyperJob, name="h", action="suspend")
    await sh.send(bus, subjects.DELETE, other)
    await probe.settled(DURABLE, subjects.DELETE)
    # Then a handled one, to show the consumer carries on behind it.
    msg = counter_request()
    await sh.send(bus, subjects.DELETE, msg)
    await probe.settled(DURABLE, subjects.DELETE)
    await runtime.stop()
    assert service.calls == [msg.event_id]
    assert await probe.messages(subjects.dlq(DURABLE)) == []
    assert (await store.get(KIND, "c1")).version == 1


async def test_stop_ends_a_periodic_loop_even_if_its_work_swallowed_the_cancellation(bus, store) -> None:
    runtime = Runtime("pipeline", bus, store)
    started, swallowed = asyncio.Event(), []

    async def work() -> None:
        started.set()
        if swallowed:
            await asyncio.sleep(30)
            return
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            swallowed.append(True)  # once, as a library call may (asyncio.wait_for's race on Python 3.11)

    runtime.every(0.01, work, "swallower")
    await asyncio.wait_for(started.wait(), sh.DEADLINE)
    await asyncio.wait_for(runtime.stop(), sh.DEADLINE)  # a hang here is the bug
    assert swallowed


async def test_outputs_of_periodic_work_whose_publish_failed_are_published_later(bus, store, probe) -> None:
    runtime = Runtime("pipeline", sh.FlakyBus(bus, failures=2), store)  # the commit's publish and one retry fail
    cause = Cause(event_id=events.derive_id("tick", "1"))
    reaction = Reaction(writes=[Write.put(KIND, "tick", CounterDoc(1, cause.event_id))])
    reaction.publish(subjects.HYPERJOB_DELETED, emit(events.HyperJobDeleted, cause, "deleted", "test", name="tick"))
    with pytest.raises(PublishError):
        await runtime.commit("periodic", cause.event_id, reaction)
    stored = await probe.wait(subjects.HYPERJOB_DELETED)
    await runtime.stop()
    assert [m.name for m in stored] == ["tick"]  # type: ignore[attr-defined]
    assert (await store.get(KIND, "tick")).version == 1


@contextlib.asynccontextmanager
async def whole_system(bus: Any, store: Any) -> AsyncIterator[None]:
    """Every service in-process on one bus and store, as `hyperjob up` runs them as processes:
    two clusters of two simulated 8-GPU nodes each."""
    runtimes: list[Runtime] = []

    async def run(name: str, build: Any, settings: Any) -> None:
        runtime = Runtime(name, bus, store)
        runtimes.append(runtime)
        await build(settings, runtime)

    try:
        for cluster in ("cluster-a", "cluster-b"):
            await run("node-agent", build_node_agent, NodeAgentSettings(
                cluster=cluster, nodes=2, heartbeat_period=0.2, tick_period=0.05, telemetry="off"))
            await run("cluster-scheduler", build_cluster_scheduler, ClusterSchedulerSettings(
                cluster=cluster, schedule_period="200ms", health_period=0.0))
            await run("job-controller", build_job_controller, JobControllerSettings(cluster=cluster, timer_period=0.1))
        await run("global-scheduler", build_global_scheduler, GlobalSchedulerSettings(retry_period=0.1))
        await run("splitter", build_splitter, SplitterSettings(replan_period=0.1))
        await run("status-aggregator", build_status_aggregator, StatusAggregatorSettings())
        await sh.until(lambda: _both_clusters(store), what="both clusters reported")
        yield
    finally:
        for runtime in runtimes:
            await runtime.stop()


async def request(bus: Any, probe: sh.Probe, msg: events.Message, subject: str) -> events.Message:
    await sh.send(bus, subject, msg)
    answer = (await probe.wait(subjects.result(msg.event_id)))[0]
    assert isinstance(answer, events.RequestAccepted), answer
    return answer


def short(manifest: dict[str, Any], template: dict[str, Any]) -> dict[str, Any]:
    template["tasks"][0]["template"]["metadata"]["annotations"]["hyperjob.io/sim-duration"] = "1s"
    return manifest


async def test_the_whole_chain_runs_a_hyperjob_across_two_clusters_to_completed(bus, store, probe) -> None:
    async with whole_system(bus, store):
        manifest = sh.hyperjob_manifest("hj", {"cluster-a": 3, "cluster-b": 3})
        short(manifest, manifest["spec"]["template"]["spec"])
        await request(bus, probe, sh.message(events.ApplyManifest, manifest=manifest), subjects.APPLY)
        done = await sh.doc(store, records.HYPERJOB_STATUS, "hj", records.HyperJobStatusDoc,
                            where=lambda d: d.phase in ("Completed", "Failed"), timeout=30.0)
        assert done.phase == "Completed", done.status
        assert done.status["placement"] == {"cluster-a": 3, "cluster-b": 3}
        started = await probe.decoded("job.pod.start.>", events.StartPod)
        assert sorted(s.env["HYPERJOB_RANK"] for s in started) == [str(r) for r in range(6)]
        assert len({s.pod for s in started}) == 6  # every pod started once


async def test_a_job_deleted_and_applied_again_under_the_same_name_runs_again(bus, store, probe) -> None:
    async with whole_system(bus, store):
        manifest = sh.job_manifest("again", replicas=2, duration="1s")
        for attempt in range(2):
            await request(bus, probe, sh.message(events.ApplyManifest, manifest=manifest), subjects.APPLY)
            await probe.wait("job.phase.>", events.JobPhaseChanged, count=attempt + 1,
                             where=lambda m: m.job == "again" and m.new == "Completed", timeout=30.0)
            await request(bus, probe, sh.message(events.DeleteObject, kind="Job", name="again"), subjects.DELETE)
            await probe.wait(subjects.HYPERJOB_DELETED, events.HyperJobDeleted, count=attempt + 1, timeout=30.0)
        started = await probe.decoded("job.pod.start.>", events.StartPod)
        assert len(started) == 4  # each incarnation's two pods, once each
        assert len({s.pod_uid for s in started}) == 4  # incarnations are told apart


async def _both_clusters(store: Any) -> bool:
    return sorted(await store.list(records.CLUSTER)) == ["cluster-a", "cluster-b"]


@pytest.mark.parametrize("clusters", [{"cluster-a": 2}, {"cluster-a": 2, "cluster-b": 2}],
                         ids=["one-cluster", "two-clusters-gang"])
async def test_a_hyperjob_whose_template_changes_runs_the_new_template(bus, store, probe, clusters) -> None:
    async with whole_system(bus, store):
        manifest = sh.hyperjob_manifest("hj", clusters)
        template = manifest["spec"]["template"]["spec"]
        template["tasks"][0]["template"]["metadata"]["annotations"]["hyperjob.io/sim-duration"] = "60s"
        await request(bus, probe, sh.message(events.ApplyManifest, manifest=manifest), subjects.APPLY)
        await sh.doc(store, records.HYPERJOB_STATUS, "hj", records.HyperJobStatusDoc,
                     where=lambda d: d.phase == "Running", timeout=30.0)
        short(manifest, template)  # the same children (names, clusters), a new template
        answer = await request(bus, probe, sh.message(events.ApplyManifest, manifest=manifest), subjects.APPLY)
        assert answer.outcome == "configured"  # type: ignore[attr-defined]
        done = await sh.doc(store, records.HYPERJOB_STATUS, "hj", records.HyperJobStatusDoc,
                            where=lambda d: d.phase in ("Completed", "Failed"), timeout=30.0)
        assert done.phase == "Completed", done.status
        dispatched = await probe.decoded("sched.child.dispatch.>", events.DispatchChild)
        children = [f"hj-job-{i}" for i in range(len(clusters))]
        assert sorted(d.child for d in dispatched) == sorted(children * 2)  # each child, then its replacement
