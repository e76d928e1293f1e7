"""An update that replaces a child in place is not a failure of the HyperJob (issue 28, item 2)."""

from __future__ import annotations

from hyperjob import events
from hyperjob.services.status_aggregator import domain

TASK = {"name": "trainer", "replicas": 1, "template": {"spec": {"containers": [{"name": "t", "image": "x"}]}}}
OLD = [events.ChildRef(name="grow-job-0", cluster="cluster-a", replicas=8, template_hash="t1")]


def _news(old: str, new: str) -> events.JobPhaseChanged:
    return events.JobPhaseChanged(
        event_id=f"{old}-{new}", cluster="cluster-a", job="grow-job-0", hyperjob="grow", old=old, new=new
    )


def test_a_new_template_on_the_same_cluster_is_a_replacement_in_place() -> None:
    new = [events.ChildRef(name="grow-job-0", cluster="cluster-a", replicas=8, template_hash="t2")]
    assert domain.replaced_in_place(OLD, new) == ["grow-job-0@cluster-a"]


def test_a_move_or_an_unchanged_child_is_no_replacement_in_place() -> None:
    moved = [events.ChildRef(name="grow-job-0", cluster="cluster-b", replicas=8, template_hash="t2")]
    assert domain.replaced_in_place(OLD, moved) == []
    assert domain.replaced_in_place(OLD, OLD) == []


def test_the_replaced_childs_ending_is_not_news_of_the_plan_until_the_new_child_exists() -> None:
    running = domain.AggregateDoc(
        name="grow", children={"grow-job-0@cluster-a": domain.child_news(_news("", "Running"))}
    )
    doc = domain.forget_replaced(running, ["grow-job-0@cluster-a"])
    assert doc.children == {}
    assert domain.of_replaced_child(doc, _news("Running", "Terminating"))
    assert domain.of_replaced_child(doc, _news("Terminating", "Terminated"))
    assert not domain.of_replaced_child(doc, _news("", "Pending"))  # the replacement's creation


def test_an_update_that_replaces_the_only_child_keeps_the_hyperjob_from_failing() -> None:
    manifest = {
        "apiVersion": "training.volcano.sh/v1alpha1",
        "kind": "HyperJob",
        "metadata": {"name": "grow"},
        "spec": {"replicatedJobs": [{"name": "job", "replicas": 1, "templateSpec": {"tasks": [TASK]}}]},
    }
    new = [events.ChildRef(name="grow-job-0", replicated_job="job", cluster="cluster-a", template_hash="t2")]
    spec = domain.SpecDoc(name="grow", manifest=manifest, children=new, admitted=True)
    doc = domain.forget_replaced(domain.AggregateDoc(name="grow"), ["grow-job-0@cluster-a"])
    assert domain.recompute(doc, spec, 20.0).phase == "Admitted"
