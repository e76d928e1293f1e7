"""Values the store takes and returns: documents, writes, bindings, commits and their results."""

from __future__ import annotations

from typing import Literal, TypeVar

import msgspec

__all__ = [
    "BINDING_KIND_PREFIX",
    "Binding",
    "Commit",
    "CommitResult",
    "Doc",
    "NodeUsage",
    "Output",
    "Unbind",
    "Write",
    "binding_kind",
    "encode_doc",
    "entry_of",
    "fmt_amount",
    "parse_entry",
    "render_entry",
]

T = TypeVar("T")
DEFAULT_PODS = 110.0
BINDING_KIND_PREFIX = "binding@"


def encode_doc(doc: object) -> bytes:
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
    """One document write inside a commit: a put (``data``) or a delete (``data is None``).
    ``expected_version``: ``None`` writes unconditionally, ``0`` requires the document to be absent,
    ``n`` requires version ``n``. Build with ``Write.put(...)`` / ``Write.delete(...)``."""

    kind: str
    name: str
    data: bytes | None
    expected_version: int | None = None

    @classmethod
    def put(cls, kind: str, name: str, doc: object, expected_version: int | None = None) -> Write:
        return cls(kind=kind, name=name, data=encode_doc(doc), expected_version=expected_version)

    @classmethod
    def delete(cls, kind: str, name: str, expected_version: int | None = None) -> Write:
        return cls(kind=kind, name=name, data=None, expected_version=expected_version)


class Output(msgspec.Struct, frozen=True, kw_only=True):
    """A message a handler publishes after its commit; ``bus.publish_many`` accepts it as is."""

    subject: str
    msg_id: str
    payload: bytes
    headers: dict[str, str] | None = None


class Binding(msgspec.Struct, frozen=True):
    """One pod placed on one node of ``cluster`` with its resource request (base units);
    ``uid`` names the pod's incarnation (a pod recreated under the same name is another one);
    ``devices`` the GPU device indexes it holds there (whole GPUs or vGPU shares), if any."""

    cluster: str
    pod: str
    node: str
    request: dict[str, float]
    uid: str = ""
    devices: tuple[int, ...] = ()


class Unbind(msgspec.Struct, frozen=True):
    """Give a bound pod's resources back to its node (idempotent: unbound pods are skipped)."""

    cluster: str
    pod: str


class Commit(msgspec.Struct, kw_only=True):
    """Everything one unit of work changes, applied atomically or not at all.

    ``event_ids`` are the dedup markers of the messages (or the cause) the work handled, under
    ``consumer``; if any is set already nothing is written (``duplicate``). ``writes`` are checked
    against their expected versions, ``binds`` against every node's allocatable (a pod already
    bound to the same node is a no-op, to another node a refusal; a resource the node does not
    declare is not accounted: device-level shares such as ``volcano.sh/vgpu-cores`` are the
    scheduler's to fit, device by device), ``unbinds`` go first. The ``outputs`` are recorded
    with the markers, so a redelivery can publish them again until they are known to be
    published (then they are forgotten: a redelivery long after, beyond the bus's duplicate
    window, must not send an old value again).
    ``sentinel`` names the instance whose liveness key must exist (a wiped store refuses the
    commit, ``wiped``), so nothing is decided on a store that lost its state. The outputs are
    also kept under ``outbox_key`` in ``outbox``'s outbox until a later commit lists the key in
    ``published`` (the transactional outbox: outputs committed but never published are published
    again after a crash)."""

    consumer: str = ""
    event_ids: list[str] = []
    writes: list[Write] = []
    binds: list[Binding] = []
    unbinds: list[Unbind] = []
    outputs: list[Output] = []
    sentinel: str = ""
    outbox: str = ""
    outbox_key: str = ""
    published: list[str] = []
    # The sentinel's commit count when the committer's memory was loaded (-1: not checked). Two
    # replicas of one instance share documents; a commit made on memory that misses what the other
    # committed meanwhile is refused (``stale``), so no message is decided on a partial view.
    epoch: int = -1

    @property
    def empty(self) -> bool:
        return not (self.event_ids or self.writes or self.binds or self.unbinds)


Refusal = Literal["", "duplicate", "conflict", "wiped", "stale", "bound-elsewhere", "no-room", "unknown-node"]


class CommitResult(msgspec.Struct, frozen=True, kw_only=True):
    """What a commit did: ``ok`` (with the new ``versions`` of the writes, 0 for deletes), or why
    nothing was written. ``duplicate``: ``event_id`` was processed already and ``outputs`` are
    what it recorded. ``conflict``: ``kind``/``name`` is at ``actual``, not ``expected``.
    ``bound-elsewhere``: ``pod`` is bound to ``node``. ``no-room``: ``node`` lacks ``missing``.
    ``stale``: the sentinel's instance committed since ``Commit.epoch`` (another replica).
    ``epoch``: the sentinel's commit count after this commit (or, ``stale``, before it)."""

    refusal: Refusal = ""
    versions: list[int] = []
    epoch: int = 0
    event_id: str = ""
    outputs: list[Output] = []
    kind: str = ""
    name: str = ""
    expected: int = 0
    actual: int = 0
    pod: str = ""
    node: str = ""
    missing: dict[str, float] = {}

    @property
    def ok(self) -> bool:
        return self.refusal == ""

    def describe(self) -> str:
        return {
            "": "committed",
            "duplicate": f"event {self.event_id} was processed already",
            "conflict": f"{self.kind}/{self.name} is at version {self.actual}, not {self.expected}",
            "wiped": "the store lost this instance's state",
            "stale": f"another replica of this instance committed (now at {self.epoch})",
            "bound-elsewhere": f"pod {self.pod} is bound to {self.node}",
            "no-room": f"node {self.node} lacks {self.missing}",
            "unknown-node": f"node {self.node} is not registered",
        }[self.refusal]


class NodeUsage(msgspec.Struct, frozen=True, kw_only=True):
    """A node's allocatable, what bound pods use, and the difference."""

    allocatable: dict[str, float]
    used: dict[str, float]

    @property
    def free(self) -> dict[str, float]:
        return {r: a - self.used.get(r, 0.0) for r, a in self.allocatable.items()}


def binding_kind(cluster: str) -> str:
    """The document kind of a cluster's bindings (one document per pod) in a changelog."""
    return f"{BINDING_KIND_PREFIX}{cluster}"


def fmt_amount(value: float) -> str:
    """A resource amount as the exact shortest decimal (``repr``), as Redis stores it."""
    return repr(float(value))


def render_entry(node: str, request: dict[str, float], uid: str = "", devices: tuple[int, ...] = ()) -> str:
    """A binding as stored: ``node``, ``@uid``, ``#devices`` (comma-separated), then one
    ``resource=amount`` line per resource."""
    return "\n".join(
        [
            node,
            *([f"@{uid}"] if uid else []),
            *([f"#{','.join(map(str, devices))}"] if devices else []),
            *(f"{r}={fmt_amount(a)}" for r, a in sorted(request.items())),
        ]
    )


def entry_of(binding: Binding) -> str:
    return render_entry(binding.node, binding.request, binding.uid, binding.devices)


def parse_entry(cluster: str, pod: str, entry: str) -> Binding:
    """The binding a stored entry describes."""
    node, *lines = entry.split("\n")
    request: dict[str, float] = {}
    uid = ""
    devices: tuple[int, ...] = ()
    for line in lines:
        if line.startswith("@"):
            uid = line[1:]
        elif line.startswith("#"):
            devices = tuple(int(d) for d in line[1:].split(","))
        else:
            res, _, amount = line.rpartition("=")
            request[res] = float(amount)
    return Binding(cluster, pod, node, request, uid, devices)
