"""Status values: the codes a placement diagnosis gives and kube-scheduler's FitError wording."""

from __future__ import annotations

import pytest

from hyperjob.schedcore import DEFAULT_CONF, Scheduler
from hyperjob.schedcore.status import Code, fit_error
from hyperjob.schedcore.testing import job, node, queue, snapshot


def diagnosis(nodes, **task_kw):
    ssn = Scheduler(DEFAULT_CONF).open(snapshot(nodes, [queue("default")], [job("j").min(1).tasks(1, **task_kw)]))
    return ssn.placement.diagnose(ssn.jobs["j"].tasks[0])


@pytest.mark.parametrize(
    ("nodes", "task_kw", "code"),
    [
        ([node("a").cpu(4).label(zone="x")], {"cpu": 1, "node_selector": {"zone": "y"}}, Code.UNRESOLVABLE),
        ([node("a").cpu(4).not_ready()], {"cpu": 1}, Code.UNRESOLVABLE),
        ([node("a").cpu(1)], {"cpu": 2}, Code.UNSCHEDULABLE),
        ([node("a").cpu(1), node("b").cpu(4).taint("k")], {"cpu": 2}, Code.UNSCHEDULABLE),
    ],
    ids=["selector-only", "not-ready-only", "resources", "taint-and-resources"],
)
def test_diagnosis_is_unresolvable_only_when_no_eviction_could_help(nodes, task_kw, code):
    assert diagnosis(nodes, **task_kw).code is code


def test_fit_error_sums_a_reason_and_leaves_out_reasons_that_rule_out_nothing():
    status = fit_error(
        5,
        [("Insufficient cpu", 2, Code.UNSCHEDULABLE), ("node(s) were NotReady", 0, Code.UNRESOLVABLE),
         ("Insufficient cpu", 1, Code.UNSCHEDULABLE), ("node(s) were unschedulable", 2, Code.UNRESOLVABLE)],
        plugin="predicates",
    )  # fmt: skip
    assert status.message == "0/5 nodes are available: 3 Insufficient cpu, 2 node(s) were unschedulable"
    assert status.code is Code.UNSCHEDULABLE and status.plugin == "predicates" and status.rejects
