"""Fuzz the whole bus surface (issue 14, item 3): every subject a service consumes or watches, as
the services declare them, gets random bytes, JSON of any shape, unknown tags, invalid UTF-8,
deep nesting, boundary sizes, duplicates, and well-formed messages with hostile values.

The fleet is the services' own ``build`` over the in-process bus and store in virtual time (the
simulator's engine), booted once with a HyperJob running. After each payload:

- nothing crashed: no exception escaped a handler, a watch, a round or a timer;
- every consumer settled it (acked, or dead-lettered after its retries): nothing is stuck;
- a poison payload is in the dead-letter queue and changed no document and no binding;
- and the fleet still works: a valid request applied afterwards takes effect.

A smaller sample runs over real NATS in ``tests/service/test_bus_fuzz.py``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hyperjob import events
from hyperjob.events import subjects
from tests.fuzz import payloads
from tests.fuzz.fleet import Fleet


@pytest.fixture(scope="module")
def fleet() -> Iterator[tuple[Fleet, asyncio.AbstractEventLoop]]:
    loop = asyncio.new_event_loop()
    try:
        yield loop.run_until_complete(Fleet.boot()), loop
    finally:
        loop.close()


def _decodes(data: bytes, types: tuple[type, ...]) -> bool:
    try:
        msgspec.json.decode(data, type=events.decoder(*types).type)
    except Exception:  # noqa: BLE001 - any failure is "does not decode"
        return False
    return True


def _input_and(fleet: Fleet, strategy_of) -> st.SearchStrategy:  # noqa: ANN001
    return st.sampled_from(fleet.inputs).flatmap(
        lambda i: st.tuples(st.just(i), st.sampled_from(["cluster-a", "cluster-b", "ghost"]), strategy_of(i))
    )


def _still_works(fleet: Fleet, loop: asyncio.AbstractEventLoop, n: int) -> None:
    """A valid request after the poison takes effect: the splitter, the changelog and CONFIG go on."""
    name = f"after-{n}"
    apply = events.ApplyManifest(
        event_id=f"fuzz-apply-{n}",
        occurred_at=0.0,
        producer="fuzz",
        manifest={"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name}},
    )
    loop.run_until_complete(fleet.inject(subjects.APPLY, events.encode(apply)))
    assert fleet.engine.store.snapshot()["docs"]["queue"].get(name) is not None


def test_poison_on_every_consumed_subject_is_dead_lettered_and_changes_nothing(fleet) -> None:
    the_fleet, loop = fleet
    seen: set[str] = set()

    @given(_input_and(the_fleet, lambda i: payloads.poison(i.tags)))
    def poisoned(case) -> None:  # noqa: ANN001
        target, token, payload = case
        subject = target.subject(token)
        seen.add(target.subject_filter)
        before, letters = the_fleet.state(), the_fleet.letters(subject)
        loop.run_until_complete(the_fleet.inject(subject, payload.data))
        assert loop.run_until_complete(the_fleet.unsettled()) == []
        assert the_fleet.state() == before, payload.what
        covering = the_fleet.covering(subject)
        if not all(_decodes(payload.data, i.types) for i in covering):
            assert the_fleet.letters(subject) > letters, f"{payload.what} on {subject} not dead-lettered"

    poisoned()
    _still_works(the_fleet, loop, 1)
    assert len(seen) > len({i.subject_filter for i in the_fleet.inputs}) // 2  # the sample spread wide


def test_hostile_but_well_formed_messages_crash_nothing_and_stick_nowhere(fleet) -> None:
    the_fleet, loop = fleet

    @given(_input_and(the_fleet, lambda i: payloads.typed(i.types)), st.booleans())
    def hostile(case, twice: bool) -> None:  # noqa: ANN001
        target, token, payload = case
        subject = target.subject(token)
        loop.run_until_complete(the_fleet.inject(subject, payload.data))
        if twice:  # a duplicate under another stream id: one effect (the event id is the same)
            before = the_fleet.state()
            loop.run_until_complete(the_fleet.inject(subject, payload.data))
            assert the_fleet.state() == before
        assert loop.run_until_complete(the_fleet.unsettled()) == []

    hostile()
    _still_works(the_fleet, loop, 2)
