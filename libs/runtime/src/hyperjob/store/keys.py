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


def commit_script_args(layout: KeyLayout, commit: Commit) -> tuple[list[str], bytes]:
    """``KEYS`` and the msgpack request of ``COMMIT`` (see ``lua.COMMIT`` for the layout). Redis'
    Lua msgpack has no binary type, so documents travel as text and the outputs blob on its own."""
    k = _Keys()
    alive = k(layout.alive(commit.sentinel)) if commit.sentinel else 0
    markers = [k(layout.marker(marker_instance(commit), commit.consumer, e)) for e in commit.event_ids]
    writes = [
        [
            k(layout.doc(w.kind)),
            k(layout.version(w.kind)),
            -1 if w.expected_version is None else w.expected_version,
            False if w.data is None else w.data.decode(),
            w.name,
        ]
        for w in commit.writes
    ]
    binds = [
        [k(layout.bind(b.cluster)), k(layout.alloc(b.cluster, b.node)), k(layout.used(b.cluster)), *_bind_args(b)[1:]]
        for b in commit.binds
    ]
    unbinds = [[k(layout.bind(u.cluster)), k(layout.used(u.cluster)), u.pod] for u in commit.unbinds]
    unit = outputs_instance(commit)
    okey = k(layout.outputs(unit, commit.outbox_key)) if commit.outbox_key else 0
    outbox = k(layout.outbox(commit.outbox)) if commit.outbox else 0
    published = [[k(layout.outputs(unit, p)), p] for p in commit.published] if outbox else []
    request = [alive, markers, writes, binds, unbinds, okey, outbox, commit.outbox_key, published, commit.epoch]
    return k.names, _ENC.encode(request)


def restore_script_args(layout: KeyLayout, bindings: Sequence[Binding]) -> tuple[list[str], bytes]:
    """``KEYS`` and the msgpack argument of ``RESTORE_BINDINGS``."""
    k = _Keys()
    rows = [[k(layout.bind(b.cluster)), k(layout.used(b.cluster)), *_bind_args(b)[1:]] for b in bindings]
    return k.names, _ENC.encode(rows)


def _bind_args(b: Binding) -> list[str | list[str]]:
    """A binding as the scripts take it: cluster, pod, node, its stored entry, its amounts."""
    return [
        b.cluster,
        b.pod,
        b.node,
        entry_of(b),
        [x for r, a in sorted(b.request.items()) for x in (r, fmt_amount(a))],
    ]
