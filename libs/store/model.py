"""Values the store takes and returns: documents, writes, outputs, apply and bind results."""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

__all__ = ["ApplyItem", "ApplyResult", "BindResult", "Binding", "Conflict", "Doc", "NodeUsage", "Output", "Write",
           "encode_doc", "fmt_amount"]

T = TypeVar("T")


def encode_doc(doc: Any) -> bytes:
    """Bytes as they are (already JSON); anything else (a msgspec Struct, a dict) as msgspec JSON."""
    if isinstance(doc, bytes):
        return doc
    return msgspec.json.encode(doc)


class Doc(msgspec.Struct, frozen=True, kw_only=True):
    """A stored JSON document and its version (1 on creation, +1 per write)."""

    kind: str
    name: str
    version: int
    data: bytes

    def decode(self, type_: type[T]) -> T:
        """The document decoded strictly as ``type_`` (raises ``msgspec.ValidationError``)."""
        return msgspec.json.decode(self.data, type=type_)


class Write(msgspec.Struct, frozen=True, kw_only=True):
    """One document write inside ``apply``: a put (``data``) or a delete (``data is None``).
    ``expected_version``: ``None`` writes unconditionally, ``0`` requires the document to be absent,
    ``n`` requires version ``n``. Build with ``Write.put(...)`` / ``Write.delete(...)``."""

    kind: str
    name: str
    data: bytes | None
    expected_version: int | None = None

    @classmethod
    def put(cls, kind: str, name: str, doc: Any, expected_version: int | None = None) -> Write:
        return cls(kind=kind, name=name, data=encode_doc(doc), expected_version=expected_version)

    @classmethod
    def delete(cls, kind: str, name: str, expected_version: int | None = None) -> Write:
        return cls(kind=kind, name=name, data=None, expected_version=expected_version)


class Output(msgspec.Struct, frozen=True, kw_only=True):
    """A message a handler will publish after its write; ``bus.publish_many`` accepts it as is."""

    subject: str
    msg_id: str
    payload: bytes
    headers: dict[str, str] | None = None


class ApplyItem(msgspec.Struct, frozen=True, kw_only=True):
    """One event's ``apply`` inside ``apply_many``: its id, its writes, the outputs to record."""

    event_id: str
    writes: list[Write] = []
    outputs: list[Any] = []


class Conflict(msgspec.Struct, frozen=True, kw_only=True):
    """The first write of an ``apply`` whose expected version did not match (nothing was written)."""

    kind: str
    name: str
    expected: int
    actual: int


class ApplyResult(msgspec.Struct, frozen=True, kw_only=True):
    """What ``apply`` did. Exactly one of: applied (``ok``), ``duplicate`` (the marker existed:
    nothing written, ``outputs`` are those recorded the first time), or ``conflict`` (nothing
    written, no marker set). ``versions`` are the new versions of the writes (0 for deletes)."""

    duplicate: bool = False
    conflict: Conflict | None = None
    outputs: list[Output | bytes] = []
    versions: list[int] = []

    @property
    def ok(self) -> bool:
        return not self.duplicate and self.conflict is None


class Binding(msgspec.Struct, frozen=True):
    """One pod of a gang placed on one node with its resource request (base units)."""

    pod: str
    node: str
    request: dict[str, float]


class BindResult(msgspec.Struct, frozen=True, kw_only=True):
    """``ok``: every pod is bound (pods already bound to the same node count as bound).
    Otherwise nothing changed and either ``failed_node`` lacks ``missing`` (resource -> shortfall;
    empty when the node is unknown) or ``failed_pod`` is already bound to ``bound_node``."""

    ok: bool
    failed_node: str | None = None
    missing: dict[str, float] = {}
    failed_pod: str | None = None
    bound_node: str | None = None


class NodeUsage(msgspec.Struct, frozen=True, kw_only=True):
    """A node's allocatable, what bound pods use, and the difference."""

    allocatable: dict[str, float]
    used: dict[str, float]

    @property
    def free(self) -> dict[str, float]:
        return {r: a - self.used.get(r, 0.0) for r, a in self.allocatable.items()}


def check_gang(gang: list[Binding]) -> None:
    """A gang names each pod once and requests no negative amount (``ValueError`` otherwise)."""
    if len({b.pod for b in gang}) != len(gang):
        raise ValueError("a gang names a pod twice")
    for b in gang:
        if any(a < 0 for a in b.request.values()):
            raise ValueError(f"negative request for pod {b.pod}")


def fmt_amount(value: float) -> str:
    """A resource amount as the exact shortest decimal (``repr``), as Redis stores it."""
    return repr(float(value))


DEFAULT_PODS = 110.0
