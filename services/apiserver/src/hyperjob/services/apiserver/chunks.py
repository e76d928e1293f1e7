"""Lists in chunks, as Kubernetes serves them (``limit`` and ``continue``): a list asked with
``limit=N`` answers N objects in key order (namespace, then name) and, when more are left, a
``continue`` token; the token names the list's ``resourceVersion`` and the last key answered, so
each following chunk comes from the same snapshot. kubectl asks for chunks of 500
(``--chunk-size``); informers and the client libraries' pagers follow the tokens.

The token is opaque to clients; it is, as Kubernetes' own, base64 of a small JSON object.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from .objects import Entry, Key

TOKEN_VERSION = "meta.k8s.io/v1"


class ChunkError(ValueError):
    """A ``limit`` or ``continue`` the apiserver cannot read; the message names the parameter."""


class _Token(msgspec.Struct, frozen=True):
    v: str
    rv: int
    start: list[str]  # the last key answered: [namespace, name]


@dataclass(frozen=True)
class Continue:
    """Where a list goes on: the snapshot's version and the last key already answered."""

    version: int
    after: Key


def encode(token: Continue) -> str:
    raw = msgspec.json.encode(_Token(TOKEN_VERSION, token.version, list(token.after)))
    return base64.urlsafe_b64encode(raw).decode()


def decode(text: str) -> Continue:
    """The token a list answered with; ChunkError naming ``continue`` for anything else."""
    try:
        token = msgspec.json.decode(base64.urlsafe_b64decode(text.encode()), type=_Token)
    except (binascii.Error, ValueError, msgspec.DecodeError) as exc:
        raise ChunkError(f"continue: not a token this apiserver answered with ({exc})") from None
    if token.v != TOKEN_VERSION or token.rv <= 0 or len(token.start) != 2:
        raise ChunkError("continue: not a token this apiserver answered with")
    return Continue(token.rv, (token.start[0], token.start[1]))


def limit_of(text: str | None) -> int:
    """``limit``: how many objects a chunk holds (0, or none given: every object at once)."""
    if not text:
        return 0
    try:
        limit = int(text)
    except ValueError:
        raise ChunkError(f"limit: must be a whole number, not {text!r}") from None
    if limit < 0:
        raise ChunkError(f"limit: must not be negative, not {limit}")
    return limit


@dataclass(frozen=True)
class Chunk:
    items: list[Entry]
    after: Key | None  # the last key answered when more are left, else None
    remaining: int  # objects left after this chunk


def chunk(entries: Sequence[Entry], after: Key | None, limit: int) -> Chunk:
    """The objects after ``after`` (every one without), in key order, at most ``limit`` (0: all)."""
    ordered = sorted((e for e in entries if after is None or e.key > after), key=lambda e: e.key)
    if not limit or len(ordered) <= limit:
        return Chunk(ordered, None, 0)
    return Chunk(ordered[:limit], ordered[limit - 1].key, len(ordered) - limit)
