"""``get jobs`` shows a plain Job by the name it was applied under, in its namespace, although its
cluster runs it under its fleet name (ADR 0010): team-a/x and team-b/x are both ``x``."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec

from hyperjob import api, records
from hyperjob.cli import views
from hyperjob.jobcore import model as jm


def manifest(name: str, namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "tasks": [
                {"name": "task", "replicas": 1, "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}}}
            ]
        },
    }


def plain(name: str, namespace: str) -> records.HyperJobDoc:
    key = api.fleet_key(namespace, name)
    return records.HyperJobDoc(name=key, manifest=manifest(name, namespace), created=0.0, plain=True)


def on_cluster(name: str, namespace: str) -> jm.JobRecord:
    job = api.decode(manifest(api.fleet_key(namespace, name), namespace))
    assert isinstance(job, api.Job)
    return jm.JobRecord(name=job.metadata.name, namespace=namespace, uid="u", job=job, phase="Running")


class Docs:
    """The reads ``views.jobs`` makes: the splitter's owners and one cluster's job records."""

    def __init__(self) -> None:
        team_a, team_b = plain("x", "team-a"), plain("x", "team-b")
        self.tables: dict[str, dict[str, Any]] = {
            records.HYPERJOB: {team_a.name: team_a, team_b.name: team_b},
            records.job_kind("c1"): {"team-a-x": on_cluster("x", "team-a")},  # team-b/x waits
        }

    async def cluster_names(self) -> list[str]:
        return ["c1"]

    async def docs(self, kind: str, type_: type[Any]) -> dict[str, Any]:
        return dict(self.tables.get(kind, {}))


def test_two_plain_jobs_of_one_name_show_under_it_each_in_its_namespace() -> None:
    shown = asyncio.run(views.jobs(Docs(), "x"))  # type: ignore[arg-type]
    assert sorted((j["namespace"], j["name"], j["cluster"], j["phase"]) for j in shown) == [
        ("team-a", "x", "c1", "Running"),
        ("team-b", "x", "-", "Pending"),
    ]
    assert asyncio.run(views.jobs(Docs(), "team-a-x")) == []  # found by the name applied, not the fleet's  # type: ignore[arg-type]


def test_a_plain_job_keeps_its_creation_time_whether_its_cluster_runs_it_or_not() -> None:
    """A plain Job was created when it was applied: its cluster's record (made later, and removed
    before the document while it is deleted) must not change it, or its uid (derived from it)
    changes under ``kubectl delete --wait``."""
    docs = Docs()
    docs.tables[records.HYPERJOB] = {
        key: msgspec.structs.replace(doc, created=100.0) for key, doc in docs.tables[records.HYPERJOB].items()
    }
    record = docs.tables[records.job_kind("c1")]["team-a-x"]
    docs.tables[records.job_kind("c1")]["team-a-x"] = msgspec.structs.replace(record, created_at=105.0)
    running = asyncio.run(views.jobs(docs, "x"))  # type: ignore[arg-type]
    docs.tables[records.job_kind("c1")] = {}  # the cluster's record gone first, the document still there
    gone_from_cluster = asyncio.run(views.jobs(docs, "x"))  # type: ignore[arg-type]
    assert {j["namespace"]: j["created"] for j in running} == {"team-a": 100.0, "team-b": 100.0}
    assert {j["namespace"]: j["created"] for j in gone_from_cluster} == {"team-a": 100.0, "team-b": 100.0}
