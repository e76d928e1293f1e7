"""The answer to a request (``hj.result.<request>``), for every service that takes requests (the
splitter, the workflow-controller): its id derived from the request's, so a redelivered request
is answered once, and the decision logged."""

from __future__ import annotations

from hyperjob import events
from hyperjob.events import subjects
from hyperjob.telemetry.spans import decision

from .runtime import Reaction, Runtime


def accepted(rt: Runtime, msg: events.Message, kind: str, name: str, outcome: events.Outcome) -> Reaction:
    decision("request_accepted", request=msg.event_id, kind=kind, name=name, outcome=outcome)
    answer = events.RequestAccepted(**rt.envelope(msg, "answer"), kind=kind, name=name, outcome=outcome)
    return Reaction().publish(subjects.result(msg.event_id), answer)


def rejected(rt: Runtime, msg: events.Message, kind: str, name: str, reason: str) -> Reaction:
    decision("request_rejected", request=msg.event_id, kind=kind, name=name, reason=reason)
    answer = events.RequestRejected(**rt.envelope(msg, "answer"), kind=kind, name=name, reason=reason)
    return Reaction().publish(subjects.result(msg.event_id), answer)
