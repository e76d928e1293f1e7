"""What the nodes do with pods, and the scenario events that act on objects, end to end."""

from __future__ import annotations

from typing import Any

from hyperjob import simulator

HEAD = """\
apiVersion: hyperjob.io/v1alpha1
kind: Scenario
metadata: {name: lifecycle}
spec:
  clusters:
  - name: cluster-a
    nodes: [{name: n, allocatable: {cpu: "4", memory: 8Gi}}]
  events:
"""


def job(
    name: str,
    *,
    replicas: int = 1,
    cpu: str = "1",
    policy: str = "Never",
    annotations: str = "",
    extra: str = "",
    at: str = "0s",
) -> str:
    meta = f"\n            metadata: {{annotations: {{{annotations}}}}}" if annotations else ""
    return f"""\
  - at: {at}
    create:
      apiVersion: batch.volcano.sh/v1alpha1
      kind: Job
      metadata: {{name: {name}}}
      spec:{extra}
        tasks:
        - name: w
          replicas: {replicas}
          template:{meta}
            spec:
              restartPolicy: {policy}
              containers: [{{name: c, image: x, resources: {{requests: {{cpu: "{cpu}"}}}}}}]
"""


def run(body: str, until: str | None = "60s") -> dict[str, Any]:
    return simulator.run(HEAD + body + (f"  until: {until}\n" if until else ""))


def pod(result: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in result["pods"] if p["name"] == name)


def phase(result: dict[str, Any], name: str) -> str:
    return str(next(j for j in result["jobs"] if j["name"] == name)["phase"])


def test_on_failure_restarts_in_place_until_task_failed_fires_the_policy() -> None:
    body = job("j", policy="OnFailure", extra="\n        policies: [{event: TaskFailed, action: TerminateJob}]")
    body += "".join(f"  - {{at: {t}s, podFail: {{pod: j-w-0, exitCode: 3}}}}\n" for t in (5, 6))
    two = run(body)
    assert pod(two, "j-w-0")["phase"] == "Running" and pod(two, "j-w-0")["restarts"] == 2
    assert phase(two, "j") == "Running"
    three = run(body + "  - {at: 7s, podFail: {pod: j-w-0, exitCode: 3}}\n")
    assert phase(three, "j") == "Terminated"


def test_always_restarts_a_container_that_succeeds() -> None:
    result = run(job("j", policy="Always", annotations="hyperjob.io/sim-duration: 10s"), until="35s")
    p = pod(result, "j-w-0")
    assert (p["phase"], p["restarts"], p["startedAt"]) == ("Running", 3, 1.0)
    assert not [e for e in result["events"] if e["type"] in ("PodSucceeded", "PodFailed")]


def test_never_with_exit_code_fails_the_pod_and_the_job() -> None:
    result = run(job("j", annotations='hyperjob.io/sim-duration: 5s, hyperjob.io/sim-exit-code: "2"'))
    p = pod(result, "j-w-0")
    assert (p["phase"], p["finishedAt"]) == ("Failed", 6.0)
    failed = [e for e in result["events"] if e["type"] == "PodFailed"]
    assert [(e["object"], e["time"]) for e in failed] == [("j-w-0", 6.0)]
    assert phase(result, "j") == "Failed"


def test_without_until_the_run_ends_when_nothing_can_change() -> None:
    result = run(job("j", annotations="hyperjob.io/sim-duration: 5s"), until=None)
    assert result["time"] == 6.0
    assert phase(result, "j") == "Completed"


def test_deleting_a_job_frees_its_room() -> None:
    body = job("big", cpu="4") + job("next", cpu="4", at="1s") + "  - {at: 10s, delete: {kind: Job, name: big}}\n"
    result = run(body)
    assert [j["name"] for j in result["jobs"]] == ["next"]
    assert pod(result, "next-w-0")["phase"] == "Running"
    assert pod(result, "next-w-0")["startedAt"] >= 10.0
    assert not [p for p in result["pods"] if p["job"] == "big"]


def test_closing_a_queue_rejects_later_jobs() -> None:
    result = run("  - {at: 0s, command: {kind: Queue, name: default, action: close}}\n" + job("late", at="1s"))
    assert [q["state"] for q in result["queues"]] == ["Closed"]
    assert [(e["type"], e["object"]) for e in result["events"]] == [("Rejected", "late")]
    assert "Closed" in result["events"][0]["reason"]


def test_priority_class_created_then_used() -> None:
    create = (
        "  - at: 0s\n    create: {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass,"
        " metadata: {name: gold}, value: 100}\n"
    )
    ok = run(create + job("j", extra="\n        priorityClassName: gold", at="1s"))
    assert phase(ok, "j") == "Running"
    missing = run(job("j", extra="\n        priorityClassName: gold"))
    assert [e["type"] for e in missing["events"]] == ["Rejected"]
    assert "$.spec.priorityClassName" in missing["events"][0]["reason"]


def test_bad_sim_annotation_is_rejected_not_a_crash() -> None:
    result = run(job("j", annotations="hyperjob.io/sim-duration: soon"))
    assert [e["type"] for e in result["events"]] == ["Rejected"]
    assert "sim-duration" in result["events"][0]["reason"]


def test_bare_podgroup_is_scheduled_without_pods() -> None:
    create = (
        "  - at: 0s\n    create: {apiVersion: scheduling.volcano.sh/v1beta1, kind: PodGroup,"
        " metadata: {name: pg}, spec: {minMember: 1, minResources: {cpu: '1'}}}\n"
    )
    result = run(create)
    assert [(g["name"], g["phase"], g["minMember"]) for g in result["podGroups"]] == [("pg", "Inqueue", 1)]


def test_pod_fail_on_a_pending_pod_changes_nothing() -> None:
    result = run(
        job("j", cpu="8")
        + "  - {at: 5s, podFail: {pod: j-w-0, exitCode: 1}}\n"
        + "  - {at: 5s, podFail: {pod: nobody, exitCode: 1}}\n"
    )
    assert not [e for e in result["events"] if e["type"] == "PodFailed"]
