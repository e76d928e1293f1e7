"""A fleet to poison: every service of a scenario built by its own ``build`` on the in-process bus
and store in virtual time, as ``hyperjob simulate`` runs them (the simulator's ``Engine``), and
the bus surface it exposes: every subject an instance consumes or watches, with the types it
handles, read from what the services declare (``Runtime.inputs``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from hyperjob.bus import H_ORIGINAL_SUBJECT, InstanceCrash, subject_covers
from hyperjob.simulator.engine import Engine
from hyperjob.simulator.scenario import load

REPO = Path(__file__).resolve().parents[2]
SCENARIO = REPO / "examples" / "scenarios" / "ex-10-hyperjob-64-split-32-32.yaml"
# The services' retries (back-off 1, 5, 30 s; 5 deliveries) end within this much virtual time.
REDELIVERY_HORIZON = 120.0


class Input(msgspec.Struct, frozen=True):
    instance: str
    durable: str  # "watch" for a latest-value input
    subject_filter: str
    types: tuple[type, ...]

    @property
    def tags(self) -> list[str]:
        return [str(msgspec.inspect.type_info(t).tag) for t in self.types]  # type: ignore[attr-defined]

    def subject(self, token: str) -> str:
        """A concrete subject this input receives (wildcards filled from ``token``)."""
        parts = self.subject_filter.split(".")
        return ".".join(token if p in ("*", ">") else p for p in parts)


class Fleet:
    """The booted engine; ``inject`` publishes one payload and runs the fleet until it is quiet."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.inputs = [
            Input(name, durable, flt, types)
            for name, rt in sorted(engine.runtimes.items())
            for durable, filters, types in rt.inputs()
            for flt in filters
        ]
        self._sent = 0

    @classmethod
    async def boot(cls, scenario: Path = SCENARIO, until: float = 30.0) -> Fleet:
        """Start every instance and run the scenario's events up to ``until`` (state to poison)."""
        text = scenario.read_text()
        engine = Engine(load(text))
        # The simulate command's timeline reads what is published to draw its output; the fuzz
        # needs no output (and the timeline is the simulator's, not a service).
        engine.bus.observers.remove(engine.timeline.observe)
        engine.clock.time = -engine.scenario.period
        for plan in engine.plans.values():
            await engine.start(plan)
        await engine.seed()
        await engine.settle(engine.clock.time)
        for event in engine.scenario.events:
            if event.at <= until:
                await cls._advance(engine, event.at)
                await engine.apply(event)
                await engine.quiesce()
        await cls._advance(engine, until)
        return cls(engine)

    @staticmethod
    async def _advance(engine: Engine, until: float) -> None:
        while (later := engine.agenda.next_time(engine.clock.time)) is not None and later <= until:
            engine.clock.time = later
            await engine.settle(later)
        engine.clock.time = max(engine.clock.time, until)
        await engine.settle(engine.clock.time)

    async def inject(self, subject: str, data: bytes) -> None:
        """Publish ``data`` on ``subject`` and run everything it causes: deliveries, redeliveries
        due in the next minutes of virtual time, and the rounds of two periods. An exception that
        escapes a handler, a watch or a round propagates (that is a crash)."""
        self._sent += 1
        engine = self.engine
        engine.bus.publish_now(subject, data, msg_id=f"fuzz-{self._sent}")
        await engine.quiesce()
        # Period by period (rounds and timers keep running, as live), until every retry is over.
        horizon = engine.clock.time + REDELIVERY_HORIZON
        periods = 0
        while periods < 2 or (await self.unsettled() and engine.clock.time < horizon):
            periods += 1
            engine.clock.time += engine.scenario.period
            engine._candidates.update(engine.bus.members)  # noqa: SLF001 - redeliveries now due
            await engine.settle(engine.clock.time)

    async def unsettled(self) -> list[str]:
        """Durable consumers still holding a message (neither acked nor dead-lettered)."""
        out = []
        for member in self.engine.bus.members:
            if member.kind == "watch" or not member.running:
                continue
            consumer = member._consumer  # noqa: SLF001 - the in-process bus's own state
            if consumer is not None and consumer.delivered:
                out.append(member.durable)
        return out

    def letters(self, subject: str) -> int:
        return sum(1 for d in self.engine.bus.messages("DLQ") if d.headers.get(H_ORIGINAL_SUBJECT) == subject)

    def covering(self, subject: str) -> list[Input]:
        return [i for i in self.inputs if subject_covers(i.subject_filter, subject)]

    def state(self) -> Any:
        return self.engine.store.snapshot()


__all__ = ["Fleet", "Input", "InstanceCrash"]
