"""Who may publish what: least privilege for every role, for the NATS server to enforce.

Every service instance, the CLI's user and the operator is meant to be a NATS user whose publish
permissions are the subjects its role produces (``GRANTS``, rendered for the server by
``nats_permissions``), so that a forged message is refused by the server, not by the good will
of whoever consumes it:

- a node-agent reports pods, node status, heartbeats and telemetry of its own cluster only (it
  cannot complete another cluster's job or register a node somewhere else);
- only the CLI's user submits, deletes and commands; only the splitter publishes configuration;
  only a cluster's own services speak for that cluster;
- a service acknowledges, reads from and resets only its own durable consumers, and nobody but
  the operator creates, changes, purges or deletes a stream.

``reads`` lists what a role consumes, watches or reads the last value of. JetStream delivers
through consumers, so reads are not confidential between services (any service may read any
stream); they are declared so that the simulator's traffic can be checked against them and the
roles read as documentation. Placeholders: ``{cluster}`` (the instance's cluster) and
``{instance}`` (its instance name).

With these permissions a service can no longer create or update streams: whoever starts the
system (the operator's user) declares them first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

import msgspec

from .services import BY_NAME, SERVICES, ServiceName

# Every service's (``events.services``), a person with the CLI, the operator.
Role = Literal[ServiceName, "user", "operator"]


class Grant(msgspec.Struct, frozen=True, kw_only=True):
    """What one role may do: subjects it publishes, subjects it reads, its durable consumers."""

    publishes: tuple[str, ...]
    reads: tuple[str, ...] = ()
    durables: tuple[str, ...] = ()  # suffixes after the instance name ("" is the instance's own)
    # (a service's are declared in ``events.services``, with the service)

    def of(self, *, cluster: str = "", instance: str = "") -> Grant:
        """The grant with an instance's placeholders filled in."""

        def fill(patterns: tuple[str, ...]) -> tuple[str, ...]:
            return tuple(p.replace("{cluster}", cluster).replace("{instance}", instance) for p in patterns)

        return Grant(
            publishes=fill(self.publishes),
            reads=fill(self.reads),
            durables=tuple(instance + suffix for suffix in self.durables),
        )


# What every service instance does besides its own work: announce itself, keep its changelog,
# take operator commands, dead-letter what it cannot handle.
_INSTANCE_PUBLISHES = ("admin.instance.{instance}", "state.{instance}.>")
_INSTANCE_READS = ("admin.command.{instance}", "state.{instance}.>")

GRANTS: dict[Role, Grant] = {
    "splitter": Grant(
        publishes=(
            "hj.result.*", "hj.hyperjob.spec", "hj.hyperjob.deleted", "cfg.>",
            "sched.owner.submitted", "sched.owner.withdrawn", "sched.owner.lifecycle",
            "sched.child.place", "sched.child.unplace", "sched.child.move", "sched.child.waiting",
            "sched.child.command.*",
        ),
        reads=(
            "hj.manifest.apply", "hj.object.delete", "hj.hyperjob.command", "hj.object.command",
            "hj.manifest.apply.*", "hj.object.delete.*", "hj.hyperjob.command.*", "hj.object.command.*",
            "sched.owner.admitted", "sched.gang.retry", "job.phase.*", "job.removed.*", "capacity.cluster.*",
            "heartbeat.*.*",  # a silent cluster whose nodes beat has a hung control plane (issue 33)
        ),
    ),
    "global-scheduler": Grant(
        publishes=(
            "sched.owner.admitted", "sched.child.dispatch.*", "sched.child.remove.*", "sched.child.waiting",
            "sched.gang.control.*", "sched.gang.retry", "sched.lease.*",
            "job.removed.unplaced",  # a child deleted before any cluster had it: no cluster can say it is gone
        ),
        reads=(
            "sched.owner.submitted", "sched.owner.withdrawn", "sched.owner.lifecycle", "sched.child.place",
            "sched.child.unplace", "sched.child.move", "sched.reservation.held", "sched.podgroup.phase.*",
            "job.phase.*", "job.removed.*", "capacity.cluster.*", "cfg.>",
            "heartbeat.*.*",  # a silent cluster whose nodes beat keeps its lease (issue 33)
        ),
    ),
    "status-aggregator": Grant(
        publishes=("hj.hyperjob.status",),
        reads=(
            "hj.hyperjob.spec", "hj.hyperjob.deleted", "job.phase.*", "sched.child.waiting", "sched.owner.admitted",
            "sched.reservation.held", "sched.gang.retry",  # the gang reservation metrics
            "sched.podgroup.phase.*",  # why a child waits on its cluster
        ),
    ),
    "cluster-scheduler": Grant(
        publishes=(
            "capacity.cluster.{cluster}", "sched.podgroup.phase.{cluster}", "sched.pods.bound.{cluster}",
            "sched.pods.evicted.{cluster}", "sched.pods.rejected.{cluster}", "sched.reservation.held",
        ),
        reads=(
            "cfg.>", "heartbeat.{cluster}.*", "nodestatus.{cluster}.*", "jobstate.{cluster}.>",
            "sched.gang.control.{cluster}",
        ),
    ),
    "job-controller": Grant(
        publishes=(
            "job.phase.{cluster}", "job.removed.{cluster}", "job.pods.start.{cluster}", "job.pods.stop.{cluster}",
            "jobstate.{cluster}.>",
        ),
        reads=(
            "cfg.>", "node.pods.phase.{cluster}", "node.pods.frozen.{cluster}", "sched.child.dispatch.{cluster}",
            "sched.child.remove.{cluster}",
            "sched.child.command.{cluster}", "sched.podgroup.phase.{cluster}", "sched.pods.bound.{cluster}",
            "sched.pods.evicted.{cluster}", "sched.pods.rejected.{cluster}",
            "sched.lease.*",  # its own lease, and whether the fleet grants anyone (issue 33)
        ),
    ),
    "node-agent": Grant(
        publishes=(
            "node.pods.phase.{cluster}", "node.pods.frozen.{cluster}", "nodestatus.{cluster}.*",
            "heartbeat.{cluster}.*", "telemetry.*.{cluster}.*",
            "podaddr.*",  # where the pods it runs are: any cluster's pods may name them (issue 27)
        ),
        reads=("job.pods.start.{cluster}", "job.pods.stop.{cluster}", "node.fault.{cluster}", "podaddr.*"),
    ),
    # Answers CronJob/JobFlow/JobTemplate requests; makes and deletes the jobs they own as a user would.
    "workflow-controller": Grant(
        publishes=("hj.result.*", "hj.manifest.apply", "hj.object.delete"),
        reads=(
            "hj.manifest.apply", "hj.object.delete", "hj.manifest.apply.*", "hj.object.delete.*", "hj.result.*",
            "job.phase.*", "hj.hyperjob.deleted", "hj.hyperjob.status",
        ),
    ),
    # The Kubernetes API (services/apiserver): sends the requests of the people it serves, each
    # checked first against that person's own grant (the same ``nats_permissions``), reads everything.
    "apiserver": Grant(
        publishes=(
            "hj.manifest.apply", "hj.object.delete", "hj.hyperjob.command", "hj.object.command",
            "hj.manifest.apply.*", "hj.object.delete.*", "hj.hyperjob.command.*", "hj.object.command.*",
        ),
        reads=(">",),
    ),
    # A person with the CLI: submits, deletes and commands (in every namespace, unless
    # ``nats_permissions`` is given some), reads everything (get, describe, watch).
    "user": Grant(
        publishes=(
            "hj.manifest.apply", "hj.object.delete", "hj.hyperjob.command", "hj.object.command",
            "hj.manifest.apply.*", "hj.object.delete.*", "hj.hyperjob.command.*", "hj.object.command.*",
        ),
        reads=(">",),
    ),
    # The operator: also rebuilds services, injects faults, manages streams and dead letters. A
    # dead letter is replayed on the subject it came from, whichever that was: any subject.
    "operator": Grant(publishes=(">",), reads=(">",)),
}  # fmt: skip

# The operator's identity has its role's name: it starts the system, declares the streams, rebuilds
# services, injects faults and manages dead letters.
OPERATOR: Role = "operator"

SERVICE_ROLES: tuple[Role, ...] = tuple(s.name for s in SERVICES)
PER_CLUSTER: frozenset[Role] = frozenset(s.name for s in SERVICES if s.per_cluster)


def grant(role: Role, *, cluster: str = "", instance: str = "") -> Grant:
    """The grant of one instance (``instance`` defaults to the role, or ``<role>-<cluster>``)."""
    if role in PER_CLUSTER and not cluster:
        raise ValueError(f"a {role} serves one cluster: say which")
    instance = instance or (f"{role}-{cluster}" if cluster else role)
    base = GRANTS[role]
    if role in SERVICE_ROLES:
        base = Grant(
            publishes=base.publishes + _INSTANCE_PUBLISHES,
            reads=base.reads + _INSTANCE_READS,
            durables=BY_NAME[role].durables,
        )
    return base.of(cluster=cluster, instance=instance)


def matches(pattern: str, subject: str) -> bool:
    """NATS subject matching: ``*`` is one token, a final ``>`` one or more; ``subject`` may itself
    be a filter (``a.*`` is matched by ``a.*`` and ``a.>``, not by ``a.b``)."""
    p, s = pattern.split("."), subject.split(".")
    for i, token in enumerate(p):
        if token == ">":
            return len(s) > i
        if i >= len(s) or s[i] == ">" or (token != "*" and token != s[i]):
            return False
    return len(p) == len(s)


def may_publish(g: Grant, subject: str) -> bool:
    return any(matches(p, subject) for p in g.publishes)


def may_read(g: Grant, subject_filter: str) -> bool:
    return any(matches(p, subject_filter) for p in g.reads)


# JetStream's API, as a client uses it: reads of streams and consumers, and the inbox replies.
_JS_READ = (
    "$JS.API.INFO",
    "$JS.API.STREAM.INFO.*",
    "$JS.API.STREAM.NAMES",
    "$JS.API.STREAM.LIST",
    "$JS.API.STREAM.MSG.GET.*",
    "$JS.API.DIRECT.GET.>",
    # Ephemeral (ordered) consumers of watches and reads: created on the stream's bare subject,
    # where the server names them and refuses a durable name, deleted when reset. Creating under
    # a name (``CREATE.<stream>.<name>``) may make a durable: only a service's own durables
    # (``_durable_api``) and the operator's, so nobody else leaves consumers on streams that are
    # not theirs. Another instance's durable is denied besides (``protected``).
    "$JS.API.CONSUMER.CREATE.*",
    "$JS.API.CONSUMER.DELETE.*.*",
    "$JS.API.CONSUMER.MSG.NEXT.*.*",
    "$JS.API.CONSUMER.INFO.*.*",
    "$JS.API.CONSUMER.NAMES.*",
    "$JS.API.CONSUMER.LIST.*",
    "$JS.FC.>",  # their flow-control replies
)
_JS_STREAM_ADMIN = (
    "$JS.API.STREAM.CREATE.*",
    "$JS.API.STREAM.UPDATE.*",
    "$JS.API.STREAM.PURGE.*",
    "$JS.API.STREAM.DELETE.*",
    "$JS.API.CONSUMER.DELETE.*.*",
    "$JS.API.CONSUMER.CREATE.*.>",
    "$JS.API.CONSUMER.DURABLE.CREATE.*.*",
    "$JS.API.CONSUMER.MSG.NEXT.*.*",
    "$JS.API.CONSUMER.INFO.*.*",
    "$JS.ACK.>",
)


def _durable_api(durable: str) -> tuple[str, ...]:
    """What a service may do with one of its own durable consumers (on whichever stream)."""
    return (
        f"$JS.API.CONSUMER.CREATE.*.{durable}",
        f"$JS.API.CONSUMER.CREATE.*.{durable}.>",
        f"$JS.API.CONSUMER.DURABLE.CREATE.*.{durable}",
        f"$JS.API.CONSUMER.INFO.*.{durable}",
        f"$JS.API.CONSUMER.MSG.NEXT.*.{durable}",
        f"$JS.API.CONSUMER.DELETE.*.{durable}",  # reset for a rebuild
        f"$JS.ACK.*.{durable}.>",
        f"dlq.{durable}",
    )


# What a person with the CLI may be allowed to do, verb by verb (``hyperjob user add --verbs``):
# the request subjects, each on ``<subject>.<namespace>`` for the namespaces granted
# (``--namespaces``), or on ``<subject>.*`` and the bare ``<subject>`` (cluster-scoped kinds,
# contract v1) for a person of every namespace.
USER_VERBS: dict[str, tuple[str, ...]] = {
    "apply": ("hj.manifest.apply",),
    "delete": ("hj.object.delete",),
    "command": ("hj.hyperjob.command", "hj.object.command"),
}
ALL_NAMESPACES = "*"
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def user_subjects(verbs: Iterable[str], namespaces: Iterable[str] = (ALL_NAMESPACES,)) -> tuple[str, ...]:
    """The subjects a person may publish: each verb's requests in each namespace granted (``*``:
    every namespace, and the bare subjects with it). Raises ``ValueError`` naming what is unknown."""
    verbs, namespaces = tuple(verbs), tuple(namespaces)
    unknown = sorted(set(verbs) - set(USER_VERBS))
    if unknown:
        raise ValueError(f"verbs: {', '.join(unknown)} unknown (known: {', '.join(USER_VERBS)})")
    bad = sorted(n for n in namespaces if n != ALL_NAMESPACES and (not _NAMESPACE.match(n) or len(n) > 63))
    if bad:
        raise ValueError(f"namespaces: {', '.join(map(repr, bad))}: a namespace is a DNS label (a-z, 0-9, '-')")
    out: list[str] = []
    for verb in verbs:
        for subject in USER_VERBS[verb]:
            if ALL_NAMESPACES in namespaces:
                out.append(subject)
            out += [f"{subject}.{namespace}" for namespace in namespaces]
    return tuple(out)


def nats_permissions(
    role: Role,
    *,
    cluster: str = "",
    instance: str = "",
    verbs: tuple[str, ...] | None = None,
    namespaces: tuple[str, ...] | None = None,
    protected: Iterable[str] = (),
) -> dict[str, dict[str, list[str]]]:
    """The ``permissions`` block of a nats-server user for one instance of ``role``: publish only
    what the role produces (plus the JetStream API for its own consumers), subscribe only to
    replies — JetStream delivers consumed messages to the consumer's inbox. A person (``user``)
    may be limited to some ``verbs`` of ``USER_VERBS`` (``()``: read only) and to some
    ``namespaces`` (``None``: every one; ``user_subjects``); people also hear the
    answers to their requests (``hj.result.<id>``, the submit contract's core subscription).

    ``protected`` names every durable consumer of the system: those that are not this instance's
    own are denied (create, fetch, ack, delete), since ephemeral consumers may be made and deleted
    under any other name. The operator's are never denied."""
    g = grant(role, cluster=cluster, instance=instance)
    publishes = g.publishes
    if role == "user" and (verbs is not None or namespaces is not None):
        publishes = user_subjects(
            USER_VERBS if verbs is None else verbs, (ALL_NAMESPACES,) if namespaces is None else namespaces
        )
    publish = [*publishes, *_JS_READ]
    for durable in g.durables:
        publish += _durable_api(durable)
    deny: list[str] = []
    if role == "operator":
        publish += _JS_STREAM_ADMIN
    else:
        for durable in sorted(set(protected) - set(g.durables)):
            deny += [p for p in _durable_api(durable) if ".INFO." not in p]
    subscribe = ["_INBOX.>", "hj.result.>"] if role in ("user", "operator") else ["_INBOX.>"]
    return {"publish": {"allow": publish, **({"deny": deny} if deny else {})}, "subscribe": {"allow": subscribe}}


def durables_of(role: Role, *, cluster: str = "", instance: str = "") -> tuple[str, ...]:
    """The durable consumers of one instance (what ``protected`` collects over a system)."""
    if role not in SERVICE_ROLES:
        return ()
    return grant(role, cluster=cluster, instance=instance).durables


class Identity(msgspec.Struct, frozen=True, kw_only=True):
    """One NATS user and one Redis user. ``name`` is the service instance's name (its durable
    consumers and keys are named after it) or the person's; ``verbs`` limits a person (``user``
    role) to some of ``access.USER_VERBS`` (None: all of them, ``()``: read only), ``namespaces``
    to the requests of some namespaces (None: every namespace, cluster-scoped kinds too)."""

    name: str
    role: Role
    cluster: str = ""
    verbs: tuple[str, ...] | None = None
    namespaces: tuple[str, ...] | None = None

    def nats_permissions(self, protected: Iterable[str] = ()) -> dict[str, dict[str, list[str]]]:
        return nats_permissions(
            self.role,
            cluster=self.cluster,
            instance=self.name,
            verbs=self.verbs,
            namespaces=self.namespaces,
            protected=protected,
        )

    @property
    def durables(self) -> tuple[str, ...]:
        return durables_of(self.role, cluster=self.cluster, instance=self.name)


def with_credentials(url: str, user: str, password: str) -> str:
    """``url`` (or each of a comma-separated list) as ``user`` connects to it: ``user:password@`` in
    front of the host, as nats-py and redis-py read it; credentials already in a URL are replaced."""
    out = []
    for one in url.split(","):
        scheme, sep, rest = one.strip().partition("://")
        if not sep:
            raise ValueError(f"{url!r}: a URL needs a scheme (nats://, tls://, redis://, rediss://)")
        out.append(f"{scheme}://{user}:{password}@{rest.rpartition('@')[2]}")
    return ",".join(out)


def without_credentials(url: str) -> str:
    """``url`` (or a comma-separated list) as logs and error messages may show it: no ``user:password@``."""
    return ",".join(re.sub(r"//[^@/]*@", "//", u) for u in url.split(","))
