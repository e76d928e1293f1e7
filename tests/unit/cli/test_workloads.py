"""Kubeflow's kinds by the name applied (issue 29): the names ``get``/``describe``/``delete`` take,
which listed jobs are of which kind, and the operators' columns."""

from __future__ import annotations

import pytest

from hyperjob import api
from hyperjob.cli import views, workloads


@pytest.mark.parametrize(
    ("name", "kind"),
    [("mpijobs", "MPIJob"), ("PyTorchJob", "PyTorchJob"), ("tfjob", "TFJob"), ("jobs", None), ("mpij", None)],
)
def test_a_kubeflow_kind_goes_by_its_plural_and_singular_in_any_case(name, kind):
    assert workloads.kind_named(name) == kind


def test_the_cli_registers_the_kubeflow_kinds_with_get():
    import hyperjob.cli.main  # noqa: F401, PLC0415 - registering them is what importing the CLI does

    assert views.kind("PyTorchJob") is workloads.KINDS["pytorchjobs"]
    assert views.kind("mpijob") is workloads.KINDS["mpijobs"]


def manifest(source: str | None) -> dict:
    annotations = {api.SOURCE_KIND_ANNOTATION: source} if source else {}
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"annotations": annotations}}


@pytest.mark.parametrize(
    ("source", "kind"),
    [("kubeflow.org/v1/PyTorchJob", "PyTorchJob"), ("kubeflow.org/v2beta1/MPIJob", "MPIJob"), (None, "Job")],
)
def test_a_listed_job_says_the_kind_it_was_applied_as(source, kind):
    assert workloads.applied_kind(manifest(source)) == kind


@pytest.mark.parametrize(
    ("phase", "state"),
    [("Pending", "Created"), ("Running", "Running"), ("Completed", "Succeeded"), ("Failed", "Failed")],
)
def test_get_shows_the_operators_state_column(phase, state):
    item = {"name": "x", "phase": phase, "created": 0.0, "cluster": "c", "queue": "q"}
    header, rows = workloads.rows([item])
    assert header == ["NAME", "STATE", "AGE"] and rows[0][:2] == ["x", state]
    wide_header, wide_rows = workloads.rows([item], wide=True)
    assert wide_header[3:] == ["CLUSTER", "QUEUE", "PHASE"] and wide_rows[0][3:] == ["c", "q", phase]


def test_the_manifest_reports_the_state_as_the_operators_last_condition():
    item = {
        "name": "x",
        "namespace": "default",
        "phase": "Completed",
        "created": 0.0,
        "cluster": "c",
        "waitingReason": "",
        "hyperJob": None,
        "pods": [],
        "manifest": manifest("kubeflow.org/v1/PyTorchJob"),
        **dict.fromkeys(("pending", "running", "succeeded", "failed", "terminating", "retryCount"), 0),
    }
    status = workloads.manifest(item)["status"]
    assert status["conditions"][-1:] == [{"type": "Succeeded", "status": "True"}]
    assert status["state"] == {"phase": "Completed"}


def test_the_manifest_is_the_one_applied_when_the_splitter_kept_it():
    applied = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "x"}, "spec": {"a": 1}}
    item = {
        "name": "x",
        "phase": "Running",
        "created": 0.0,
        "cluster": "c",
        "waitingReason": "",
        "hyperJob": None,
        "pods": [],
        "manifest": manifest("kubeflow.org/v1/PyTorchJob"),
        "applied": applied,
        **dict.fromkeys(("pending", "running", "succeeded", "failed", "terminating", "retryCount"), 0),
    }
    shown = workloads.manifest(item)
    assert (shown["apiVersion"], shown["kind"], shown["spec"]) == ("kubeflow.org/v1", "PyTorchJob", {"a": 1})
    assert shown["status"]["conditions"] == [{"type": "Running", "status": "True"}]
