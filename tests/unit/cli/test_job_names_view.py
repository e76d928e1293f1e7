"""``get jobs`` shows a plain Job by the name it was applied under, in its namespace, although its
cluster runs it under its fleet name (ADR 0010): team-a/x and team-b/x are both ``x``."""

from __future__ import annotations

import asyncio
from typing import Any

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
