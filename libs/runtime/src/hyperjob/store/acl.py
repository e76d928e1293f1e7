"""Redis ACL users for least privilege: each service instance may touch only its own keys.

Keys are ``<prefix>:<family>:...`` (``RedisStore``): documents and versions of a kind
(``d:<kind>``, ``v:<kind>``), dedup markers per consumer (``m:<consumer>:<id>``), the instance's
outbox (``outbox:<instance>``, ``o:<instance>:<unit>``), sentinel (``alive:<instance>``) and
lease (``lease:<instance>``), and a cluster's node bookings (``bind:<cluster>``, ``used:<cluster>``,
``node:<cluster>:...``, ``nodes:<cluster>``). Redis checks these patterns inside the commit script
too, so a service that tries to write another's document is refused by Redis (``NOPERM``), not by
our code. The CLI reads everything and writes
nothing; the operator may do anything.
"""

from __future__ import annotations

from collections.abc import Iterable

from hyperjob.events import access
from hyperjob.records.owners import BOOKS_NODES, kinds_of

# Reading, writing, the commit script and the connection; never FLUSHALL, CONFIG, KEYS and the like.
_SERVICE_COMMANDS = ("+@read", "+@write", "+@scripting", "+@transaction", "+@connection", "-@dangerous")
_READER_COMMANDS = ("+@read", "+@transaction", "+@connection", "-@dangerous")


def instance_keys(
    prefix: str, instance: str, *, kinds: Iterable[str], consumers: Iterable[str], booking_clusters: Iterable[str] = ()
) -> list[str]:
    """The key patterns (``~pattern``) one instance's store user may touch."""
    keys = [f"{prefix}:alive:{instance}", f"{prefix}:lease:{instance}", f"{prefix}:outbox:{instance}"]
    keys.append(f"{prefix}:o:{instance}:*")
    keys += [f"{prefix}:m:{consumer}:*" for consumer in consumers]
    for kind in kinds:
        keys += [f"{prefix}:d:{kind}", f"{prefix}:v:{kind}"]
    for cluster in booking_clusters:
        keys += [f"{prefix}:bind:{cluster}", f"{prefix}:used:{cluster}", f"{prefix}:node:{cluster}:*"]
        keys.append(f"{prefix}:nodes:{cluster}")
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
