"""What ``get``/``describe`` show of CronJobs, JobFlows and JobTemplates (from the
workflow-controller's documents), and ``apply -f`` naming objects that give ``generateName``."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from hyperjob import records
from hyperjob.api.names import ALPHABET
from hyperjob.cli import manifests, views


class Docs:
    """The reads ``views`` makes of a client, over documents given in the test."""

    def __init__(self, docs: dict[str, dict[str, Any]]) -> None:
        self._docs = docs

    async def docs(self, kind: str, type_: type[Any]) -> dict[str, Any]:
        return dict(sorted(self._docs.get(kind, {}).items()))


def client() -> Any:
    """The documents, dated from now (a view shows ages against the wall clock)."""
    now = time.time()
    docs = {records.CRONJOB: {"nightly": cron(now)}, records.JOBFLOW: {"f": flow(now)}}
    return Docs({**docs, records.JOBTEMPLATE: {"a": template(now)}})


def cron(now: float) -> records.CronJobDoc:
    return records.CronJobDoc(
    manifest={"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "CronJob", "metadata": {"name": "nightly"},
              "spec": {"schedule": "*/5 * * * *", "concurrencyPolicy": "Forbid", "jobTemplate": {"spec": {}}}},
    created=now - 600,
    last_schedule_time=now - 30,
    active=["nightly-5"],
    jobs={"nightly-5": records.MadeJob(request="r", created=now - 30, phase="Running", scheduled_at=now - 30)},
)  # fmt: skip


def flow(now: float) -> records.JobFlowDoc:
    return records.JobFlowDoc(
    manifest={"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobFlow", "metadata": {"name": "f"},
              "spec": {"flows": [{"name": "a"}, {"name": "b", "dependsOn": {"targets": ["a"]}}]}},
    created=now - 60,
    phase="Running",
    status={"phase": "Running", "pending_jobs": ["f-b"], "completed_jobs": ["f-a"], "unknown_jobs": []},
    jobs={"f-a": records.MadeJob(request="r1", created=now - 60, phase="Completed"),
          "f-b": records.MadeJob(request="r2", created=now - 5)},
)  # fmt: skip


def template(now: float) -> records.JobTemplateDoc:
    return records.JobTemplateDoc(
        manifest={"apiVersion": "flow.volcano.sh/v1alpha1", "kind": "JobTemplate", "metadata": {"name": "a"}},
        created=now - 120,
    )


async def test_cronjobs_show_kubectls_columns_and_status() -> None:
    items = await views.cronjobs(client(), None)
    header, rows = views.cronjob_rows(items)
    assert header == ["NAME", "SCHEDULE", "TIMEZONE", "SUSPEND", "ACTIVE", "LAST SCHEDULE", "AGE"]
    assert rows == [["nightly", "*/5 * * * *", "<none>", "False", "1", "30s", "10m"]]
    status = views.cronjob_manifest(items[0])["status"]
    assert status["active"] == [{"kind": "Job", "name": "nightly-5"}] and status["lastScheduleTime"].endswith("Z")
    assert "lastSuccessfulTime" not in status
    assert views.kind("cronvj") is views.kind("cronjobs")


async def test_jobflows_show_volcanos_status_and_templates_the_jobs_made_from_them() -> None:
    items = await views.jobflows(client(), "f")
    assert views.jobflow_rows(items, wide=True)[1] == [["f", "Running", "60s", "1/0/1/0", "-"]]
    status = views.jobflow_manifest(items[0])["status"]
    assert status["state"] == {"phase": "Running"} and status["completedJobs"] == ["f-a"]
    assert status["unKnowJobs"] == [] and [j["state"] for j in status["jobStatusList"]] == ["Completed", "Pending"]
    templates = await views.jobtemplates(client(), None)
    assert [(t["name"], t["jobDependsOnList"]) for t in templates] == [("a", ["f-a"])]
    assert views.kind("jt") is views.kind("jobtemplates") and views.kind("jf") is views.kind("jobflows")


def test_apply_names_an_object_from_generate_name_each_time_it_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(
        "apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {generateName: test-job-}\n"
        "spec: {tasks: [{name: t, replicas: 1, template: {spec: {containers: [{name: c, image: i}]}}}]}\n"
    )
    first, second = manifests.objects(str(path))[0], manifests.objects(str(path))[0]
    assert not first.error and re.fullmatch(f"test-job-[{ALPHABET}]{{5}}", first.name)
    assert first.document["metadata"] == {"name": first.name} and first.name != second.name
    path.write_text("apiVersion: batch.volcano.sh/v1alpha1\nkind: Job\nmetadata: {generateName: ''}\nspec: {}\n")
    assert manifests.objects(str(path))[0].error.startswith("$.metadata.generateName")
