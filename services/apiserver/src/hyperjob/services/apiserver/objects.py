"""The API objects of each resource as the read model shows them, with what Kubernetes clients
expect of an object (``resourceVersion``, ``uid``, ``generation``) and a history of changes for
watches.

The system keeps no resource versions of its own: the apiserver gives every change it sees a
number, from one counter for all resources (as etcd's revision). Reading a resource compares each
object with what was last seen and records ADDED, MODIFIED and DELETED with the next number; a
watch replays the recorded changes after the version it starts from. The counter starts at the
time the apiserver started (in milliseconds), so versions handed out by an earlier apiserver are
older than any it keeps: a watch resuming from one gets 410 Gone and lists again, as informers do.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import deque
from dataclasses import dataclass, field

import msgspec

from hyperjob.client import Client
from hyperjob.store import StoreUnavailableError

from .patch import fill_omitted
from .resources import Resource, View

HISTORY = 10_000  # changes kept per resource for watches to replay
UID_NAMESPACE = uuid.UUID("5f0c6f1e-7c1a-4b8e-9a55-2f7d6a1c0b11")


@dataclass(frozen=True)
class Entry:
    """One object as last seen: its view (table cells), the API object and its version."""

    version: int
    view: View
    obj: View
    content: bytes  # the object without its version: what a change is judged by

    @property
    def key(self) -> tuple[str, str]:
        metadata = self.obj["metadata"]
        return metadata.get("namespace", ""), metadata["name"]


@dataclass(frozen=True)
class Change:
    version: int
    type: str  # ADDED, MODIFIED, DELETED
    entry: Entry


@dataclass
class _Seen:
    entries: dict[tuple[str, str], Entry] = field(default_factory=dict)
    history: deque[Change] = field(default_factory=lambda: deque(maxlen=HISTORY))
    read_at: float = 0.0  # monotonic
    begun: int = 0  # reads begun (one at a time, under ``lock``)
    done: int = 0  # the number (``begun``) of the latest read that succeeded
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class TooOld(Exception):
    """A version older than the history kept (or from an earlier apiserver): 410 Gone."""


class Objects:
    def __init__(self, client: Client, *, start: int | None = None) -> None:
        self.client = client
        self.first = start if start is not None else int(time.time() * 1000)
        self.version = self.first
        self._seen: dict[str, _Seen] = {}

    async def read(self, resource: Resource, max_age: float = 0.0) -> list[Entry]:
        """Every object of ``resource`` now (or as read less than ``max_age`` seconds ago), its
        changes since the last read recorded.

        "Now" is a read begun after the call: requests that arrive while a read is under way
        share the next one (a create finds the object another request created before it was
        sent), so concurrent requests cost one read each round, not one each."""
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
            current: dict[tuple[str, str], Entry] = {}
            for item in views:
                obj = api_object(resource, item)
                content = msgspec.json.encode(obj)
                key = (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
                before = seen.entries.get(key)
                if before is not None and before.content == content:
                    current[key] = before
                    continue
                current[key] = self._record(seen, "ADDED" if before is None else "MODIFIED", item, obj, content)
            for key, gone in seen.entries.items():
                if key not in current:
                    self._record(seen, "DELETED", gone.view, gone.obj, gone.content)
            seen.entries = current
            seen.done = number
            return list(current.values())

    def _record(self, seen: _Seen, type_: str, item: View, obj: View, content: bytes) -> Entry:
        self.version += 1
        versioned = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.version)}}
        entry = Entry(self.version, item, versioned, content)
        seen.history.append(Change(self.version, type_, entry))
        return entry

    def changes_since(self, resource: Resource, version: int) -> list[Change]:
        """The changes of ``resource`` after ``version``; TooOld when some of them are forgotten."""
        seen = self._seen.setdefault(resource.served_at, _Seen())
        oldest = seen.history[0].version if seen.history else self.version + 1
        if version < self.first or (len(seen.history) == HISTORY and version < oldest - 1):
            raise TooOld(f"too old resource version: {version} ({self.first})")
        return [c for c in seen.history if c.version > version]


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
