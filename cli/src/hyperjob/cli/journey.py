"""``hyperjob trace NAME``: one HyperJob's journey as a waterfall in the terminal, read from the
system's own event log (``eventlog``), so it works without a tracing backend, and the trace id
(from the messages' ``traceparent`` headers) to look the same journey up in Jaeger.

Each row is one step the system took (submitted, admitted, dispatched, bound, a phase), the
service that took it, and a bar from the step before to this one: where the time went.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import msgspec

from hyperjob.bus.model import Delivery
from hyperjob.bus.protocol import Bus
from hyperjob.client import eventlog

BAR_WIDTH = 32


class Step(msgspec.Struct, kw_only=True):
    at: float
    service: str
    object: str
    reason: str
    message: str
    warning: bool
    trace_id: str


def trace_id_of(headers: dict[str, str] | None) -> str:
    """The trace id of a W3C ``traceparent`` header (``00-<trace id>-<span id>-<flags>``), or ""."""
    parts = (headers or {}).get("traceparent", "").split("-")
    return parts[1] if len(parts) == 4 and len(parts[1]) == 32 else ""


def steps(stored: Iterable[tuple[Delivery, float]], hyperjob: str) -> list[Step]:
    """The steps of ``hyperjob`` among ``stored`` (deliveries with the time they were stored)."""
    decoded, traces = [], {}
    for delivery, at in stored:
        message = eventlog.decode(delivery.data)
        if message is None:
            continue
        decoded.append((message, at))
        traces[id(message)] = trace_id_of(delivery.headers)
    mine = []
    for event, message in eventlog.unfolded(decoded):
        if event.hyperjob != hyperjob and not (event.kind == "HyperJob" and event.name == hyperjob):
            continue
        if event.kind == "Queue":
            continue
        mine.append(
            Step(
                at=event.first,
                service=getattr(message, "producer", "") or "-",
                object=event.object,
                reason=event.reason,
                message=event.message,
                warning=event.type == "Warning",
                trace_id=traces.get(id(message), ""),
            )
        )
    return mine


async def load(bus: Bus, hyperjob: str) -> list[Step]:
    stored: list[tuple[Delivery, float]] = []
    for subject in eventlog.SUBJECTS:
        stored += await bus.stored(subject)
    return steps(stored, hyperjob)


def main_trace(found: list[Step]) -> str:
    """The trace most of the journey's steps belong to (a re-apply starts another)."""
    counted = Counter(s.trace_id for s in found if s.trace_id)
    return counted.most_common(1)[0][0] if counted else ""


def render(found: list[Step], hyperjob: str, jaeger: str = "http://localhost:16686") -> str:
    """The waterfall: a header with the trace id, then one row per step."""
    if not found:
        return f"no events of HyperJob {hyperjob!r} in the event log"
    trace = main_trace(found)
    start, end = found[0].at, found[-1].at
    span = max(end - start, 1e-9)
    lines = [
        f"HyperJob {hyperjob}: {len(found)} steps in {end - start:.3f}s",
        f"trace id: {trace or '(none: published without a traceparent)'}",
    ]
    if trace:
        lines.append(f"jaeger:   {jaeger}/trace/{trace}")
    width = max(len(s.object) for s in found)
    lines.append("")
    lines.append(
        f"{'OFFSET':>9}  {'SERVICE':<18} {'OBJECT':<{width}} {'REASON':<14} {'WATERFALL':<{BAR_WIDTH + 2}} MESSAGE"
    )
    previous = start
    for step in found:
        lines.append(
            f"{'+' + format(step.at - start, '.3f') + 's':>9}  {step.service[:18]:<18} {step.object:<{width}} "
            f"{step.reason[:14]:<14} |{_bar(previous - start, step.at - start, span)}| "
            f"{'! ' if step.warning else ''}{step.message}"
            + ("" if not trace or step.trace_id in ("", trace) else f"  (trace {step.trace_id})")
        )
        previous = step.at
    return "\n".join(lines)


def _bar(begin: float, end: float, total: float) -> str:
    """From ``begin`` to ``end`` (seconds after the first step) on a ``BAR_WIDTH`` scale; an
    instant is one mark."""
    left = min(BAR_WIDTH - 1, int(begin / total * BAR_WIDTH))
    right = min(BAR_WIDTH, max(left + 1, round(end / total * BAR_WIDTH)))
    return " " * left + "█" * (right - left) + " " * (BAR_WIDTH - right)
