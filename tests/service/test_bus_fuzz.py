"""A sample of the bus-surface fuzz (``tests/fuzz``) over real NATS and Redis: a cluster's
scheduler and node-agent, and the splitter, each built by its own ``build``, get poison on every
subject they consume or watch (their declared inputs). Every poison ends in the dead-letter
queue, no consumer is left holding a message, the store is unchanged, and a valid request sent
afterwards still takes effect."""

from __future__ import annotations

import contextlib
import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperjob import events, records
from hyperjob.bus import H_ORIGINAL_SUBJECT, subject_covers
from hyperjob.events import subjects
from hyperjob.services.cluster_scheduler.app import build as build_cluster_scheduler
from hyperjob.services.cluster_scheduler.config import Settings as ClusterSchedulerSettings
from hyperjob.services.node_agent.app import build as build_agent
from hyperjob.services.node_agent.config import Settings as AgentSettings
from hyperjob.services.splitter.app import build as build_splitter
from hyperjob.services.splitter.config import Settings as SplitterSettings
from tests.fuzz import payloads
from tests.service import service_helpers as sh

pytestmark = pytest.mark.service

C = "c1"
_SENT = itertools.count()  # publish ids: an example hypothesis replays must not be dropped as a duplicate


async def _keys(store) -> dict[str, bytes | None]:  # noqa: ANN001
    """Every document of the instances under test (the store's state to compare)."""
    out: dict[str, bytes | None] = {}
    for kind in (records.QUEUE, records.HYPERJOB, records.pgphase_kind(C), records.reservation_kind(C)):
        for name, doc in (await store.list(kind)).items():
            out[f"{kind}/{name}"] = doc.data
    return out


@pytest.fixture
async def fleet(bus, store):  # noqa: ANN001, ANN201
    async with contextlib.AsyncExitStack() as stack:
        runtimes = [
            (
                await stack.enter_async_context(
                    sh.running(
                        "cluster-scheduler",
                        build_cluster_scheduler,
                        ClusterSchedulerSettings(cluster=C, schedule_period="0.2s"),
                        bus,
                        store,
                    )
                )
            )[0],
            (
                await stack.enter_async_context(
                    sh.running(
                        "node-agent",
                        build_agent,
                        AgentSettings(cluster=C, nodes=2, heartbeat_period=0.5, telemetry="off"),
                        bus,
                        store,
                        instance=f"node-agent-{C}",
                    )
                )
            )[0],
            (await stack.enter_async_context(sh.running("splitter", build_splitter, SplitterSettings(), bus, store)))[
                0
            ],
        ]
        yield [
            (rt.instance, durable, flt, types)
            for rt in runtimes
            for durable, filters, types in rt.inputs()
            for flt in filters
        ]


async def _letters(probe: sh.Probe, subject: str) -> int:
    return sum(1 for m in await probe.messages("dlq.>") if m.headers.get(H_ORIGINAL_SUBJECT) == subject)


@settings(
    max_examples=20,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data())
async def test_poison_on_the_real_bus_is_dead_lettered_and_changes_nothing(fleet, bus, store, probe, data) -> None:
    instance, durable, flt, types = data.draw(st.sampled_from(fleet))
    tags = [t.__struct_config__.tag for t in types]
    payload = data.draw(payloads.poison(tags).filter(lambda p: not p.what.startswith("nesting") or len(p.data) < 10**5))
    subject = ".".join(C if p in ("*", ">") else p for p in flt.split("."))
    before, letters = await _keys(store), await _letters(probe, subject)
    await bus.publish(subject, payload.data, msg_id=f"fuzz-{next(_SENT)}")

    async def dead_lettered() -> bool:
        return await _letters(probe, subject) > letters

    if payload.what != "wrong shape":  # a random body may happen to be another consumer's message
        await sh.until(dead_lettered, what=f"{payload.what} on {subject} dead-lettered")
    for _, other, other_filter, _ in fleet:
        if other != "watch" and subject_covers(other_filter, subject):
            await probe.settled(other, subject)
    assert await _keys(store) == before, payload.what


async def test_after_the_poison_a_valid_request_still_takes_effect(fleet, bus, store, probe) -> None:
    await bus.publish(subjects.APPLY, b"\xff" * 20, msg_id="poison-first")
    apply = sh.apply(sh.queue_manifest("after-poison"))
    await sh.send(bus, subjects.APPLY, apply)
    [answer] = await probe.wait(subjects.result(apply.event_id))
    assert isinstance(answer, events.RequestAccepted)
    assert [m.headers[H_ORIGINAL_SUBJECT] for m in await probe.messages("dlq.>")] == [subjects.APPLY]
