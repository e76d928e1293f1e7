"""``RedisStore``'s key layout, and the keys and request of one ``COMMIT`` (every key the script
touches is named here and passed in ``KEYS``; the request refers to them by position).

Every key carries its instance as a Redis Cluster hash tag (``{<instance>}``), so one instance's
keys share a slot: its commit (documents of the kinds it owns, its markers, outputs, outbox and
sentinel, and for a cluster-scheduler its cluster's bookings) is legal on a Redis Cluster, and
different instances spread over the cluster. Under ``prefix`` (``P``), with ``I`` the instance::

    P:{I}:d:<kind>                 hash  name -> JSON document (I: ``owner_of(kind)``)
    P:{I}:v:<kind>                 hash  name -> version (int)
    P:{I}:m:<consumer>:<event id>  str   dedup marker -> the full key of its outputs (TTL)
    P:{I}:o:<instance>:<unit>      str   msgpack of the outputs one commit recorded (TTL)
    P:{I}:outbox                   list  outputs keys not confirmed published
    P:{I}:alive                    str   the instance's sentinel: its state is in this store
    P:{I}:lease                    str   the token of the replica that runs the instance (TTL)
    P:{I}:node:<cluster>:<node>:alloc  hash  resource -> allocatable amount (I: ``booker_of(cluster)``)
    P:{I}:used:<cluster>           hash  "<node>\\n<resource>" -> amount bound pods use
    P:{I}:nodes:<cluster>          set   node names with allocatable registered
    P:{I}:bind:<cluster>           hash  pod -> "node\\nres=amount\\n..." (the binding and its request)

A commit's markers are tagged by its sentinel's instance (else its consumer; ``seen`` is told the
instance), its outputs by its outbox's; a marker holds its outputs' full key. A cluster's usage
is one hash (not one per node) so that an unbind, which learns its node only from the binding
inside the script, still touches only keys the client named.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from hyperjob.records.owners import booker_of, owner_of

from .model import Binding, Commit, entry_of, fmt_amount

_ENC = msgspec.msgpack.Encoder()


class KeyLayout:
    """The names of the keys under one prefix."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def of(self, instance: str) -> str:
        """The start of every key of ``instance``: ``P:{instance}``."""
        return f"{self.prefix}:{{{instance}}}"

    def doc(self, kind: str) -> str:
        return f"{self.of(owner_of(kind))}:d:{kind}"

    def version(self, kind: str) -> str:
        return f"{self.of(owner_of(kind))}:v:{kind}"

    def marker(self, instance: str, consumer: str, event_id: str) -> str:
        return f"{self.of(instance)}:m:{consumer}:{event_id}"

    def outputs(self, instance: str, okey: str) -> str:
        return f"{self.of(instance)}:{okey}"

    def outbox(self, instance: str) -> str:
        return f"{self.of(instance)}:outbox"

    def alive(self, instance: str) -> str:
        return f"{self.of(instance)}:alive"

    def lease(self, instance: str) -> str:
        return f"{self.of(instance)}:lease"

    def alloc(self, cluster: str, node: str) -> str:
        return f"{self.of(booker_of(cluster))}:node:{cluster}:{node}:alloc"

    def used(self, cluster: str) -> str:
        return f"{self.of(booker_of(cluster))}:used:{cluster}"

    def nodes(self, cluster: str) -> str:
        return f"{self.of(booker_of(cluster))}:nodes:{cluster}"

    def bind(self, cluster: str) -> str:
        return f"{self.of(booker_of(cluster))}:bind:{cluster}"


def marker_instance(commit: Commit) -> str:
    """The instance whose slot holds a commit's markers: its sentinel's (a service's runtime
    always names it), else the consumer's own."""
    return commit.sentinel or commit.consumer


def outputs_instance(commit: Commit) -> str:
    """The instance whose slot holds a commit's recorded outputs: its outbox's (``outbox`` reads
    them there), else as its markers."""
    return commit.outbox or marker_instance(commit)


class _Keys:
    """``KEYS`` being built: each key once, by its 1-based position (Lua's)."""

    def __init__(self) -> None:
        self.names: list[str] = []
        self._index: dict[str, int] = {}

    def __call__(self, key: str) -> int:
        if key not in self._index:
            self.names.append(key)
            self._index[key] = len(self.names)
        return self._index[key]


class CommitWrite(msgspec.Struct, array_like=True):
    """A document write: its hash and version hash (indices into ``KEYS``), the version it
    expects (-1: any), its JSON text (``False``: delete) and its name."""

    doc: int
    version: int
    expected: int
    data: str | bool
    name: str


class CommitBind(msgspec.Struct, array_like=True):
    """A pod to bind: its cluster's bindings, the node's allocatable and the cluster's usage
    (indices into ``KEYS``), the pod, the node, the stored entry, its amounts (res, amount, ...)."""

    bindings: int
    alloc: int
    used: int
    pod: str
    node: str
    entry: str
    amounts: list[str]


class CommitUnbind(msgspec.Struct, array_like=True):
    """A pod to unbind: its cluster's bindings and usage (indices into ``KEYS``), the pod."""

    bindings: int
    used: int
    pod: str


class CommitPublished(msgspec.Struct, array_like=True):
    """Outputs confirmed sent: their key (an index into ``KEYS``) and their name in the outbox."""

    outputs: int
    name: str


class CommitRequest(msgspec.Struct, array_like=True):
    """What ``COMMIT`` reads from ``ARGV[2]``. Named here, positional on the wire (Lua's
    ``cmsgpack`` unpacks arrays): the script reads the fields in this order (``lua.COMMIT``).
    An index of 0 names no key."""

    sentinel: int
    markers: list[int]
    writes: list[CommitWrite]
    binds: list[CommitBind]
    unbinds: list[CommitUnbind]
    outputs: int
    outbox: int
    outputs_name: str
    published: list[CommitPublished]
    epoch: int


def commit_request(layout: KeyLayout, commit: Commit) -> tuple[list[str], CommitRequest]:
    """``KEYS`` and the request of ``COMMIT`` (see ``lua.COMMIT``). Redis' Lua msgpack has no
    binary type, so documents travel as text and the outputs blob on its own."""
    k = _Keys()
    unit = outputs_instance(commit)
    outbox = k(layout.outbox(commit.outbox)) if commit.outbox else 0
    request = CommitRequest(
        sentinel=k(layout.alive(commit.sentinel)) if commit.sentinel else 0,
        markers=[k(layout.marker(marker_instance(commit), commit.consumer, e)) for e in commit.event_ids],
        writes=[
            CommitWrite(
                doc=k(layout.doc(w.kind)),
                version=k(layout.version(w.kind)),
                expected=-1 if w.expected_version is None else w.expected_version,
                data=False if w.data is None else w.data.decode(),
                name=w.name,
            )
            for w in commit.writes
        ],
        binds=[
            CommitBind(
                bindings=k(layout.bind(b.cluster)),
                alloc=k(layout.alloc(b.cluster, b.node)),
                used=k(layout.used(b.cluster)),
                pod=b.pod,
                node=b.node,
                entry=entry_of(b),
                amounts=_amounts(b),
            )
            for b in commit.binds
        ],
        unbinds=[
            CommitUnbind(bindings=k(layout.bind(u.cluster)), used=k(layout.used(u.cluster)), pod=u.pod)
            for u in commit.unbinds
        ],
        outputs=k(layout.outputs(unit, commit.outbox_key)) if commit.outbox_key else 0,
        outbox=outbox,
        outputs_name=commit.outbox_key,
        published=[CommitPublished(k(layout.outputs(unit, p)), p) for p in commit.published] if outbox else [],
        epoch=commit.epoch,
    )
    return k.names, request


def commit_script_args(layout: KeyLayout, commit: Commit) -> tuple[list[str], bytes]:
    """``KEYS`` and ``COMMIT``'s request, encoded."""
    keys, request = commit_request(layout, commit)
    return keys, _ENC.encode(request)


def restore_script_args(layout: KeyLayout, bindings: Sequence[Binding]) -> tuple[list[str], bytes]:
    """``KEYS`` and the msgpack argument of ``RESTORE_BINDINGS``."""
    k = _Keys()
    rows = [
        [k(layout.bind(b.cluster)), k(layout.used(b.cluster)), b.pod, b.node, entry_of(b), _amounts(b)]
        for b in bindings
    ]
    return k.names, _ENC.encode(rows)


def _amounts(b: Binding) -> list[str]:
    """A binding's request as the scripts take it: resource, amount, resource, amount, ..."""
    return [x for r, a in sorted(b.request.items()) for x in (r, fmt_amount(a))]
