"""The splitter (its own ``build`` over real JetStream and Redis) answers a Kubeflow job's apply with
the kind applied (issue 29: ``pytorchjob/x created``, as the server dry run says), and keeps it as
the Volcano Job that runs it, beside the manifest as applied (``get -o yaml`` prints that back)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml

from hyperjob import events, records
from hyperjob.cli import views, workloads
from hyperjob.events import subjects
from hyperjob.servicekit import Runtime
from hyperjob.services.splitter.app import build
from hyperjob.services.splitter.config import Settings
from tests.service import service_helpers as sh

pytestmark = pytest.mark.service

PYTORCHJOB = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "torch"},
    "spec": {
        "runPolicy": None,
        "pytorchReplicaSpecs": {
            "Master": {"template": {"spec": {"containers": [{"name": "pytorch", "image": "x", "command": None}]}}}
        },
    },
}


@pytest.fixture
async def splitter(bus, store) -> AsyncIterator[Runtime]:
    await sh.report_capacity(bus, sh.capacity("c1"))
    async with sh.running("splitter", build, Settings(replan_period=0.2), bus, store) as (runtime, _):
        yield runtime


async def applied(bus, probe) -> events.Message:
    msg = sh.apply(PYTORCHJOB)
    await sh.send(bus, subjects.APPLY, msg)
    await probe.settled("splitter", subjects.APPLY)
    return msg


async def test_a_pytorchjob_is_answered_as_a_pytorchjob_and_kept_as_its_volcano_job(splitter, bus, store, probe):
    first, second = await applied(bus, probe), await applied(bus, probe)
    answers = [(await probe.wait(subjects.result(m.event_id)))[0] for m in (first, second)]
    assert [(a.kind, a.name, a.outcome) for a in answers] == [
        ("PyTorchJob", "torch", "created"),
        ("PyTorchJob", "torch", "unchanged"),
    ]
    doc = await sh.doc(store, records.HYPERJOB, "torch", records.HyperJobDoc)
    assert doc.plain and doc.manifest["kind"] == "Job"
    assert doc.manifest["metadata"]["annotations"]["hyperjob.io/source-kind"] == "kubeflow.org/v1/PyTorchJob"


class StoredDocs:
    """The reads ``views.jobs`` makes, answered from the splitter's stored owner (no cluster yet)."""

    def __init__(self, doc: records.HyperJobDoc) -> None:
        self.doc = doc

    async def cluster_names(self) -> list[str]:
        return []

    async def docs(self, kind: str, type_: type[Any]) -> dict[str, Any]:
        return {self.doc.name: self.doc} if kind == records.HYPERJOB else {}


async def test_get_o_yaml_of_a_pytorchjob_prints_it_as_applied_and_reapplying_it_is_unchanged(
    splitter, bus, store, probe
):
    await applied(bus, probe)
    doc = await sh.doc(store, records.HYPERJOB, "torch", records.HyperJobDoc)
    [item] = await views.jobs(StoredDocs(doc), "torch")  # type: ignore[arg-type]
    printed = yaml.safe_load(yaml.safe_dump(workloads.manifest(item)))  # get pytorchjob torch -o yaml > f
    assert (printed["apiVersion"], printed["kind"]) == ("kubeflow.org/v1", "PyTorchJob")
    assert printed["spec"] == PYTORCHJOB["spec"]
    assert printed["status"]["conditions"] == [{"type": "Created", "status": "True"}]
    again = sh.apply(printed)  # apply -f f
    await sh.send(bus, subjects.APPLY, again)
    await probe.settled("splitter", subjects.APPLY)
    answer = (await probe.wait(subjects.result(again.event_id)))[0]
    assert (answer.kind, answer.name, answer.outcome) == ("PyTorchJob", "torch", "unchanged")
