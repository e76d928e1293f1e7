"""The dead-letter queue as an operator sees it: list, replay, purge (``hyperjob get dlq``,
``hyperjob dlq replay|purge``).

A dead letter is a message on ``dlq.<durable>`` in the ``DLQ`` stream: the original payload and
headers plus the ``Hyperjob-*`` headers of ``dispatch`` (reason, error, original subject, stream
and sequence), or only the reference when the original was too large to copy.

Replaying puts the original back on its subject — read from the letter, or by reference from its
stream — and then deletes the letter. It has one effect however often it is run: the republished
message carries an id derived from the letter (``replay.<DLQ seq>``), so a replay retried within
the stream's duplicate window is dropped by the server, and its payload keeps the event's own id,
so every consumer of the subject (the other consumers too) handles it at most once (their dedup
markers, ADR 0002). A replayed message that fails again is dead-lettered again, as a new letter.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import msgspec

from .dispatch import (
    DEAD_LETTER_HEADERS,
    H_BY_REFERENCE,
    H_DLQ_REASON,
    H_ERROR,
    H_ERROR_TYPE,
    H_NUM_DELIVERED,
    H_ORIGINAL_MSG_ID,
    H_ORIGINAL_SEQ,
    H_ORIGINAL_STREAM,
    H_ORIGINAL_SUBJECT,
    H_WATCH,
)
from .model import DLQ_STREAM, MSG_ID, Delivery, Payload, PublishAck

__all__ = ["DeadLetter", "DeadLetterError", "dead_letters", "purge", "replay"]

_OURS = DEAD_LETTER_HEADERS | {MSG_ID}  # the letter's own id goes too: a replay gets its own


class DeadLetterError(Exception):
    """A letter could not be replayed (its original is gone, or the bus refused)."""


class DeadLetter(msgspec.Struct, frozen=True, kw_only=True):
    """One dead letter: ``seq`` is its position in the DLQ stream (what ``--seq`` names)."""

    seq: int
    consumer: str
    subject: str
    reason: str
    error_type: str
    error: str
    stream: str
    original_seq: int
    deliveries: int
    by_reference: bool
    watch: str
    at: float
    size: int
    msg_id: str = ""

    @classmethod
    def of(cls, delivery: Delivery, at: float) -> DeadLetter:
        h = delivery.headers
        return cls(
            seq=delivery.seq,
            consumer=delivery.subject.removeprefix("dlq."),
            subject=h.get(H_ORIGINAL_SUBJECT, ""),
            reason=h.get(H_DLQ_REASON, ""),
            error_type=h.get(H_ERROR_TYPE, ""),
            error=h.get(H_ERROR, ""),
            stream=h.get(H_ORIGINAL_STREAM, ""),
            original_seq=int(h.get(H_ORIGINAL_SEQ, "0") or 0),
            deliveries=int(h.get(H_NUM_DELIVERED, "0") or 0),
            by_reference=h.get(H_BY_REFERENCE) == "1",
            watch=h.get(H_WATCH, ""),
            at=at,
            size=len(delivery.data),
            msg_id=h.get(H_ORIGINAL_MSG_ID, ""),
        )


class _Bus(Protocol):
    async def stored(self, subject_filter: str, *, stream: str | None = None) -> list[tuple[Delivery, float]]: ...

    async def message(self, stream: str, seq: int) -> Delivery | None: ...

    async def delete_message(self, stream: str, seq: int) -> bool: ...

    async def publish(
        self, subject: str, event: Payload, *, msg_id: str, headers: Mapping[str, str] | None = None
    ) -> PublishAck: ...


def _chosen(letter: DeadLetter, consumer: str | None, seq: int | None) -> bool:
    return (consumer is None or letter.consumer == consumer) and (seq is None or letter.seq == seq)


async def dead_letters(bus: _Bus, *, consumer: str | None = None, seq: int | None = None) -> list[DeadLetter]:
    """The dead letters, oldest first (only ``consumer``'s, or the one at ``seq``, if given)."""
    subject = f"dlq.{consumer}" if consumer else "dlq.>"
    stored = await bus.stored(subject, stream=DLQ_STREAM.name)
    letters = [DeadLetter.of(d, at) for d, at in stored]
    return [letter for letter in letters if _chosen(letter, consumer, seq)]


async def replay(bus: _Bus, letter: DeadLetter) -> None:
    """Put ``letter``'s original back on its subject, then delete the letter (see the module)."""
    stored = await bus.message(DLQ_STREAM.name, letter.seq)
    if stored is None:
        return  # replayed or purged meanwhile
    if letter.by_reference:
        original = await bus.message(letter.stream, letter.original_seq)
        if original is None:
            raise DeadLetterError(
                f"dlq #{letter.seq}: its original ({letter.stream} #{letter.original_seq}) is no longer stored;"
                " purge the letter"
            )
        payload, headers = original.data, original.headers
    else:
        payload, headers = stored.data, stored.headers
    kept = {k: v for k, v in headers.items() if k not in _OURS}
    await bus.publish(letter.subject, payload, msg_id=f"replay.{letter.seq}", headers=kept)
    await bus.delete_message(DLQ_STREAM.name, letter.seq)


async def purge(bus: _Bus, letter: DeadLetter) -> bool:
    """Delete ``letter`` without replaying it."""
    return await bus.delete_message(DLQ_STREAM.name, letter.seq)
