"""A typed Python client for a running HyperJob system: what the ``hyperjob`` CLI itself uses.

Requests (apply, delete, commands) go over NATS JetStream as the msgspec events of
``hyperjob.events`` and are answered on ``hj.result.<request id>`` (``docs/submit-contract.md``
describes the contract for programs in any language); reads come from the store the services
keep. Every failure to reach the system is a ``ClientError`` with a one-line message.

    async with await Client.connect("nats://127.0.0.1:4222", "redis://127.0.0.1:6379") as client:
        answer = await client.apply(manifest_dict)
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterable
from types import TracebackType
from typing import Any, TypedDict, TypeVar

import msgspec

from hyperjob import api, events
from hyperjob.api import manifest as api_manifest
from hyperjob.bus import CredentialsRefusedError, Delivery, PermissionDeniedError
from hyperjob.bus.natsbus import NatsBus
from hyperjob.events import subjects
from hyperjob.events.access import without_credentials
from hyperjob.events.manifest import HyperJobAction
from hyperjob.events.subjects import STREAMS
from hyperjob.store.redis_store import RedisStore

from . import readmodel

Answer = events.RequestAccepted | events.RequestRejected
ANSWERS = events.decoder(events.RequestAccepted, events.RequestRejected)
Manifest = api.RawDocument  # as a client sends it: parsed YAML/JSON, which the splitter checks
T = TypeVar("T")


class Envelope(TypedDict):
    """The envelope fields every request carries."""

    event_id: str
    occurred_at: float
    producer: str


# NATS refuses a message larger than its max_payload (1 MiB by default); a manifest is checked
# against this before anything is sent, with room left for the event's envelope.
MAX_MANIFEST_BYTES = 1024 * 1024 - 4096
PRODUCER = "hyperjob-client"


class ClientError(Exception):
    """The system could not be reached or did not answer; the message is one line for a person."""


def manifest_size(manifest: Manifest) -> int:
    """Bytes the manifest takes on the wire (JSON, as the event carries it)."""
    return len(msgspec.json.encode(manifest))


def check_plain(manifest: Manifest) -> None:
    """Raise ``api.ManifestError`` (naming where) for a manifest nested deeper than ``api``'s
    ``MAX_DEPTH`` or holding more than its ``MAX_VALUES``: walked without recursion."""
    api_manifest.check_plain(manifest)


def check_size(manifest: Manifest) -> None:
    """Raise ``api.ManifestError`` when the manifest is too large to send."""
    size = manifest_size(manifest)
    if size > MAX_MANIFEST_BYTES:
        raise api.ManifestError(
            "$",
            f"the manifest is {size / 1024 / 1024:.1f} MiB; the limit is {MAX_MANIFEST_BYTES / 1024 / 1024:.1f} MiB",
        )


class Client:
    def __init__(self, bus: NatsBus, store: RedisStore, producer: str = PRODUCER) -> None:
        self.bus = bus
        self.store = store
        self.producer = producer

    @classmethod
    async def connect(cls, nats_url: str, redis_url: str, *, producer: str = PRODUCER, timeout: float = 3.0) -> Client:
        shown = without_credentials(nats_url)
        try:
            bus = await NatsBus.connect(nats_url, STREAMS, name=producer, connect_timeout=timeout)
        except CredentialsRefusedError:
            raise ClientError(
                f"NATS at {shown} refused the credentials: the user or password is wrong (HYPERJOB_USER, NATS_URL)"
            ) from None
        except Exception as exc:  # BusError, OSError, a timeout: all mean "not reachable"
            raise ClientError(f"cannot reach NATS at {shown}: {_one_line(exc)} (is `hyperjob up` running?)") from None
        try:
            store = await asyncio.wait_for(RedisStore.connect(redis_url), timeout)
        except Exception as exc:
            await bus.close()
            raise ClientError(
                f"cannot reach Redis at {redis_url}: {_one_line(exc)} (is `hyperjob up` running?)"
            ) from None
        return cls(bus, store, producer)

    async def close(self) -> None:
        await self.bus.close()
        await self.store.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        await self.close()

    # -- requests ----------------------------------------------------------------------------------

    async def request(self, subject: str, message: events.Message, timeout: float = 30.0) -> Answer:
        """Send a request and wait for its answer (the splitter publishes it into the stream, so an
        answer that arrives before we look is not missed)."""
        try:
            await self.bus.publish(subject, events.encode(message), msg_id=message.event_id)
        except PermissionDeniedError:
            raise ClientError(f"permission denied: your NATS user may not publish on {subject}") from None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            answer = await self.bus.last(subjects.result(message.event_id))
            decoded: Answer | None = events.read_or_skip(ANSWERS, answer.data) if answer is not None else None
            if decoded is not None:  # a decoder of exactly the Answer types
                return decoded
            await asyncio.sleep(0.05)
        raise ClientError(f"no answer within {timeout:g}s: is the splitter running (hyperjob get services)?")

    def _envelope(self) -> Envelope:
        return {"event_id": events.new_request_id(), "occurred_at": time.time(), "producer": self.producer}

    async def apply(self, manifest: Manifest) -> Answer:
        """Create or update one object, on its namespace's subject (``default`` when it names none).
        Server-set metadata is dropped first, as kubectl does. A manifest nested deeper than the
        API allows is refused here, naming where, before anything is sent (issue 33): a message
        nested 100,000 levels deep would break the operators' tools that read the log."""
        check_plain(manifest)
        manifest = api.without_server_fields(manifest)
        check_size(manifest)
        metadata = manifest.get("metadata")
        namespace = metadata.get("namespace") if isinstance(metadata, dict) else None
        subject = request_subject(subjects.APPLY, str(manifest.get("kind")), str(namespace or api.DEFAULT_NAMESPACE))
        return await self.request(subject, events.ApplyManifest(**self._envelope(), manifest=manifest))

    async def delete(self, kind: str, name: str, namespace: str = api.DEFAULT_NAMESPACE) -> Answer:
        message = events.DeleteObject(**self._envelope(), kind=kind, name=name)
        return await self.request(request_subject(subjects.DELETE, kind, namespace), message)

    async def command(self, name: str, action: HyperJobAction, namespace: str = api.DEFAULT_NAMESPACE) -> Answer:
        """suspend, resume, restart or abort a HyperJob."""
        message = events.CommandHyperJob(**self._envelope(), name=name, action=action)
        return await self.request(subjects.in_namespace(subjects.HYPERJOB_COMMAND, namespace), message)

    # -- reads -------------------------------------------------------------------------------------

    async def docs(self, kind: str, type_: type[T]) -> dict[str, T]:
        readmodel.check(type_)
        return {name: doc.decode(type_) for name, doc in sorted((await self.store.list(kind)).items())}

    async def doc(self, kind: str, name: str, type_: type[T]) -> T | None:
        readmodel.check(type_)
        stored = await self.store.get(kind, name)
        return stored.decode(type_) if stored is not None else None

    async def capacities(self) -> dict[str, events.ClusterCapacityReported]:
        """Each cluster's latest capacity summary (a cluster is known once it reported)."""
        decoder = events.decoder(events.ClusterCapacityReported)
        latest = await self.bus.last_per_subject(subjects.CAPACITY_ALL)
        reports = _readable(decoder, latest.values())
        return {r.cluster: r for r in sorted(reports, key=lambda r: r.cluster)}

    async def cluster_names(self) -> list[str]:
        return sorted(await self.capacities())

    async def instances(self) -> dict[str, events.InstanceStarted]:
        """Every service instance that started, by name (its latest start)."""
        decoder = events.decoder(events.InstanceStarted)
        latest = await self.bus.last_per_subject(subjects.INSTANCES)
        started = _readable(decoder, latest.values())
        return {s.instance: s for s in started}

    async def node_statuses(self, cluster: str) -> dict[str, events.NodeStatus]:
        decoder = events.decoder(events.NodeStatus)
        latest = await self.bus.last_per_subject(subjects.node_statuses(cluster))
        statuses = _readable(decoder, latest.values())
        return {s.node: s for s in sorted(statuses, key=lambda s: s.node)}


def _readable(decoder: events.Decoder, deliveries: Iterable[Delivery]) -> list[Any]:
    """The messages that can be read (``events.read_or_skip``): one anybody wrote that cannot
    (nested 100,000 levels deep) must not make ``get nodes`` or the dashboard fail."""
    return [m for m in (events.read_or_skip(decoder, d.data) for d in deliveries) if m is not None]


def _say_skipped(why: str) -> None:
    sys.stderr.write(f"warning: {why}\n")


events.on_first_skip(_say_skipped)  # the CLI's and the dashboard's: once per process, on stderr


def request_subject(request: str, kind: str, namespace: str) -> str:
    """Where a request about a ``kind`` goes: its namespace's subject, the bare one for a
    cluster-scoped kind (``docs/submit-contract.md``, v2)."""
    return request if kind in api.CLUSTER_SCOPED_KINDS else subjects.in_namespace(request, namespace)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def plain(value: object) -> Any:
    """``value`` as JSON-ready builtins, of whatever shape the value has (Any: a JSON view)."""
    return msgspec.to_builtins(value)


__all__ = [
    "ANSWERS",
    "MAX_MANIFEST_BYTES",
    "Answer",
    "Client",
    "ClientError",
    "check_size",
    "manifest_size",
    "plain",
    "request_subject",
]
