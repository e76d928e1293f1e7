"""How a pod's container ended reaches where a user looks (issue 27): a node's report of an OOM
kill (reason ``OOMKilled``, exit 137) goes through the job-controller's pure conversion and jobcore
into the job record, and ``get pods`` shows it as kubectl does (STATUS ``OOMKilled``; the terminated
state in ``-o yaml``; ``Reason``/``Exit Code`` in ``describe``)."""

from __future__ import annotations

import asyncio
from typing import Any

from hyperjob import events, records
from hyperjob import jobcore as jc
from hyperjob.cli import describe
from hyperjob.client import views
from hyperjob.services.job_controller import domain as jcd
from tests.unit.jobcore.jobcore_builders import Driver, admitted, task

POD = "job1-worker-0"


class Docs:
    """The reads ``views.pods`` makes: one cluster's job records."""

    def __init__(self, record: jc.JobRecord) -> None:
        self.record = record

    async def cluster_names(self) -> list[str]:
        return ["c1"]

    async def docs(self, kind: str, type_: type[Any]) -> dict[str, Any]:
        return {self.record.name: self.record} if kind == records.job_kind("c1") else {}


def running(restart_policy: str) -> Driver:
    driver = Driver(admitted(task("worker", 1, template_restartPolicy=restart_policy)))
    driver.start()
    driver.run(POD)
    return driver


def reported(driver: Driver, phase: str, restarts: int = 0) -> dict[str, Any]:
    """The pod as ``get pods`` sees it once its node reported its container killed for memory."""
    pod = driver.pod(POD)
    report = events.PodReport(
        pod=POD, uid=pod.uid, job="job1", node="n1", phase=phase, exit_code=137, restarts=restarts, reason="OOMKilled"
    )
    event = jcd.pod_event(driver.record, report)
    assert event is not None
    driver.send(event)
    driver.send(event)  # redelivered: one effect
    (item,) = asyncio.run(views.pods(Docs(driver.record), POD))  # type: ignore[arg-type]
    return item


def test_a_pod_killed_for_memory_shows_oomkilled_and_exit_137() -> None:
    item = reported(running("Never"), "Failed")

    _, rows = views.pod_rows([item])
    assert rows[0][2] == "OOMKilled"
    (container,) = views.pod_manifest(item)["status"]["containerStatuses"]  # as kubectl reads it
    assert container["name"] == "main"  # the task's container
    assert container["state"] == {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}
    assert item["phase"] == "Failed"  # the phase stays the pod's, for programs and policies
    lines = describe.render(item).splitlines()
    assert "Reason:     OOMKilled" in lines and "Exit Code:  137" in lines


def test_a_pod_restarted_after_an_oom_kill_keeps_it_as_its_last_state() -> None:
    item = reported(running("Always"), "Running", restarts=1)

    _, rows = views.pod_rows([item])
    assert rows[0][2:4] == ["Running", "1"]
    (container,) = views.pod_manifest(item)["status"]["containerStatuses"]
    assert container["lastState"] == {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}
    assert "state" not in container and container["restartCount"] == 1


def test_a_pod_that_failed_without_a_reason_shows_its_phase() -> None:
    driver = running("Never")
    driver.fail(POD, exit_code=3)
    (item,) = asyncio.run(views.pods(Docs(driver.record), POD))  # type: ignore[arg-type]

    assert views.pod_rows([item])[1][0][2] == "Failed"
    (container,) = views.pod_manifest(item)["status"]["containerStatuses"]
    assert container["state"] == {"terminated": {"exitCode": 3}}


def test_a_pod_that_succeeded_is_terminated_with_exit_0() -> None:
    driver = running("Never")
    driver.succeed(POD)
    (item,) = asyncio.run(views.pods(Docs(driver.record), POD))  # type: ignore[arg-type]

    assert views.pod_rows([item])[1][0][2] == "Succeeded"
    status = views.pod_manifest(item)["status"]
    (container,) = status["containerStatuses"]
    assert container["state"] == {"terminated": {"exitCode": 0}} and "lastState" not in container
    assert "state" not in status  # not the pod's own: a Volcano Job's status.state is another thing
