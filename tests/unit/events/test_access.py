"""Least privilege (``events.access``, ``records.owners``): each role publishes only what it
produces and writes only its own kinds of document, and the grants hold for what the services
really do — every example scenario runs in the simulator with each instance's traffic checked
against its role's grant."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from hyperjob import simulator
from hyperjob.events import access
from hyperjob.records import owners
from hyperjob.simulator.engine import Engine
from hyperjob.simulator.fleet import InstancePlan

SCENARIOS = sorted((Path(__file__).parents[3] / "examples" / "scenarios").glob("*.yaml"))


@pytest.mark.parametrize(
    ("role", "cluster", "subject"),
    [
        ("node-agent", "a", "node.pods.phase.b"),  # completing another cluster's pods
        ("node-agent", "a", "nodestatus.b.fake"),  # registering a node in another cluster
        ("node-agent", "a", "hj.object.delete"),
        ("job-controller", "a", "jobstate.b.j.0"),
        ("cluster-scheduler", "a", "sched.pods.bound.b"),
        ("status-aggregator", "", "cfg.queue.default"),
        ("user", "", "node.pods.phase.a"),
        ("user", "", "admin.command.splitter"),
        ("user", "", "cfg.queue.default"),
    ],
)
def test_a_role_cannot_publish_what_it_does_not_produce(role: Any, cluster: str, subject: str) -> None:
    assert not access.may_publish(access.grant(role, cluster=cluster), subject)


def test_each_role_publishes_its_own_subjects() -> None:
    assert access.may_publish(access.grant("node-agent", cluster="a"), "nodestatus.a.n1")
    assert access.may_publish(access.grant("user"), "hj.object.delete")
    assert access.may_publish(access.grant("splitter"), "cfg.queue.default")
    assert access.may_publish(access.grant("job-controller", cluster="a"), "state.job-controller-a.job@a.x")
    assert not access.may_publish(access.grant("job-controller", cluster="a"), "state.job-controller-b.job@b.x")
    # A child deleted before it was placed: the global-scheduler says it is gone, for no cluster.
    assert access.may_publish(access.grant("global-scheduler"), "job.removed.unplaced")
    assert not access.may_publish(access.grant("global-scheduler"), "job.removed.a")


def allowed(permissions: dict[str, Any], subject: str) -> bool:
    """As nats-server decides: an allow matches and no deny does."""
    publish = permissions["publish"]
    return any(access.matches(p, subject) for p in publish["allow"]) and not any(
        access.matches(p, subject) for p in publish.get("deny", [])
    )


SYSTEM_DURABLES = [
    *access.durables_of("node-agent", cluster="a"),
    *access.durables_of("job-controller", cluster="a"),
    *access.durables_of("splitter"),
]


def test_only_a_consumers_owner_or_the_operator_may_delete_or_ack_it() -> None:
    agent = access.nats_permissions("node-agent", cluster="a", protected=SYSTEM_DURABLES)
    assert allowed(agent, "$JS.API.CONSUMER.DELETE.NODE.node-agent-a")
    assert allowed(agent, "$JS.ACK.NODE.node-agent-a-faults.1.2.3.4.5")
    assert allowed(agent, "$JS.API.CONSUMER.DELETE.STATE.qj5u3upv")  # an ephemeral consumer of a watch
    for forged in (
        "$JS.API.CONSUMER.DELETE.JOB.job-controller-a",
        "$JS.API.CONSUMER.CREATE.JOB.job-controller-a.job.>",
        "$JS.API.CONSUMER.MSG.NEXT.JOB.splitter-admin",
        "$JS.ACK.JOB.job-controller-a.1.2.3.4.5",
        "$JS.API.STREAM.DELETE.JOB",
    ):
        assert not allowed(agent, forged), forged
    person = access.nats_permissions("user", protected=SYSTEM_DURABLES)
    assert not allowed(person, "$JS.API.CONSUMER.DELETE.JOB.job-controller-a")
    operator = access.nats_permissions("operator", protected=SYSTEM_DURABLES)
    assert allowed(operator, "$JS.API.STREAM.DELETE.JOB")


def test_a_person_may_be_limited_to_some_verbs() -> None:
    reader = access.nats_permissions("user", verbs=())
    assert not allowed(reader, "hj.manifest.apply") and not allowed(reader, "hj.object.delete")
    submitter = access.nats_permissions("user", verbs=("apply",))
    assert allowed(submitter, "hj.manifest.apply") and not allowed(submitter, "hj.object.delete")
    assert submitter["subscribe"]["allow"] == ["_INBOX.>", "hj.result.>"]  # hears its answers
    with pytest.raises(ValueError, match="verbs: erase unknown"):
        access.nats_permissions("user", verbs=("erase",))


def test_a_person_may_be_limited_to_some_namespaces() -> None:
    team_a = access.nats_permissions("user", verbs=("apply", "delete"), namespaces=("team-a",))
    assert allowed(team_a, "hj.manifest.apply.team-a") and allowed(team_a, "hj.object.delete.team-a")
    for denied in ("hj.manifest.apply.team-b", "hj.manifest.apply", "hj.object.delete", "hj.hyperjob.command.team-a"):
        assert not allowed(team_a, denied), denied
    everywhere = access.nats_permissions("user", verbs=("delete",))
    assert allowed(everywhere, "hj.object.delete") and allowed(everywhere, "hj.object.delete.team-b")
    assert not allowed(everywhere, "hj.object.delete.team-b.x")  # one token: a namespace
    with pytest.raises(ValueError, match="namespaces: 'Team_A'"):
        access.nats_permissions("user", verbs=("apply",), namespaces=("Team_A",))


def test_a_url_carries_an_identitys_credentials() -> None:
    assert (
        access.with_credentials("nats://a:4222,nats://old:pw@b:4223", "u", "p") == "nats://u:p@a:4222,nats://u:p@b:4223"
    )
    with pytest.raises(ValueError, match="needs a scheme"):
        access.with_credentials("127.0.0.1:4222", "u", "p")


def test_a_cluster_service_needs_its_cluster() -> None:
    with pytest.raises(ValueError, match="node-agent serves one cluster"):
        access.grant("node-agent")


def test_subject_matching_follows_nats() -> None:
    assert access.matches("a.*", "a.b") and access.matches("a.>", "a.b.c") and access.matches("a.>", "a.*")
    assert not access.matches("a.*", "a.b.c") and not access.matches("a.*", "a.>") and not access.matches("a.>", "a")


# -- the grants hold for what the services do ---------------------------------------------------


class Traffic:
    """Every subject an instance published or read, through a view of the fleet's bus."""

    def __init__(self, bus: Any, seen: dict[str, set[tuple[str, str]]], instance: str) -> None:
        self._bus, self._seen = bus, seen.setdefault(instance, set())

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._bus, name)
        if name == "publish":
            return lambda subject, *a, **k: self._note("publish", [subject], attr(subject, *a, **k))
        if name == "publish_many":
            return self._publish_many(attr)
        if name in ("consume", "consume_batch", "lag", "reset_consumer"):
            return lambda durable, subjects, *a, **k: self._note(
                "read", [subjects] if isinstance(subjects, str) else subjects, attr(durable, subjects, *a, **k), durable
            )
        if name in ("watch", "last", "last_per_subject"):
            return lambda subject, *a, **k: self._note("read", [subject], attr(subject, *a, **k))
        return attr

    def _publish_many(self, attr: Any) -> Any:
        def publish_many(messages: Any, *a: Any, **k: Any) -> Any:
            messages = list(messages)
            subjects = [m.subject if hasattr(m, "subject") else m[0] for m in messages]
            return self._note("publish", subjects, attr(messages, *a, **k))

        return publish_many

    def _note(self, what: str, subjects: list[str], result: Any, durable: str = "") -> Any:
        self._seen.update((what, s) for s in subjects)
        if durable:
            self._seen.add(("durable", durable))
        return result


def test_every_scenario_keeps_within_its_roles_grants() -> None:
    seen: dict[str, set[tuple[str, str]]] = {}
    plans: dict[str, InstancePlan] = {}

    class Watched(Engine):
        def bus_for(self, plan: InstancePlan) -> Any:
            plans[plan.name] = plan
            return Traffic(self.bus, seen, plan.name)

    for path in SCENARIOS:
        with simulator._quiet():
            asyncio.run(Watched(simulator.load(path.read_text())).run())
    outside = []
    for name, traffic in sorted(seen.items()):
        plan = plans[name]
        g = access.grant(plan.service, cluster=plan.cluster, instance=name)  # type: ignore[arg-type]
        for what, subject in sorted(traffic):
            allowed = {
                "publish": access.may_publish(g, subject),
                "read": access.may_read(g, subject),
                "durable": subject in g.durables,
            }[what]
            if not allowed:
                outside.append(f"{name} {what} {subject}")
    assert len(seen) >= 6 and outside == []


def test_each_service_keeps_the_kinds_its_store_user_may_write() -> None:
    engine = Engine(simulator.load((SCENARIOS[0].parent / "ex-14-cluster-down-child-replaced.yaml").read_text()))
    with simulator._quiet():
        asyncio.run(engine.run())
    for name, runtime in engine.runtimes.items():
        plan = engine.plans[name]
        assert set(runtime.projection.tables) == set(owners.kinds_of(plan.service, cluster=plan.cluster, instance=name))
    assert {engine.plans[n].service for n in engine.runtimes} == set(owners.KINDS_BY_ROLE)
