"""A round's id (``events.round_id``) is one recipe for every service's rounds: the values below
were computed by the three copies it replaced (cluster-scheduler's cycle, global-scheduler's round,
the splitter's re-planning round), so the ids of rounds already in a changelog or an outbox stay
as they were."""

from __future__ import annotations

from hyperjob import events
from hyperjob.servicekit import Reaction
from hyperjob.services.cluster_scheduler import handlers as cluster_scheduler
from hyperjob.services.global_scheduler import domain as global_scheduler
from hyperjob.services.splitter import failover as splitter
from hyperjob.store import Binding, Unbind

NOW = 12.5


def _round() -> Reaction:
    reaction = Reaction()
    reaction.publish("a", events.HyperJobDeleted(event_id="e1", name="x"))
    reaction.publish("b", events.HyperJobDeleted(event_id="e2", name="y"))
    return reaction


def _cycle() -> Reaction:
    reaction = _round()
    reaction.binds.append(Binding(cluster="c1", pod="p1", node="n1", request={}, uid="u1"))
    reaction.unbinds.append(Unbind(cluster="c1", pod="p0"))
    return reaction


def test_round_id_is_the_id_the_copies_it_replaced_gave() -> None:
    assert events.round_id("global-scheduler-0", "round", NOW, ["e1", "e2"]) == "107f77cc-d25c-50e8-86b1-4b6455ffdb12"
    assert events.round_id("splitter-0", "replan", NOW, ["e1", "e2"]) == "92ae1b9a-2674-5768-94fe-0cb915efb6ad"
    decided = ["e1", "e2", "+p1@n1:u1", "-p0"]
    assert events.round_id("cluster-scheduler-c1", "cycle", NOW, decided) == "f0e10e3f-de1a-544e-817e-d8a934cc7e03"


def test_each_service_names_its_rounds_as_before() -> None:
    assert global_scheduler.round_cause("global-scheduler-0", NOW, _round()) == "107f77cc-d25c-50e8-86b1-4b6455ffdb12"
    assert splitter.replan_cause("splitter-0", NOW, _round()) == "92ae1b9a-2674-5768-94fe-0cb915efb6ad"
    cycle = cluster_scheduler.cycle_cause("cluster-scheduler-c1", NOW, _cycle())
    assert cycle == "f0e10e3f-de1a-544e-817e-d8a934cc7e03"


def test_a_round_that_decided_otherwise_is_another_round() -> None:
    assert events.round_id("splitter-0", "replan", NOW, ["e1"]) != events.round_id("splitter-0", "replan", NOW, ["e2"])
    assert events.round_id("splitter-0", "replan", NOW, ["e1"]) != events.round_id("splitter-0", "replan", 13.0, ["e1"])
