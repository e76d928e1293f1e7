"""The runtime's outbox (committed outputs go out in commit order, and a key is confirmed only once
they did) and its changelog (entries with the version each write gives, restored from the latest)."""

from __future__ import annotations

import pytest

from hyperjob.bus import Delivery, InMemoryBus, PublishError, StreamSpec
from hyperjob.events.subjects import STREAMS
from hyperjob.servicekit.changelog import (
    H_DELETED,
    H_VERSION,
    changelog_outputs,
    latest_documents,
    parse_state_subject,
    state_subject,
)
from hyperjob.servicekit.outbox import Outbox
from hyperjob.store import Binding, Output, Unbind, Write, binding_kind

OUT = [StreamSpec(name="OUT", subjects=["out.>"])]


def output(n: int) -> Output:
    return Output(subject="out.x", msg_id=f"m{n}", payload=str(n).encode())


def sent(bus: InMemoryBus) -> list[bytes]:
    return [d.data for d in bus.messages("OUT")]


async def test_outputs_a_publish_failed_on_are_held_and_go_out_before_later_ones() -> None:
    bus = InMemoryBus(OUT)
    outbox = Outbox(bus)
    await outbox.publish("o1", [output(1)])
    bus.fail("publish")
    with pytest.raises(PublishError):
        await outbox.publish("o2", [output(2)])
    assert outbox.behind and outbox.take_published() == ["o1"]  # o2 is not out: not confirmed
    await outbox.flush()
    await outbox.publish("o3", [output(3)])
    assert sent(bus) == [b"1", b"2", b"3"] and not outbox.behind
    assert outbox.take_published() == ["o2", "o3"] and outbox.take_published() == []


async def test_keys_a_refused_commit_carried_are_confirmed_by_the_next() -> None:
    outbox = Outbox(InMemoryBus(OUT))
    await outbox.publish("o1", [output(1)])
    carried = outbox.take_published()
    await outbox.publish("o2", [output(2)])
    outbox.give_back(carried)  # the commit that carried o1 was refused
    assert outbox.take_published() == ["o1", "o2"]


async def test_what_an_earlier_life_left_is_resent_in_commit_order_and_held_from_a_refusal_on() -> None:
    bus = InMemoryBus(OUT)
    outbox = Outbox(bus)
    await outbox.resend([("o1", [output(1)])])
    bus.fail("publish")
    await outbox.resend([("o2", [output(2)]), ("o3", [output(3)])])
    assert sent(bus) == [b"1"] and outbox.behind  # o3 waits behind o2: never out before it
    await outbox.flush()
    assert sent(bus) == [b"1", b"2", b"3"] and outbox.take_published() == ["o1", "o2", "o3"]


def test_a_state_subject_keeps_dots_and_percents_in_names() -> None:
    subject = state_subject("splitter.a", "hyperjob", "team-a/x.y%z")
    assert subject.count(".") == 3
    assert parse_state_subject("splitter.a", subject) == ("hyperjob", "team-a/x.y%z")


def test_each_write_is_logged_with_the_version_it_gives_and_a_delete_as_a_tombstone() -> None:
    writes = [Write(kind="queue", name="q", data=b"{}", expected_version=4), Write(kind="queue", name="r", data=None)]
    binds = [Binding(cluster="c1", pod="p", node="n1", request={"cpu": 1.0})]
    entries = changelog_outputs("cs", writes, binds, [Unbind(cluster="c1", pod="old")], unit="u1")
    assert [(e.subject, e.headers) for e in entries] == [
        (state_subject("cs", "queue", "q"), {H_VERSION: "5"}),
        (state_subject("cs", "queue", "r"), {H_DELETED: "1"}),
        (state_subject("cs", binding_kind("c1"), "p"), {H_VERSION: "1"}),
        (state_subject("cs", binding_kind("c1"), "old"), {H_DELETED: "1"}),
    ]
    assert entries == changelog_outputs("cs", writes, binds, [Unbind(cluster="c1", pod="old")], unit="u1")


async def test_the_latest_entries_are_restored_without_tombstones_or_refused_ones() -> None:
    bus = InMemoryBus(STREAMS)
    for w in (
        Write(kind="queue", name="q", data=b"old"),
        Write(kind="queue", name="q", data=b"new", expected_version=1),
        Write(kind="queue", name="gone", data=b"x"),
        Write(kind="queue", name="gone", data=None),
        Write(kind="queue", name="poison", data=b"?"),
    ):
        await bus.publish_many(changelog_outputs("cs", [w], [], [], unit=f"{w.name}-{w.data!r}"))

    async def restorable(kind: str, delivery: Delivery) -> bool:
        return delivery.data != b"?"

    docs = await latest_documents(bus, "cs", restorable)
    assert [(d.kind, d.name, d.version, d.data) for d in docs] == [("queue", "q", 2, b"new")]
