"""Helpers for the service tests: run a service in-process on the fixtures' bus and store, send it
catalogue messages, and look at what it stored and published, always with a bounded deadline.

Test modules import this after putting this directory on ``sys.path`` (pytest's importlib mode
does not add test directories), like the unit suites' builders::

    sys.path.insert(0, str(Path(__file__).parent)); import service_helpers as sh

``Probe`` reads the streams with a connection of its own (ephemeral consumers, nothing acked), so
it sees exactly what JetStream stored — a republished output with the same ``Nats-Msg-Id`` is
dropped by the server and therefore appears once. ``settled(durable)`` waits until a service's
durable consumer has acked every message it was given: the runtime acks only after its write and
its publishes, so after ``settled`` every effect of those messages is visible.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import msgspec
import nats
import nats.js.errors
import yaml
from nats.js import api as jsapi

import events
import records
from bus import PublishError, subject_covers
from events import subjects
from store import StoreUnavailableError, Write

T = TypeVar("T")
M = TypeVar("M", bound=events.Message)

REPO = Path(__file__).resolve().parents[2]
DEADLINE = 5.0
ALL_TYPES = events.decoder(*events.ALL_MESSAGES)


def message(message_type: type[M], **fields: Any) -> M:
    """A message as a client would send it: a fresh request id, everything else as given."""
    fields.setdefault("event_id", events.new_request_id())
    fields.setdefault("occurred_at", time.time())
    fields.setdefault("producer", "test")
    return message_type(**fields)


async def send(bus: Any, subject: str, msg: events.Message, *, copy: int = 0) -> None:
    """Publish ``msg`` on ``subject``. ``copy > 0`` publishes the same payload under another
    ``Nats-Msg-Id`` so JetStream stores it again: a redelivery of the same event as the service sees it."""
    msg_id = msg.event_id if copy == 0 else f"{msg.event_id}#copy{copy}"
    await bus.publish(subject, events.encode(msg), msg_id=msg_id)


async def until(probe: Callable[[], Awaitable[T] | T], *, timeout: float = DEADLINE, what: str = "condition",
                interval: float = 0.02) -> T:
    """Poll ``probe`` (sync or async) until it returns something truthy, which is returned;
    AssertionError naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        last = probe()
        if inspect.isawaitable(last):
            last = await last
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not reached within {timeout}s (last: {last!r})")
        await asyncio.sleep(interval)


async def doc(store: Any, kind: str, name: str, type_: type[T], *, timeout: float = DEADLINE,
              where: Callable[[T], bool] = lambda _d: True) -> T:
    """Wait for the document ``kind/name`` to exist (and satisfy ``where``); return it decoded."""

    async def probe() -> T | None:
        stored = await store.get(kind, name)
        if stored is None:
            return None
        value = stored.decode(type_)
        return value if where(value) else None

    return await until(probe, timeout=timeout, what=f"document {kind}/{name}")


async def version(store: Any, kind: str, name: str) -> int:
    stored = await store.get(kind, name)
    return 0 if stored is None else int(stored.version)


class Stored(msgspec.Struct, frozen=True):
    """One message as JetStream stored it."""

    subject: str
    msg_id: str
    data: bytes

    def decode(self) -> events.Message:
        return ALL_TYPES.decode(self.data)  # type: ignore[no-any-return]


class Probe:
    """Reads one test namespace's streams and consumers through a connection of its own."""

    def __init__(self, nc: Any, namespace: str) -> None:
        self._nc = nc
        self._js = nc.jetstream()
        self._ns = namespace

    @classmethod
    async def connect(cls, url: str, namespace: str) -> Probe:
        return cls(await nats.connect(url, name=f"probe-{namespace}"), namespace)

    async def close(self) -> None:
        await self._nc.close()

    def _stream(self, subject_filter: str) -> str:
        for decl in subjects.STREAMS:
            if any(subject_covers(pattern, subject_filter) for pattern in decl.subjects):
                return f"{self._ns}_{decl.name}"
        raise ValueError(f"no stream captures {subject_filter}")

    async def messages(self, subject_filter: str) -> list[Stored]:
        """Every message stored on subjects matching ``subject_filter``, in stream order."""
        stream = self._stream(subject_filter)
        config = jsapi.ConsumerConfig(ack_policy=jsapi.AckPolicy.NONE, deliver_policy=jsapi.DeliverPolicy.ALL,
                                      filter_subject=f"{self._ns}.{subject_filter}", inactive_threshold=30.0,
                                      mem_storage=True)
        info = await self._js.add_consumer(stream, config)
        psub = await self._js.pull_subscribe_bind(durable=None, stream=stream, name=info.name)
        out: list[Stored] = []
        try:
            remaining = info.num_pending or 0
            while remaining > 0:
                batch = await psub.fetch(min(remaining, 500), timeout=5)
                remaining -= len(batch)
                for msg in batch:
                    headers = dict(msg.headers or {})
                    out.append(Stored(msg.subject[len(self._ns) + 1:], headers.get("Nats-Msg-Id", ""), msg.data))
        finally:
            await psub.unsubscribe()
            try:
                await self._js.delete_consumer(stream, info.name)
            except nats.js.errors.NotFoundError:
                pass
        return out

    async def decoded(self, subject_filter: str, type_: type[M] | None = None) -> list[M]:
        """The stored messages on ``subject_filter`` decoded (only those of ``type_`` if given)."""
        found = [m.decode() for m in await self.messages(subject_filter)]
        return [m for m in found if type_ is None or isinstance(m, type_)]  # type: ignore[misc]

    async def wait(self, subject_filter: str, type_: type[M] | None = None, *, count: int = 1,
                   timeout: float = DEADLINE, where: Callable[[M], bool] = lambda _m: True) -> list[M]:
        """Wait until at least ``count`` matching messages are stored; return all matching ones."""

        async def probe() -> list[M]:
            found = [m for m in await self.decoded(subject_filter, type_) if where(m)]
            return found if len(found) >= count else []

        return await until(probe, timeout=timeout, what=f"{count} x {type_.__name__ if type_ else 'message'} "
                                                        f"on {subject_filter}")

    async def settled(self, durable: str, subject: str, *, timeout: float = DEADLINE) -> None:
        """Wait until the durable consumer ``durable`` (on ``subject``'s stream) has no message
        waiting and none delivered but unacked: every effect of what it was sent is visible."""
        stream = self._stream(subject)

        async def probe() -> bool:
            try:
                info = await self._js.consumer_info(stream, durable)
            except nats.js.errors.NotFoundError:
                return False
            return info.num_pending == 0 and info.num_ack_pending == 0

        await until(probe, timeout=timeout, what=f"consumer {durable} settled")


async def probe_for(nats_url: str, namespace: str) -> Probe:
    return await Probe.connect(nats_url, namespace)


# -- fixtures of state as the other services write it -----------------------------------------------

NODE_ALLOCATABLE = {"cpu": 96.0, "memory": float(1 << 40), "nvidia.com/gpu": 8.0, "pods": 110.0}


def cluster_doc(name: str, nodes: int = 4, allocatable: dict[str, float] | None = None,
                now: float | None = None, full: bool = False) -> records.ClusterDoc:
    """A cluster summary as the cluster-scheduler writes it: ``nodes`` idle nodes (every resource
    in use if ``full``), just reported."""
    per_node = allocatable or NODE_ALLOCATABLE
    total = {r: a * nodes for r, a in per_node.items()}
    free = {r: 0.0 for r in total} if full else dict(total)
    largest = {r: 0.0 for r in per_node} if full else dict(per_node)
    return records.ClusterDoc(name=name, allocatable=total, free=free, nodes=nodes, ready_nodes=nodes,
                              largest_node_free=largest, reported_at=time.time() if now is None else now)


async def put_clusters(store: Any, *docs: records.ClusterDoc) -> None:
    for d in docs:
        await store.put_if_version(records.CLUSTER, d.name, d, None)


def example_documents(name: str = "hyperjob-llm.yaml") -> list[dict[str, Any]]:
    """The manifests of an example file, as a client sends them (plain data)."""
    text = (REPO / "examples" / name).read_text()
    return [d for d in yaml.safe_load_all(text) if d]


def queue_manifest(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
            "spec": {"weight": 1, **spec}}


def job_manifest(name: str, *, replicas: int = 2, queue: str = "default", min_available: int | None = None,
                 gpu: str = "1", duration: str = "10s", policies: list[dict[str, Any]] | None = None,
                 max_retry: int | None = None, restart_policy: str = "Never") -> dict[str, Any]:
    """A Volcano Job of one task ``worker`` with ``replicas`` pods, each asking one GPU and 8 cpu."""
    spec: dict[str, Any] = {
        "minAvailable": replicas if min_available is None else min_available,
        "schedulerName": "volcano", "queue": queue,
        "tasks": [{"name": "worker", "replicas": replicas, "template": {
            "metadata": {"annotations": {"hyperjob.io/sim-duration": duration}},
            "spec": {"containers": [{"name": "worker", "image": "example.com/w:1",
                                     "resources": {"requests": {"cpu": "8", "memory": "16Gi",
                                                                "nvidia.com/gpu": gpu}}}],
                     "restartPolicy": restart_policy}}}],
    }
    if policies is not None:
        spec["policies"] = policies
    if max_retry is not None:
        spec["maxRetry"] = max_retry
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


def hyperjob_manifest(name: str, clusters: dict[str, int], *, queue: str = "default",
                      min_available: int | None = None) -> dict[str, Any]:
    """A HyperJob of one template (task ``worker``: 1 GPU, 8 cpu per pod) split ByCluster."""
    total = sum(clusters.values())
    template = job_manifest(name, replicas=total, queue=queue, min_available=min_available)
    del template["metadata"]
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "HyperJob", "metadata": {"name": name},
            "spec": {"template": template,
                     "splitPolicy": {"strategy": "ByCluster",
                                     "clusters": [{"name": c, "replicas": r} for c, r in clusters.items()]}}}


def plain_owner(manifest: dict[str, Any]) -> records.HyperJobDoc:
    """A plain Job's document as the splitter stores it (its own single child)."""
    name = manifest["metadata"]["name"]
    replicas = sum(t["replicas"] for t in manifest["spec"]["tasks"])
    return records.HyperJobDoc(name=name, manifest=manifest, created=time.time(), plain=True,
                               children=[records.ChildRef(name=name, replicated_job="", index=0, replicas=replicas)])


def hyperjob_owner(manifest: dict[str, Any], children: list[records.ChildRef]) -> records.HyperJobDoc:
    """A HyperJob's document as the splitter stores it once split into ``children``."""
    return records.HyperJobDoc(name=manifest["metadata"]["name"], manifest=manifest, created=time.time(),
                               children=children)


async def put(store: Any, kind: str, name: str, value: Any) -> None:
    await store.put_if_version(kind, name, value, None)


async def write_docs(store: Any, writes: list[Write]) -> None:
    result = await store.apply("test-setup", events.new_request_id(), writes)
    assert result.ok, result


class FlakyBus:
    """The real bus, except that the first ``failures`` calls of ``publish_many`` (what the runtime
    publishes after a commit) fail as if NATS were unreachable."""

    def __init__(self, inner: Any, failures: int = 1) -> None:
        self.inner = inner
        self.failures = failures

    async def publish_many(self, messages: Any, **kw: Any) -> Any:
        if self.failures:
            self.failures -= 1
            first = list(messages)[0]
            raise PublishError(getattr(first, "subject", "?"), getattr(first, "msg_id", "?"), "injected: publish failed")
        return await self.inner.publish_many(messages, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class FlakyStore:
    """The real store, except that the first ``failures`` calls of ``apply`` fail (Redis unavailable)."""

    def __init__(self, inner: Any, failures: int = 1) -> None:
        self.inner = inner
        self.failures = failures

    async def apply(self, *args: Any, **kw: Any) -> Any:
        if self.failures:
            self.failures -= 1
            raise StoreUnavailableError("injected: store unavailable")
        return await self.inner.apply(*args, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
