"""The messages more than one unit of the splitter sends, each built in one place: the answer to a
request (``hj.result.<request>``, its id derived from the request's, so a redelivered request is
answered once), a queue's configuration, and a HyperJob's waiting reason."""

from __future__ import annotations

from hyperjob import api, events, records
from hyperjob.events import subjects
from hyperjob.servicekit import Reaction, Runtime
from hyperjob.telemetry.spans import decision


def accepted(rt: Runtime, msg: events.Message, kind: str, name: str, outcome: events.Outcome) -> Reaction:
    decision("request_accepted", request=msg.event_id, kind=kind, name=name, outcome=outcome)
    answer = events.RequestAccepted(**rt.envelope(msg, "answer"), kind=kind, name=name, outcome=outcome)
    return Reaction().publish(subjects.result(msg.event_id), answer)


def rejected(rt: Runtime, msg: events.Message, kind: str, name: str, reason: str) -> Reaction:
    decision("request_rejected", request=msg.event_id, kind=kind, name=name, reason=reason)
    answer = events.RequestRejected(**rt.envelope(msg, "answer"), kind=kind, name=name, reason=reason)
    return Reaction().publish(subjects.result(msg.event_id), answer)


def not_found(kind: str, namespace: str, name: str) -> str:
    """kubectl's NotFound, naming the namespace outside ``default`` (the reason ends "not found")."""
    where = f" in namespace {namespace!r}" if namespace not in ("", api.DEFAULT_NAMESPACE) else ""
    return f"{kind} {name!r}{where} not found"


def queue_changed(rt: Runtime, cause: events.Message, name: str, doc: records.QueueDoc | None) -> events.QueueChanged:
    """A queue as it now is (``doc``), or deleted (None), for the configuration stream."""
    if doc is None:
        return events.QueueChanged(**rt.envelope(cause, f"queue/{name}"), name=name, deleted=True)
    return events.QueueChanged(
        **rt.envelope(cause, f"queue/{name}"), name=name, manifest=doc.manifest, state=doc.state, created=doc.created
    )


def child_waiting(
    rt: Runtime, cause: events.Message | str, doc: records.HyperJobDoc, reason: str
) -> events.ChildPlacementWaiting:
    """Why the HyperJob ``doc`` waits before any child is placed: one message per generation and reason."""
    return events.ChildPlacementWaiting(
        **rt.envelope(cause, f"waiting/{doc.generation}/{reason}"), child="", hyperjob=doc.name, reason=reason
    )
