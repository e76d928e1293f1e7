"""The envelope every message carries, and the helpers that name and encode messages."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable
from typing import TypedDict

import msgspec

# All event ids are uuid5 under this namespace, so a retried handler derives the same ids.
EVENT_NAMESPACE = uuid.UUID("6f1c7a52-7d4b-4f0e-9a57-3c0f1f9b2a10")


class Message(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """Base of every command and event.

    ``event_id`` is deterministic (``derive_id``) so JetStream's duplicate window drops a retried
    publish; ``causation_id`` is the id of the message whose handling produced this one and
    ``correlation_id`` the id of the user request that started the chain (a HyperJob's trace).
    """

    event_id: str
    occurred_at: float = 0.0
    producer: str = ""
    correlation_id: str = ""
    causation_id: str = ""
    aggregate_id: str = ""
    aggregate_version: int = 0


class Envelope(TypedDict):
    """The envelope fields of a message a service emits (``servicekit.Runtime.envelope`` fills them
    in): a message is built as ``events.X(**envelope, field=...)``, so mypy checks its fields."""

    event_id: str
    occurred_at: float
    producer: str
    correlation_id: str
    causation_id: str


def derive_id(parent_id: str, step: str) -> str:
    """A deterministic id for the message a handler emits as ``step`` while handling ``parent_id``."""
    return str(uuid.uuid5(EVENT_NAMESPACE, f"{parent_id}/{step}"))


def round_id(instance: str, step: str, now: float, decided: Iterable[str]) -> str:
    """The id of one round of a service's periodic work (a scheduling cycle, a re-planning round),
    from who ran it (``instance``), when (``now``) and what it decided (``decided``: its outputs'
    ids, in order, and whatever else it changes). It names the round's changelog entries and outbox
    record; the round's messages take their own ids from what they say (``derive_id``). The one
    recipe every service's rounds use: a redone round that decides alike is the same unit of work.
    """
    digest = hashlib.sha1(repr(now).encode())
    for part in decided:
        digest.update(part.encode())
    return derive_id(instance, f"{step}/{digest.hexdigest()}")


def new_request_id() -> str:
    """The id of a message that starts a chain (a user request); the only random id."""
    return str(uuid.uuid4())
