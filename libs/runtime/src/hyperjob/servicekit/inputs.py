"""Reading what an instance consumes: every payload taken off the bus is decoded here.

A payload is one of three things for an input (a durable consumer or a watch):

- a message of a type the input handles: decoded and returned;
- a message of the catalogue that the input does not handle (another consumer's message on a
  shared subject): ``None``, acked and ignored;
- a message of another type on a request subject (``events.request_type_on``): the subject is the
  request's authority, so it is ``Unreadable`` (``wrong-subject``) too;
- anything else — bytes that are not JSON or not UTF-8, JSON of the wrong shape, a tag that is
  in no catalogue (a newer producer, a forgery), nesting deep enough to exhaust the decoder —
  ``Unreadable``, a ``TerminalError`` whose ``reason`` says which, so the bus dead-letters it at
  once with that reason. Decoding never raises anything else.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from hyperjob import events
from hyperjob.bus import TerminalError
from hyperjob.events import Message

__all__ = ["CATALOGUE_TAGS", "Reader", "Unreadable", "tag_of"]


def _tag(message_type: type) -> str:
    """The ``type`` tag a message type is encoded with."""
    info = msgspec.inspect.type_info(message_type)
    if not isinstance(info, msgspec.inspect.StructType):
        raise TypeError(f"{message_type.__name__} is not a message (a tagged msgspec Struct)")
    return str(info.tag)


# Retired tags included: a consumer that does not handle their successor skips them like any other
# consumer's message, instead of dead-lettering them as unknown.
CATALOGUE_TAGS: frozenset[str] = frozenset(_tag(t) for t in events.ALL_MESSAGES + events.RETIRED_MESSAGES)


class Unreadable(TerminalError):
    """A payload that no handler of this input can take; ``reason`` is ``undecodable`` (not
    JSON, not UTF-8), ``malformed`` (a known type with the wrong shape) or ``unknown-type``."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class _Tagged(msgspec.Struct):
    type: str = "?"


_TAG = msgspec.json.Decoder(_Tagged)


def tag_of(data: bytes) -> str:
    """The ``type`` tag of a JSON object payload, or ``"?"`` when there is none to read."""
    try:
        return _TAG.decode(data).type
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, ValueError):  # ValueError: bad UTF-8
        return "?"


class Reader:
    """Decodes the message types one input handles (built once, at start-up)."""

    def __init__(self, types: Iterable[type[Message]]) -> None:
        self.types = tuple(types)
        self._decoder = events.decoder(*self.types)
        self.tags = frozenset(_tag(t) for t in self.types)

    def read(self, data: bytes, subject: str = "") -> Message | None:
        """The message; ``None`` for another consumer's catalogue message; else ``Unreadable``.
        ``subject``: where it arrived; a request subject carries its own request type only."""
        message = self._decode(data)
        expected = events.request_type_on(subject)
        if expected is not None and type(message) is not expected:
            tag = tag_of(data)
            raise Unreadable("wrong-subject", f"{subject} takes {_tag(expected)} requests only, not {tag[:80]!r}")
        return message

    def _decode(self, data: bytes) -> Message | None:
        try:
            message: Message = self._decoder.decode(data)  # a union of ``types``: each a Message
            return message
        except msgspec.ValidationError as exc:
            tag = tag_of(data)
            if tag in CATALOGUE_TAGS and tag not in self.tags:
                return None
            if tag in self.tags:
                raise Unreadable("malformed", f"malformed {tag}: {exc}") from None
            if tag == "?":
                raise Unreadable("malformed", f"not a message (no type tag): {exc}") from None
            raise Unreadable("unknown-type", f"unknown message type {tag[:80]!r}") from None
        except msgspec.DecodeError as exc:
            raise Unreadable("undecodable", f"not JSON: {exc}") from None
        except (RecursionError, ValueError, OverflowError) as exc:  # defensive: the decoder's own limits
            raise Unreadable("undecodable", f"{type(exc).__name__}: {exc}") from None
