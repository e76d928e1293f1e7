"""One trace per HyperJob: which trace a unit of work belongs to, what its span is called, and
what it records.

A service's work is done per message (a batch is many), per round (admission, a scheduling cycle)
or per timer, and a round serves many HyperJobs at once. So the trace a piece of work joins is
found by the object it is about (a *trace key*: the HyperJob's name, a child job's name), not only
by the message in hand:

- handling a message opens a **work span** whose parent is the message's ``traceparent`` (or,
  without one, the context last seen for one of the message's keys); the keys then remember it;
- a round opens a work span per object it decides on (``ServiceTracing.span``), parented by what
  the keys remember;
- a message emitted inside a work span carries that span's context; one emitted outside (a
  ``before_commit`` summary) carries what its keys remember (``ServiceTracing.note``).

A trace is one *life* of an object: a HyperJob deleted and applied again under the same name (its
child jobs named as before) is a new trace. A message that states its object's life (``created``:
the owner's submission, its spec, a job's state) and carries another life than the one remembered
for the object starts the object's trace over in the context it carries (``life_of``).

Per-pod detail is sampled (``HYPERJOB_TRACE_POD_SAMPLE``, a ratio, default 0.01) so a 10,000-pod
job does not flood the exporter; lifecycle spans are always kept (the sampler is parent-based).
Nothing here imports the event schemas: messages are read by their field names.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

import structlog
from opentelemetry import context as otel_context
from opentelemetry import trace

from .tracing import extract, inject

__all__ = [
    "POD_SAMPLE_ENV",
    "ServiceTracing",
    "attributes_of",
    "decision",
    "keys_of",
    "life_of",
    "only_noted",
    "pod_sampled",
    "span_name",
]

POD_SAMPLE_ENV = "HYPERJOB_TRACE_POD_SAMPLE"
DEFAULT_POD_SAMPLE = 0.01
MAX_KEYS = 20_000  # objects whose trace a process remembers (the oldest are forgotten first)
MAX_LINKS = 128

# Inside a work span: what is emitted there is part of the span's trace.
_IN_WORK: ContextVar[bool] = ContextVar("hyperjob_in_work_span", default=False)
_tracer = trace.get_tracer("hyperjob.work")
_decisions = structlog.get_logger("decision")

# Fields naming the object a message is about (``name`` only for kinds whose name is a HyperJob's
# or a Job's: a queue's or a node's name is not a trace key).
_KEY_FIELDS = ("hyperjob", "owner", "child", "job")
_NAMED = ("HyperJob", "Owner", "CommandHyperJob", "DeleteObject", "Request")
_LIST_FIELDS = (("children", "name"), ("reports", "job"), ("pods", "job"))

# What handling a message does, by service (``*``: any service). Unlisted: ``handle <Type>``.
_SPAN_NAMES: dict[tuple[str, str], str] = {
    ("*", "ApplyManifest"): "validate",
    ("*", "DeleteObject"): "delete",
    ("*", "CommandHyperJob"): "command",
    ("splitter", "OwnerAdmitted"): "split",
    ("splitter", "JobPhaseChanged"): "child phase",
    ("splitter", "JobRemoved"): "child removed",
    ("splitter", "GangRetry"): "replan gang",
    ("global-scheduler", "OwnerSubmitted"): "enqueue",
    ("global-scheduler", "OwnerWithdrawn"): "withdraw",
    ("global-scheduler", "PlaceChildren"): "place children",
    ("global-scheduler", "ReservationHeld"): "gang hold",
    ("global-scheduler", "JobPhaseChanged"): "child phase",
    ("global-scheduler", "PodGroupPhaseChanged"): "podgroup phase",
    ("global-scheduler", "JobRemoved"): "child removed",
    ("cluster-scheduler", "GangControl"): "gang control",
    ("job-controller", "DispatchChild"): "create job",
    ("job-controller", "PodsBound"): "start pods",
    ("job-controller", "PodsEvicted"): "evict pods",
    ("job-controller", "PodsRejected"): "pods rejected",
    ("job-controller", "PodGroupPhaseChanged"): "podgroup phase",
    ("job-controller", "PodPhasesReported"): "pod phase",
    ("job-controller", "RemoveChild"): "remove job",
    ("node-agent", "StartPods"): "run pods",
    ("node-agent", "StopPods"): "stop pods",
    ("status-aggregator", "HyperJobSpecChanged"): "status",
    ("status-aggregator", "OwnerAdmitted"): "status",
    ("status-aggregator", "JobPhaseChanged"): "status",
    ("status-aggregator", "ReservationHeld"): "status",
    ("status-aggregator", "GangRetry"): "status",
    ("workflow-controller", "JobPhaseChanged"): "flow step",
}


# Messages a service only takes note of (how far a child got): their handling decides little and
# costs less than a span would (in a burst these are most of the global-scheduler's messages, and
# the status-aggregator's spans were a quarter of its CPU). They get no span of their own: the
# handling runs in the producer's context, so whatever it emits (the HyperJob's status) still joins
# the HyperJob's trace, and its log lines carry the trace id. The phase itself is traced where it
# happened.
_NOTED: dict[tuple[str, str], Callable[[Any], bool]] = {
    ("global-scheduler", "JobPhaseChanged"): lambda m: True,
    ("global-scheduler", "PodGroupPhaseChanged"): lambda m: True,
    # A failed child is the childFailurePolicy's decision: that one keeps its span.
    ("splitter", "JobPhaseChanged"): lambda m: getattr(m, "new", "") != "Failed",
    # A child's end is its HyperJob's end: those statuses keep their span.
    ("status-aggregator", "JobPhaseChanged"): lambda m: getattr(m, "new", "") not in ("Completed", "Failed"),
    ("status-aggregator", "PodGroupPhaseChanged"): lambda m: True,
    ("status-aggregator", "ReservationHeld"): lambda m: True,
}


def only_noted(service: str, message: Any) -> bool:
    """True when ``service`` handling ``message`` only takes note of it (no work span of its own)."""
    noted = _NOTED.get((service, type(message).__name__))
    return noted is not None and noted(message)


def span_name(service: str, message: Any) -> str:
    """The name of the span of ``service`` handling ``message``: what the handling does."""
    kind = type(message).__name__
    return _SPAN_NAMES.get((service, kind)) or _SPAN_NAMES.get(("*", kind)) or f"handle {kind}"


def keys_of(message: Any) -> list[str]:
    """The objects ``message`` is about (trace keys), the HyperJob first when it names one."""
    keys: list[str] = []
    for field in _KEY_FIELDS:
        value = getattr(message, field, None)
        if isinstance(value, str) and value:
            keys.append(value)
    kind = type(message).__name__
    name = getattr(message, "name", None)
    if isinstance(name, str) and name and kind.startswith(_NAMED):
        keys.insert(0, name)
    manifest = getattr(message, "manifest", None)
    if kind == "ApplyManifest" and isinstance(manifest, dict):
        keys.insert(0, _manifest_key(manifest))
    for field, inner in _LIST_FIELDS:
        for item in getattr(message, field, None) or ():
            value = getattr(item, inner, None)
            if isinstance(value, str) and value:
                keys.append(value)
    return list(dict.fromkeys(k for k in keys if k))


def life_of(message: Any) -> float:
    """Which life of its first key (``keys_of``) ``message`` is about: when that object was
    created, where the message says it; 0.0 where it does not."""
    created = getattr(message, "created", None)
    return float(created) if isinstance(created, int | float) and not isinstance(created, bool) else 0.0


def _manifest_key(manifest: dict[str, Any]) -> str:
    """``namespace/name`` of an applied manifest; "" when it has none. The manifest is not validated
    yet (the handler rejects garbage, naming the field): nothing here may assume its shape."""
    metadata = manifest.get("metadata")
    if not isinstance(metadata, dict):
        return ""
    name, namespace = metadata.get("name"), metadata.get("namespace")
    name = name if isinstance(name, str) else ""
    namespace = namespace if isinstance(namespace, str) else ""
    return name if namespace in ("", "default") or not name else f"{namespace}/{name}"


def attributes_of(message: Any) -> dict[str, str | int]:
    """Span attributes of ``message``: ``hyperjob.name``, ``job.name``, ``cluster``, ``queue``,
    ``pods`` (how many it carries) and its ``decision`` field (a phase, an action), when present."""
    out: dict[str, str | int] = {"messaging.message.type": type(message).__name__}
    keys = keys_of(message)
    hyperjob = getattr(message, "hyperjob", None)
    if isinstance(hyperjob, str) and hyperjob:
        out["hyperjob.name"] = hyperjob
    elif keys and type(message).__name__.startswith(_NAMED + ("ApplyManifest", "GangRetry", "PlaceChildren")):
        out["hyperjob.name"] = keys[0]
    job = getattr(message, "job", None) or getattr(message, "child", None)
    if isinstance(job, str) and job:
        out["job.name"] = job
    for field in ("cluster", "queue"):
        value = getattr(message, field, None)
        if isinstance(value, str) and value:
            out[field] = value
    for field in ("pods", "reports", "children"):
        items = getattr(message, field, None)
        if isinstance(items, list):
            out["pods" if field != "children" else "children"] = len(items)
    for field in ("new", "phase", "action", "outcome", "lifecycle"):
        value = getattr(message, field, None)
        if isinstance(value, str) and value:
            out["decision"] = value
            break
    return out


def pod_sampled(pod: str, env: Mapping[str, str] | None = None) -> bool:
    """Whether one pod's own spans are recorded: deterministically by its name (every service
    picks the same pods), at the ratio ``HYPERJOB_TRACE_POD_SAMPLE`` (0 to 1)."""
    raw = (os.environ if env is None else env).get(POD_SAMPLE_ENV, "")
    try:
        ratio = float(raw) if raw else DEFAULT_POD_SAMPLE
    except ValueError:
        ratio = DEFAULT_POD_SAMPLE
    if ratio <= 0.0:
        return False
    digest = int.from_bytes(hashlib.blake2b(pod.encode(), digest_size=8).digest(), "big")
    return digest < ratio * 2**64


def decision(event: str, **fields: Any) -> None:
    """A decision the service took (accepted, split, admitted, held, placed, bound, a phase): one
    info JSON line named ``event`` with the objects, the cluster, the reason and, inside the work
    span, its ``trace_id``; the current span gets ``decision`` and the fields as attributes."""
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attribute("decision", event)
        for key, value in fields.items():
            if isinstance(value, str | int | float | bool):
                span.set_attribute(_ATTRIBUTE.get(key, key), value)
    _decisions.info(event, **fields)


_ATTRIBUTE = {"hyperjob": "hyperjob.name", "job": "job.name", "child": "job.name"}
_REQUESTS = ("ApplyManifest", "DeleteObject", "CommandHyperJob")


def _trace_id(ctx: otel_context.Context) -> int:
    return trace.get_current_span(ctx).get_span_context().trace_id


class ServiceTracing:
    """One service instance's traces: the context each object's work last ran in (bounded), and
    the context each message it emits will carry. Used by the servicekit runtime."""

    def __init__(self, service: str) -> None:
        self.service = service
        self._by_key: OrderedDict[str, otel_context.Context] = OrderedDict()
        self._lives: dict[str, float] = {}  # a key's life, where a message stated it (see life_of)
        self._emitted: dict[str, dict[str, str]] = {}

    # -- remembering ------------------------------------------------------------------------------

    def context_for(self, keys: list[str]) -> otel_context.Context | None:
        """The context last remembered for the first of ``keys`` that has one."""
        for key in keys:
            found = self._by_key.get(key)
            if found is not None:
                self._by_key.move_to_end(key)
                return found
        return None

    def remember(self, keys: list[str], ctx: otel_context.Context, *, replace: bool = False, life: float = 0.0) -> None:
        """``keys``' work continues in ``ctx``: for a key not known yet, one whose trace ``ctx``
        continues (a later span of it), or any when ``replace`` (a user request starts over) or
        when ``life`` (of the first key) is another than the one remembered (a new life)."""
        found = trace.get_current_span(ctx).get_span_context()
        if not found.is_valid:
            return
        for key in keys:
            known = self._by_key.get(key)
            reborn = self._reborn(key, life if key == keys[0] else 0.0)
            if replace or reborn or known is None or _trace_id(known) == found.trace_id:
                self._by_key[key] = ctx
                self._by_key.move_to_end(key)
        while len(self._by_key) > MAX_KEYS:
            forgotten, _ = self._by_key.popitem(last=False)
            self._lives.pop(forgotten, None)

    def _reborn(self, key: str, life: float) -> bool:
        """Whether ``life`` is a new life of ``key`` (the first life stated is adopted)."""
        if not life:
            return False
        before, self._lives[key] = self._lives.get(key, life), life
        return before != life

    def learn(self, message: Any, headers: Mapping[str, str] | None) -> None:
        """A watched latest value: its objects' trace, where nothing is known of them yet."""
        self.remember(keys_of(message), extract(headers), life=life_of(message))

    # -- spans --------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def handling(self, message: Any, headers: Mapping[str, str] | None) -> Iterator[trace.Span]:
        """The work span of handling ``message``: a child of its ``traceparent`` (or of what its
        keys remember); its keys remember it. A user request starts the objects' trace over."""
        keys = keys_of(message)
        carried = extract(headers)
        valid = trace.get_current_span(carried).get_span_context().is_valid
        parent = carried if valid else self.context_for(keys)
        if only_noted(self.service, message):
            with self._within(parent) as span:
                yield span
            return
        with self._work(span_name(self.service, message), parent, attributes_of(message)) as span:
            request = type(message).__name__ in _REQUESTS
            # A new life starts over only in a context the message carried: its producer's.
            life = life_of(message) if valid else 0.0
            self.remember(keys, otel_context.get_current(), replace=request and valid, life=life)
            yield span

    @contextlib.contextmanager
    def span(self, name: str, key: str, **attributes: Any) -> Iterator[trace.Span]:
        """A work span of a round or timer deciding about the object ``key`` (its HyperJob or job),
        in that object's trace; what it emits joins the trace."""
        attrs = {_ATTRIBUTE.get(k, k): v for k, v in attributes.items() if isinstance(v, str | int | float | bool)}
        # Inside a message's work span already: nested in it; in a round: in the object's trace.
        parent = otel_context.get_current() if _IN_WORK.get() else self.context_for([key])
        with self._work(name, parent, attrs) as span:
            self.remember([key], otel_context.get_current())
            yield span

    @contextlib.contextmanager
    def _work(
        self, name: str, parent: otel_context.Context | None, attributes: Mapping[str, Any]
    ) -> Iterator[trace.Span]:
        # A parent must be passed explicitly: the current context is the batch's span, which is
        # no HyperJob's (it links to each of them instead).
        with _tracer.start_as_current_span(
            name, context=parent or otel_context.Context(), attributes=dict(attributes), record_exception=False
        ) as span:
            token = _IN_WORK.set(True)
            try:
                yield span
            finally:
                _IN_WORK.reset(token)

    @contextlib.contextmanager
    def _within(self, parent: otel_context.Context | None) -> Iterator[trace.Span]:
        """Work without a span of its own, in ``parent`` (the producer's span, not recording here)."""
        ctx = parent or otel_context.Context()
        attached = otel_context.attach(ctx)
        token = _IN_WORK.set(True)
        try:
            yield trace.get_current_span(ctx)
        finally:
            _IN_WORK.reset(token)
            otel_context.detach(attached)

    # -- what emitted messages carry ------------------------------------------------------------------

    def note(self, event_id: str) -> None:
        """The message ``event_id`` is being emitted: inside a work span, it carries that span's context."""
        if _IN_WORK.get():
            headers = dict(inject({}, otel_context.get_current()))
            if headers:
                self._emitted[event_id] = headers

    def headers_for(self, message: Any) -> dict[str, str] | None:
        """The trace headers ``message`` is published with: its work span's (``note``), else what
        its keys remember (a summary built outside any message's work); None: the bus's current."""
        noted = self._emitted.get(message.event_id)
        if noted is not None:
            return noted
        ctx = self.context_for(keys_of(message))
        return dict(inject({}, ctx)) or None if ctx is not None else None

    def forget_emitted(self) -> None:
        """The unit of work is over (committed or refused: a retry emits again)."""
        self._emitted.clear()

    def pod_event(self, name: str, pod: str, job: str, **attributes: Any) -> None:
        """A per-pod span (``pod Running`` on its node), only for sampled pods: inside the current
        work span, or in the pod's job's trace when a round reports it."""
        if not pod_sampled(pod):
            return
        attrs: dict[str, str | int | float | bool] = {"pod.name": pod, "job.name": job}
        attrs |= {k: v for k, v in attributes.items() if isinstance(v, str | int | float | bool)}
        parent = otel_context.get_current() if _IN_WORK.get() else self.context_for([job])
        if parent is None:
            return
        _tracer.start_span(name, context=parent, attributes=attrs).end()
