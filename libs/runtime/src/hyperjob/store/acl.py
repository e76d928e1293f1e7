"""Redis ACL users for least privilege: each service instance may touch only its own keys.

Keys are ``<prefix>:{<instance>}:<family>:...`` (``keys.KeyLayout``): documents and versions of
the kinds the instance owns (``d:<kind>``, ``v:<kind>``), its dedup markers per consumer
(``m:<consumer>:<id>``), its outbox (``outbox``, ``o:<instance>:<unit>``), sentinel (``alive``)
and lease (``lease``), and a cluster-scheduler's node bookings (``bind:<cluster>``,
``used:<cluster>``, ``node:<cluster>:...``, ``nodes:<cluster>``). Redis checks these patterns inside the commit script
too, so a service that tries to write another's document is refused by Redis (``NOPERM``), not by
our code. The CLI reads everything and writes
nothing; the operator may do anything.
"""

from __future__ import annotations

from collections.abc import Iterable

from hyperjob.events import access
from hyperjob.records.owners import BOOKS_NODES, kinds_of

from .keys import KeyLayout

# Reading, writing, the commit script and the connection; never FLUSHALL, CONFIG, KEYS and the like.
_SERVICE_COMMANDS = ("+@read", "+@write", "+@scripting", "+@transaction", "+@connection", "-@dangerous")
_READER_COMMANDS = ("+@read", "+@transaction", "+@connection", "-@dangerous")


def instance_keys(
    prefix: str, instance: str, *, kinds: Iterable[str], consumers: Iterable[str], booking_clusters: Iterable[str] = ()
) -> list[str]:
    """The key patterns (``~pattern``) one instance's store user may touch (``keys.KeyLayout``)."""
    layout = KeyLayout(prefix)
    keys = [layout.alive(instance), layout.lease(instance), layout.outbox(instance)]
    keys.append(layout.outputs(instance, f"o:{instance}:*"))
    keys += [layout.marker(instance, consumer, "*") for consumer in consumers]
    for kind in kinds:
        keys += [layout.doc(kind), layout.version(kind)]
    for cluster in booking_clusters:
        keys += [layout.bind(cluster), layout.used(cluster), layout.alloc(cluster, "*"), layout.nodes(cluster)]
    return [f"~{k}" for k in keys]


def redis_acl(role: access.Role, password: str, *, prefix: str, cluster: str = "", instance: str = "") -> list[str]:
    """``ACL SETUSER <user> <rules...>`` rules for one instance of ``role`` (the user is its
    instance name, or the role for ``user``/``operator``)."""
    base = ["reset", "on", f">{password}"]
    if role == "operator":
        return [*base, "~*", "&*", "+@all"]
    if role in ("user", "apiserver"):  # readers of everything, writers of nothing
        return [*base, f"~{prefix}:*", *_READER_COMMANDS]
    g = access.grant(role, cluster=cluster, instance=instance)
    name = instance or (f"{role}-{cluster}" if cluster else role)
    keys = instance_keys(
        prefix,
        name,
        kinds=kinds_of(role, cluster=cluster, instance=name),
        consumers=(name, *g.durables),
        booking_clusters=(cluster,) if role in BOOKS_NODES else (),
    )
    return [*base, *keys, *_SERVICE_COMMANDS]
