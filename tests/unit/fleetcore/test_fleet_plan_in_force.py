"""plan_in_force and child_ref: the plan a HyperJob's children stand for, as the splitter keeps them
on its document and the job-controller receives them in a child's world, is the plan that was split."""

from __future__ import annotations

from hyperjob import events
from hyperjob.fleetcore import SplitPlan, child_ref, plan_in_force, plan_split
from tests.unit.fleetcore.fleet_builders import ABC_CLUSTERS, job_spec, rjob, task, upstream

SPLIT = {"clusters": [{"name": "a", "replicas": 3}, {"name": "b", "replicas": 2}]}


def split() -> SplitPlan:
    hyperjob = upstream("pi", rjob("job", job_spec(task("launcher", 1, gpus=0), task("worker", 4)), split=SPLIT))
    plan = plan_split(hyperjob, ABC_CLUSTERS)
    assert isinstance(plan, SplitPlan), plan
    return plan


def refs(plan: SplitPlan) -> list[events.ChildRef]:
    return [child_ref(c, template_hash="abc") for c in plan.children]


def test_the_recorded_children_stand_for_the_plan_that_was_split():
    plan = split()
    assert plan_in_force("pi", refs(plan), plan.world_size, plan.generation) == plan
    assert [(c.cluster, c.rank_offset, c.tasks) for c in plan.children] == [
        ("a", 0, {"launcher": 1, "worker": 2}),
        ("b", 3, {"worker": 2}),
    ]


def test_the_generation_is_the_documents_and_zero_in_a_world():
    plan = split()
    assert plan_in_force("pi", refs(plan), world_size=5, generation=3).generation == 3
    assert plan_in_force("pi", refs(plan), world_size=5).generation == 0


def test_an_unplaced_child_stays_unplaced():
    child = events.ChildRef(name="pi-job-0", replicated_job="job", tasks={"worker": 2}, replicas=2)
    plan = plan_in_force("pi", [child], world_size=2)
    assert plan.children[0].cluster == "" and plan.placement == {"": 2}


def test_the_plan_owns_its_task_counts():
    """A plan changed later (a re-split scales a child) never writes through to the record it came from."""
    child = events.ChildRef(name="pi-job-0", cluster="a", tasks={"worker": 2}, replicas=2)
    plan_in_force("pi", [child], world_size=2).children[0].tasks["worker"] = 9
    assert child.tasks == {"worker": 2}


def test_a_recorded_child_carries_its_template_hash():
    [ref, *_] = refs(split())
    assert (ref.name, ref.cluster, ref.template_hash) == ("pi-job-0", "a", "abc")
