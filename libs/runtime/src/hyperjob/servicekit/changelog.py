"""The changelog (ADR 0004 §4): every document an instance commits is also published, after its
commit, on ``state.<instance>.<kind>.<name>``, a latest-value subject per document (a deletion as
a tombstone). A store that lost the instance's state is restored from the latest value of each.

Invariant: a changelog entry carries the version its write gives the document (``H_VERSION``), so
the restored store resumes the versions that later commits check against."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from hyperjob.bus import Bus, Delivery
from hyperjob.events import derive_id
from hyperjob.store import Binding, Doc, Output, Unbind, Write, binding_kind, entry_of

H_VERSION = "Hyperjob-Version"
H_DELETED = "Hyperjob-Deleted"


def state_subject(instance: str, kind: str, name: str) -> str:
    """The changelog subject of one document (a ``.`` inside a name would split its token)."""
    return f"state.{_token(instance)}.{_token(kind)}.{_token(name)}"


def parse_state_subject(instance: str, subject: str) -> tuple[str, str]:
    """(kind, name) of a changelog subject of ``instance``."""
    kind, _, name = subject[len(f"state.{_token(instance)}.") :].partition(".")
    return _untoken(kind), _untoken(name)


def _token(text: str) -> str:
    return text.replace("%", "%25").replace(".", "%2E")


def _untoken(text: str) -> str:
    return text.replace("%2E", ".").replace("%25", "%")


def changelog_outputs(
    instance: str, writes: Sequence[Write], binds: Sequence[Binding], unbinds: Sequence[Unbind], unit: str
) -> list[Output]:
    """Every document one commit writes (its ``unit`` names it), as changelog entries."""
    out = []
    for w in writes:
        # The version this write gives the document: the commit checks ``expected_version``.
        version = (w.expected_version or 0) + 1
        out.append(_entry(instance, w.kind, w.name, w.data, unit, version))
    for b in binds:
        out.append(_entry(instance, binding_kind(b.cluster), b.pod, entry_of(b).encode(), unit))
    for u in unbinds:
        out.append(_entry(instance, binding_kind(u.cluster), u.pod, None, unit))
    return out


def _entry(instance: str, kind: str, name: str, data: bytes | None, unit: str, version: int = 1) -> Output:
    # A tombstone (data None) keeps the subject, saying "gone", until it is purged.
    headers = {H_DELETED: "1"} if data is None else {H_VERSION: str(version)}
    return Output(
        subject=state_subject(instance, kind, name),
        msg_id=derive_id(unit, f"state/{kind}/{name}"),
        payload=data or b"",
        headers=headers,
    )


async def latest_documents(
    bus: Bus, instance: str, restorable: Callable[[str, Delivery], Awaitable[bool]]
) -> list[Doc]:
    """The documents ``instance``'s changelog holds now (tombstones left out), those
    ``restorable`` accepts (a poisoned entry would make every later load fail)."""
    latest = await bus.last_per_subject(f"state.{_token(instance)}.>")
    docs = []
    for delivery in latest.values():
        if delivery.headers.get(H_DELETED):
            continue
        kind, name = parse_state_subject(instance, delivery.subject)
        if await restorable(kind, delivery):
            version = int(delivery.headers.get(H_VERSION, "1"))
            docs.append(Doc(kind=kind, name=name, version=version, data=delivery.data))
    return docs
