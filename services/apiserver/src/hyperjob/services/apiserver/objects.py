"""The API objects of each resource as the read model shows them, with what Kubernetes clients
expect of an object (``resourceVersion``, ``uid``, ``generation``) and the changes watches replay.

The services keep no resource versions of their own, so the apiserver records every change it
sees in its changelog (``state.apiserver.<resource>.<object>`` on the STATE stream, the latest
entry per object kept, a deletion as a tombstone: ``servicekit.changelog``, which every service
instance may write): reading a resource compares each object with what was last recorded and
publishes ADDED, MODIFIED and DELETED; the stream sequence of that entry is the object's
``resourceVersion``, as etcd's revision is Kubernetes'. Versions are therefore durable: a
restarted apiserver reads its changelog back, an unchanged object keeps its version, and a watch
resuming from a version handed out before the restart gets what changed since (the objects whose
entry is newer, the tombstones newer than it) instead of 410 Gone. Only a version this system's
changelog never reached (a newer one, or one of another system) is answered 410.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
import urllib.parse
import uuid
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

import msgspec

from hyperjob.bus import Bus
from hyperjob.client import Client
from hyperjob.servicekit.changelog import H_DELETED, parse_state_subject, state_subject
from hyperjob.store import Output, StoreUnavailableError

from .patch import fill_omitted
from .resources import RESOURCES, Resource, View

HISTORY = 10_000  # changes kept in memory per resource, replayed to watches one by one
# Lists answered in chunks are kept for their ``continue`` tokens: the latest few, a few minutes
# (Kubernetes keeps them until etcd compacts, every 5 minutes); a token past them gets 410.
SNAPSHOTS = 32
SNAPSHOT_SECONDS = 300.0
UID_NAMESPACE = uuid.UUID("5f0c6f1e-7c1a-4b8e-9a55-2f7d6a1c0b11")
INSTANCE = "apiserver"  # the instance whose changelog (``state.apiserver.>``) keeps the versions
Key = tuple[str, str]  # (namespace, name); "" for a cluster-scoped object
SERVED = {r.served_at: r for r in RESOURCES}
# An object's field managers are kept in the changelog too, beside its entries, by kind (a
# HyperJob's are the same through both its groups): ``state.apiserver.managedfields/<kind>.<object>``.
MANAGERS = "managedfields/"


@dataclass(frozen=True)
class Entry:
    """One object as last seen: its view (table cells), the API object, its version and the
    version it was added at."""

    version: int
    created: int
    view: View
    obj: View
    digest: str  # of the object without its version: what a change is judged by

    @property
    def key(self) -> Key:
        metadata = self.obj["metadata"]
        return metadata.get("namespace", ""), metadata["name"]


@dataclass(frozen=True)
class Change:
    version: int
    type: str  # ADDED, MODIFIED, DELETED
    entry: Entry


class Stamp(msgspec.Struct, frozen=True):
    """What the changelog keeps of one object: enough to tell whether it changed while no
    apiserver ran, and to name it in a DELETED event. ``created`` 0: added by this entry."""

    digest: str
    created: int
    uid: str


class Managers(msgspec.Struct, frozen=True):
    """An object's ``managedFields`` and the uid of the object they are of (a later object of the
    name has none of them; "" until the created object was read)."""

    uid: str
    entries: list[dict[str, Any]]


@dataclass
class _Seen:
    entries: dict[Key, Entry] = field(default_factory=dict)
    recorded: dict[Key, tuple[int, Stamp]] = field(default_factory=dict)  # from the changelog, until read
    tombstones: dict[Key, Change] = field(default_factory=dict)
    history: deque[Change] = field(default_factory=lambda: deque(maxlen=HISTORY))
    read_at: float = 0.0  # monotonic
    begun: int = 0  # reads begun (one at a time, under ``lock``)
    done: int = 0  # the number (``begun``) of the latest read that succeeded
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class TooOld(Exception):
    """A version this system's changelog never reached: 410 Gone, the client lists again."""


class Objects:
    def __init__(self, client: Client, bus: Bus | None = None) -> None:
        self.client = client
        self.bus: Bus = bus if bus is not None else client.bus
        self.version = 0  # the latest version recorded (the newest changelog entry)
        self.first = 0  # the latest version when this apiserver started: later ones are in ``history``
        self._seen: dict[str, _Seen] = {}
        self._restored = False
        self._restoring = asyncio.Lock()
        self._managers: dict[tuple[str, Key], Managers] = {}
        self._snapshots: OrderedDict[tuple[str, int], tuple[float, list[Entry]]] = OrderedDict()

    async def read(self, resource: Resource, max_age: float = 0.0) -> list[Entry]:
        """Every object of ``resource`` now (or as read less than ``max_age`` seconds ago), its
        changes since the last read recorded.

        "Now" is a read begun after the call: requests that arrive while a read is under way
        share the next one (a create finds the object another request created before it was
        sent), so concurrent requests cost one read each round, not one each."""
        await self._restore()
        seen = self._seen.setdefault(resource.served_at, _Seen())
        arrived = seen.begun
        async with seen.lock:
            if seen.done > arrived:  # a read begun since the call succeeded
                return list(seen.entries.values())
            if max_age and time.monotonic() - seen.read_at < max_age:
                return list(seen.entries.values())
            seen.begun += 1
            number = seen.begun
            try:
                views = await resource.load(self.client, None)
            except StoreUnavailableError:  # a connection Redis closed (an ACL reload): once more, reconnected
                views = await resource.load(self.client, None)
            seen.read_at = time.monotonic()
            await self._compare(resource, seen, views)
            seen.done = number
            return list(seen.entries.values())

    async def _compare(self, resource: Resource, seen: _Seen, views: list[View]) -> None:
        """Record what changed between the last read (or what the changelog says) and ``views``."""
        current: dict[Key, Entry] = {}
        changed: list[tuple[str, Entry]] = []  # their versions come from the changelog
        for item in views:
            obj = self._with_managers(resource, api_object(resource, item))
            digest = _digest(obj)
            key: Key = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
            before = seen.entries.get(key) or _restored(seen, key, item, obj)
            if before is not None and before.digest == digest:
                current[key] = before
            else:
                created = before.created if before is not None else 0
                changed.append(("ADDED" if before is None else "MODIFIED", Entry(0, created, item, obj, digest)))
                current[key] = changed[-1][1]
        known = {**{k: _gone(resource, k, v, s) for k, (v, s) in seen.recorded.items()}, **seen.entries}
        changed += [("DELETED", gone) for key, gone in known.items() if key not in current]
        versions = await self._publish(resource, changed)
        for (type_, entry), version in zip(changed, versions, strict=True):
            recorded = Entry(
                version, entry.created or version, entry.view, _versioned(entry.obj, version), entry.digest
            )
            change = Change(version, type_, recorded)
            seen.history.append(change)
            if type_ == "DELETED":
                seen.tombstones[recorded.key] = change
            else:
                seen.tombstones.pop(recorded.key, None)
                current[recorded.key] = recorded
        seen.entries, seen.recorded = current, {}

    async def _publish(self, resource: Resource, changed: list[tuple[str, Entry]]) -> list[int]:
        """Each change as the object's changelog entry, in order; their stream sequences."""
        if not changed:
            return []
        entries = []
        for type_, entry in changed:
            subject = state_subject(INSTANCE, resource.served_at, _object_token(entry.key))
            stamp = Stamp(entry.digest if type_ != "DELETED" else "", entry.created, entry.obj["metadata"]["uid"])
            headers = {H_DELETED: "1"} if type_ == "DELETED" else None
            payload = msgspec.json.encode(stamp)
            entries.append(Output(subject=subject, msg_id=str(uuid.uuid4()), payload=payload, headers=headers))
        acks = await self.bus.publish_many(entries)
        self.version = max(self.version, *(a.seq for a in acks))
        return [a.seq for a in acks]

    async def _restore(self) -> None:
        """Once, before the first read: every object's latest changelog entry (the versions an
        earlier apiserver handed out), tombstones included."""
        if self._restored:
            return
        async with self._restoring:
            if self._restored:
                return
            latest = await self.bus.last_per_subject(f"state.{INSTANCE}.>")
            for delivery in latest.values():
                served_at, token = parse_state_subject(INSTANCE, delivery.subject)
                if served_at.startswith(MANAGERS):
                    with contextlib.suppress(msgspec.DecodeError):
                        kept = msgspec.json.decode(delivery.data, type=Managers)
                        self._managers[(served_at.removeprefix(MANAGERS), _object_key(token))] = kept
                    continue
                try:
                    stamp = msgspec.json.decode(delivery.data, type=Stamp)
                except msgspec.DecodeError:
                    continue  # not an entry this code wrote: the object reads as new
                resource = SERVED.get(served_at)
                if resource is None:
                    continue  # a resource no longer served
                seen = self._seen.setdefault(served_at, _Seen())
                key = _object_key(token)
                if delivery.headers.get(H_DELETED):
                    gone = _gone(resource, key, delivery.seq, stamp)
                    seen.tombstones[key] = Change(delivery.seq, "DELETED", gone)
                else:
                    seen.recorded[key] = (delivery.seq, stamp)
                self.version = max(self.version, delivery.seq)
            self.first = self.version
            self._restored = True

    async def record_managers(self, resource: Resource, key: Key, uid: str, entries: list[View]) -> None:
        """Keep an object's field managers, once the splitter accepted the write that made them:
        in the changelog (a restarted apiserver reads them back) and shown from the next read on."""
        kept = Managers(uid=uid, entries=entries)
        if self._managers.get((resource.kind, key)) == kept:
            return
        subject = state_subject(INSTANCE, MANAGERS + resource.kind, _object_token(key))
        payload = msgspec.json.encode(kept)
        await self.bus.publish_many([Output(subject=subject, msg_id=str(uuid.uuid4()), payload=payload)])
        self._managers[(resource.kind, key)] = kept

    def _with_managers(self, resource: Resource, obj: View) -> View:
        """``obj`` with the ``managedFields`` kept for it, if any."""
        metadata = obj["metadata"]
        kept = self._managers.get((resource.kind, (metadata.get("namespace", ""), metadata["name"])))
        if kept is None or not kept.entries or kept.uid not in ("", metadata["uid"]):
            return obj
        return {**obj, "metadata": {**metadata, "managedFields": kept.entries}}

    def keep(self, resource: Resource, version: int, entries: list[Entry]) -> None:
        """Keep a list answered in chunks, for the chunks that follow (``snapshot``)."""
        self._snapshots[(resource.served_at, version)] = (time.monotonic(), entries)
        self._snapshots.move_to_end((resource.served_at, version))
        while len(self._snapshots) > SNAPSHOTS:
            self._snapshots.popitem(last=False)

    def snapshot(self, resource: Resource, version: int) -> list[Entry] | None:
        """The objects of ``resource`` as a list at ``version`` answered them, if still kept."""
        kept = self._snapshots.get((resource.served_at, version))
        if kept is None or time.monotonic() - kept[0] > SNAPSHOT_SECONDS:
            return None
        return kept[1]

    def changes_since(self, resource: Resource, version: int) -> list[Change]:
        """The changes of ``resource`` after ``version``: one by one from the history when it
        reaches back that far, else (an earlier apiserver's version) each object whose entry is
        newer, as it is now, and each newer tombstone. TooOld for a version never recorded."""
        if version > self.version:
            raise TooOld(f"too old resource version: {version} (the changelog is at {self.version})")
        seen = self._seen.setdefault(resource.served_at, _Seen())
        complete = len(seen.history) < HISTORY or version >= seen.history[0].version - 1
        if version >= self.first and complete:
            return [c for c in seen.history if c.version > version]
        newer = [
            Change(e.version, "ADDED" if e.created > version else "MODIFIED", e)
            for e in seen.entries.values()
            if e.version > version
        ]
        gone = [c for c in seen.tombstones.values() if c.version > version]
        return sorted(newer + gone, key=lambda c: c.version)


def _digest(obj: View) -> str:
    return hashlib.blake2b(msgspec.json.encode(obj), digest_size=16).hexdigest()


def _versioned(obj: View, version: int) -> View:
    return {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(version)}}


def _restored(seen: _Seen, key: Key, item: View, obj: View) -> Entry | None:
    """The object as the changelog recorded it (before this apiserver first read it), or None."""
    if key not in seen.recorded:
        return None
    version, stamp = seen.recorded[key]
    return Entry(version, stamp.created or version, item, _versioned(obj, version), stamp.digest)


def _gone(resource: Resource, key: Key, version: int, stamp: Stamp) -> Entry:
    """An object the changelog recorded and that is gone: named, as a DELETED event needs it."""
    metadata = {"name": key[1], "uid": stamp.uid, **({"namespace": key[0]} if key[0] else {})}
    named = {"apiVersion": resource.group_version, "kind": resource.kind, "metadata": metadata}
    return Entry(version, stamp.created or version, {}, _versioned(named, version), stamp.digest)


def _object_token(key: Key) -> str:
    """An object's key as one subject token (no wildcard or space can reach the subject)."""
    return urllib.parse.quote(f"{key[0]}/{key[1]}", safe="")


def _object_key(token: str) -> Key:
    namespace, _, name = urllib.parse.unquote(token).partition("/")
    return namespace, name


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def api_object(resource: Resource, item: View) -> View:
    """The object as a Kubernetes client expects it: the manifest, with ``uid`` and ``generation``;
    no namespace on a cluster-scoped kind; in the form of the group it is read through."""
    obj = in_form(resource, resource.manifest(item))
    metadata = {**obj.get("metadata", {})}
    if not resource.namespaced:
        metadata.pop("namespace", None)
    metadata["uid"] = str(
        uuid.uuid5(
            UID_NAMESPACE,
            f"{resource.qualified}/{metadata.get('namespace', '')}/{metadata['name']}/{item.get('created', 0)}",
        )
    )
    metadata["generation"] = item.get("generation", 1)
    return {**obj, "metadata": metadata}


def in_form(resource: Resource, obj: View) -> View:
    """The object as kubectl last applied it (its last-applied configuration), so that kubectl's
    three-way patch compares like with like: the services keep a manifest normalized, defaults
    omitted (``fill_omitted`` shows them again) and a HyperJob applied in the conceptual form
    (``batch.volcano.sh``) in the upstream one (``training.volcano.sh``, ``api.hyperjob.normalize``):
    read through the group it was applied in, it shows as applied. An object kubectl did not apply
    shows as stored."""
    metadata = obj.get("metadata", {})
    try:
        applied = msgspec.json.decode(metadata.get("annotations", {})[LAST_APPLIED])
    except (KeyError, TypeError, msgspec.DecodeError):
        return obj
    if not isinstance(applied, dict) or applied.get("apiVersion") != resource.group_version:
        return obj
    written = {k: v for k, v in applied.items() if k not in ("metadata", "status")}
    if obj.get("apiVersion") != resource.group_version:  # the other form: as applied
        return {**{k: v for k, v in obj.items() if k != "spec"}, **written, "metadata": metadata}
    body = {k: v for k, v in obj.items() if k not in ("metadata", "status")}
    return {**fill_omitted(body, written), "metadata": metadata, "status": obj.get("status", {})}
