"""One life of a HyperJob as spans, read from the system's own event log (``eventlog``), so
that ``hyperjob trace`` and the dashboard draw the same waterfall without a tracing backend, with
the trace id (from the messages' ``traceparent`` headers) to look the same life up in Jaeger.

A name can live more than once: deleted, then applied again. Each life is its own trace (the
re-apply is a new request, the root of a new trace); a life begins with a submission whose
``created`` differs from the life before it, so two lives never share a waterfall.

The spans are built from the steps of a life (pure: ``lives``, ``waterfall``): the HyperJob's life
as the root; under it the wait in its queue (Submitted → Admitted), the split (Admitted → its
children dispatched), each child job on its cluster, and the HyperJob's run; under each child the
scheduling cycle that bound it on its cluster (Dispatched → Scheduled), its pods' start
(Scheduled → Running) and their run (Running → an end). Steps that bound no span (a warning, a
retry) are instants under their object's span.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator

import msgspec

from hyperjob import events
from hyperjob.bus.model import Delivery
from hyperjob.bus.protocol import Bus

from . import eventlog

ENDS = ("Completed", "Failed", "Aborted", "Terminated", "Removed", "Deleted")


class Step(msgspec.Struct, kw_only=True):
    """One thing the event log says happened to the HyperJob or one of its objects."""

    at: float
    service: str
    kind: str
    name: str
    reason: str
    message: str
    warning: bool
    trace_id: str
    cluster: str = ""
    created: float | None = None  # on a submission: when the owner was created (which life it is)

    @property
    def object(self) -> str:
        return f"{self.kind.lower()}/{self.name}"


class Span(msgspec.Struct, kw_only=True):
    """A stretch of a life: from ``start`` to ``end`` (equal for an instant), nested spans in
    ``children`` in start order."""

    name: str
    service: str
    start: float
    end: float
    warning: bool = False
    children: list[Span] = []

    @property
    def duration(self) -> float:
        return self.end - self.start

    def walk(self, depth: int = 0) -> Iterator[tuple[int, Span]]:
        yield depth, self
        for child in self.children:
            yield from child.walk(depth + 1)


def trace_id_of(headers: dict[str, str] | None) -> str:
    """The trace id of a W3C ``traceparent`` header (``00-<trace id>-<span id>-<flags>``), or ""."""
    parts = (headers or {}).get("traceparent", "").split("-")
    return parts[1] if len(parts) == 4 and len(parts[1]) == 32 else ""


def steps(stored: Iterable[tuple[Delivery, float]], hyperjob: str) -> list[Step]:
    """The steps of ``hyperjob`` among ``stored`` (deliveries with the time they were stored), of
    every life, in time order."""
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
        born = isinstance(message, events.OwnerSubmitted) and message.name == hyperjob
        mine.append(
            Step(
                at=event.first,
                service=getattr(message, "producer", "") or "-",
                kind=event.kind,
                name=event.name,
                reason=event.reason,
                message=event.message,
                warning=event.type == "Warning",
                trace_id=traces.get(id(message), ""),
                cluster=event.cluster,
                created=message.created if born and isinstance(message, events.OwnerSubmitted) else None,
            )
        )
    return mine


async def load(bus: Bus, hyperjob: str) -> list[Step]:
    stored: list[tuple[Delivery, float]] = []
    for subject in eventlog.SUBJECTS:
        stored += await bus.stored(subject)
    return steps(stored, hyperjob)


def lives(found: list[Step], hyperjob: str) -> list[list[Step]]:
    """``found`` cut into lives, oldest first: a submission after the HyperJob's deletion, or one
    created at another time than the life in course, begins the next (a re-submission of the same
    life, a new generation, keeps its ``created``; what its children report after the deletion
    is still the old life's)."""
    out: list[list[Step]] = []
    born: float | None = None
    deleted = False
    for step in found:
        submitted = step.created is not None
        if not out or (submitted and (deleted or (born is not None and step.created != born))):
            out.append([])
            deleted = False
        born = step.created if submitted else born
        deleted = deleted or (step.reason == "Deleted" and step.name == hyperjob)
        out[-1].append(step)
    return out


def main_trace(found: list[Step]) -> str:
    """The trace most of a life's steps belong to (steps a round published outside it aside)."""
    counted = Counter(s.trace_id for s in found if s.trace_id)
    return counted.most_common(1)[0][0] if counted else ""


def waterfall(found: list[Step], hyperjob: str) -> Span:
    """The spans of one life (its steps in time order): the HyperJob's life, and nested in it
    the queue, the split, each child job (with its binding, pod start and run) and the run."""
    start, end = found[0].at, found[-1].at
    owner = [s for s in found if s.kind not in ("Job", "PodGroup") or s.name == hyperjob]
    used: set[int] = set()
    children = [
        *_stage(owner, used, "queue", "Submitted", ("Admitted",), end),
        *_split(found, owner, used),
        *_stage(owner, used, "run", "Running", ENDS, end),
    ]
    for job, its in _jobs(found, hyperjob).items():
        children.append(_job(job, its, end))
    children += _instants(owner, used)
    root = Span(name=f"hyperjob/{hyperjob}", service="-", start=start, end=end)
    root.children = sorted(children, key=lambda s: s.start)
    return root


def _jobs(found: list[Step], hyperjob: str) -> dict[str, list[Step]]:
    """Each child job's steps (its podgroup's with them), by first appearance."""
    jobs: dict[str, list[Step]] = {}
    for step in found:
        if step.kind in ("Job", "PodGroup") and step.name != hyperjob:
            jobs.setdefault(step.name, []).append(step)
    return jobs


def _job(job: str, found: list[Step], until: float) -> Span:
    """A child job from its first step (dispatched) to its last: where it was bound, its pods'
    start and their run, and what else happened to it."""
    clusters = sorted({s.cluster for s in found if s.cluster})
    used: set[int] = set()
    where = f"schedule on {', '.join(clusters) or 'its cluster'}"
    children = [
        *_stage(found, used, where, "Dispatched", ("Scheduled",), until),
        *_stage(found, used, "start pods", "Scheduled", ("Running",), until),
        *_stage(found, used, "run", "Running", ENDS, until),
        *_instants(found, used),
    ]
    last = found[-1]
    span = Span(
        name=f"job/{job}" + (f" on {', '.join(clusters)}" if clusters else ""),
        service=found[0].service,
        start=found[0].at,
        end=last.at if last.reason in ENDS else until,
        warning=last.warning,
    )
    span.children = sorted(children, key=lambda s: s.start)
    return span


def _stage(
    found: list[Step], used: set[int], label: str, begin: str, ends: tuple[str, ...], until: float
) -> Iterator[Span]:
    """The span from the first ``begin`` step to the first of ``ends`` after it (still open: to
    ``until``), named for both; marks the steps it spans as ``used``. A podgroup's phases bound
    nothing: its job's own phases say when the job ran."""
    bounds = [i for i, s in enumerate(found) if s.kind != "PodGroup"]
    first = next((i for i in bounds if found[i].reason == begin), None)
    if first is None:
        return
    last = next((i for i in bounds if i > first and found[i].reason in ends), None)
    used.add(first)
    if last is not None:
        used.add(last)
    done = found[last] if last is not None else None
    yield Span(
        name=f"{label}: {begin} → {done.reason if done else '…'}",
        service=(done or found[first]).service,
        start=found[first].at,
        end=done.at if done else until,
        warning=bool(done and done.warning),
    )


def _split(found: list[Step], owner: list[Step], used: set[int]) -> Iterator[Span]:
    """From admission to the last child dispatched: the splitter's plan, placed."""
    admitted = next((s for s in owner if s.reason == "Admitted"), None)
    dispatched = [s for s in found if s.reason == "Dispatched" and admitted is not None and s.at >= admitted.at]
    if admitted is None or not dispatched:
        return
    used.add(owner.index(admitted))
    yield Span(
        name=f"split: Admitted → {len(dispatched)} Dispatched",
        service=dispatched[-1].service,
        start=admitted.at,
        end=dispatched[-1].at,
    )


def _instants(found: list[Step], used: set[int]) -> list[Span]:
    """The steps no span bounds, each an instant (a warning, a retry, a phase in between)."""
    return [
        Span(name=f"{s.reason}: {s.message}", service=s.service, start=s.at, end=s.at, warning=s.warning)
        for i, s in enumerate(found)
        if i not in used
    ]
