"""The splitter (its own ``build`` over real JetStream and Redis) answers a Kubeflow job's apply with
the kind applied (issue 29: ``pytorchjob/x created``, as the server dry run says), and keeps it as
the Volcano Job that runs it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from hyperjob import events, records
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
