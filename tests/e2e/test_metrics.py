"""Every service's /metrics, /healthz and /readyz under ``hyperjob up``, after the README's HyperJob
ran; ``get services -o wide`` shows where they are; ``get events`` and ``describe`` tell its story."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest

from hyperjob.testkit.metrics import sample

from .conftest import REPO, Cli

pytestmark = pytest.mark.e2e

EXAMPLE = REPO / "examples" / "hyperjob-llm.yaml"
NAME = "llm-train-hyperjob"
SERVICES = {"splitter", "global_scheduler", "status_aggregator", "workflow_controller"}
CLUSTER_SERVICES = {"cluster_scheduler", "job_controller", "node_agent"}


def fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:  # noqa: S310 - a loopback URL of ours
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


@pytest.fixture(scope="module")
def ran(cli: Cli) -> Cli:
    """The README's HyperJob, run to completion (deleted at the end of the module)."""
    cli.run("apply", "-f", str(EXAMPLE))

    def completed() -> bool:
        return cli.json("get", "hyperjobs", NAME)["phase"] == "Completed"

    cli.wait_for("the HyperJob to complete", completed, timeout=180)
    yield cli
    cli.run("delete", "hyperjob", NAME, "--timeout", "120", check=False)


def endpoints(cli: Cli) -> dict[str, str]:
    """Each supervised process's /metrics URL, as ``get services -o json`` shows it."""
    items = json.loads(cli.run("get", "services", "-o", "json").stdout)["items"]
    return {i["name"]: i["endpoints"]["metrics"] for i in items if i["endpoints"]["metrics"]}


def test_get_services_shows_every_services_metrics_endpoint(ran: Cli) -> None:
    def reported() -> dict[str, str] | None:
        urls = endpoints(ran)
        return urls if len(urls) >= len(SERVICES) + len(CLUSTER_SERVICES) * 2 + 1 else None

    urls = ran.wait_for("every service to report its endpoint", reported)
    assert {n for n in urls if "@" not in n} >= SERVICES | {"dashboard"}
    assert {n.split("@")[0] for n in urls if "@" in n} == CLUSTER_SERVICES
    assert all(re.fullmatch(r"http://127\.0\.0\.1:\d+/metrics", u) for u in urls.values())
    wide = ran.run("get", "services", "-o", "wide").stdout.splitlines()
    assert "METRICS" in wide[0].split()
    assert urls["splitter"] in next(line for line in wide if line.startswith("splitter "))


def test_every_service_is_alive_and_ready(ran: Cli) -> None:
    for name, url in endpoints(ran).items():
        if name == "dashboard":
            continue
        base = url.removesuffix("/metrics")
        status, body = fetch(f"{base}/healthz")
        assert status == 200 and json.loads(body)["bus"] == "connected", name
        status, body = fetch(f"{base}/readyz")
        assert (status, json.loads(body)) == (200, {"ready": True, "active": True, "problems": []}), name


def test_the_status_aggregator_counts_the_hyperjob_and_its_journey(ran: Cli) -> None:
    status, text = fetch(endpoints(ran)["status_aggregator"])
    assert status == 200
    assert sample(text, "hyperjob_hyperjobs", phase="Completed") >= 1
    assert sample(text, "hyperjob_submit_to_running_seconds_count") >= 1
    assert 0 < sample(text, "hyperjob_submit_to_running_seconds_sum") < 180
    assert sample(text, "hyperjob_admissions_total") >= 1
    for cluster in ("cluster-a", "cluster-b"):  # the example is one gang across both clusters
        assert sample(text, "hyperjob_gang_reservations_total", cluster=cluster, outcome="held") >= 1
    for cluster in ("cluster-a", "cluster-b"):
        running = sample(text, "hyperjob_child_job_phase_transitions_total", cluster=cluster, phase="Running")
        assert running >= 1, cluster
    assert sample(text, "hyperjob_bus_messages_handled_total", subject="hj.hyperjob.spec", outcome="ok") >= 1
    assert sample(text, "hyperjob_bus_handler_duration_seconds_count", subject="job.phase.cluster-a") >= 1


def test_promtool_finds_every_services_metrics_clean(ran: Cli) -> None:
    """Prometheus' linter on each /metrics as a scrape reads it (Volcano's names it refuses are
    recorded by deploy/prometheus/volcano.rules.yml, not exported)."""
    if shutil.which("promtool") is None:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus); the metrics are not linted")
    urls = endpoints(ran)
    assert len(urls) >= len(SERVICES) + len(CLUSTER_SERVICES) * 2 + 1
    for name, url in urls.items():
        status, text = fetch(url)
        checked = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
        assert (status, checked.returncode, checked.stdout + checked.stderr) == (200, 0, ""), name


def test_every_service_counts_the_messages_it_handled(ran: Cli) -> None:
    urls = endpoints(ran)
    for name in ("splitter", "global_scheduler", "job_controller@cluster-a", "cluster_scheduler@cluster-b"):
        _, text = fetch(urls[name])
        assert sample(text, "hyperjob_bus_messages_handled_total", outcome="ok") > 0, name
        assert "hyperjob_bus_dead_letters{" in text and "process_cpu_seconds_total" in text, name


def test_the_dashboard_exports_the_fleet(ran: Cli) -> None:
    _, text = fetch(endpoints(ran)["dashboard"])
    for cluster in ("cluster-a", "cluster-b"):
        assert sample(text, "hyperjob_cluster_nodes", cluster=cluster) == 4
        assert sample(text, "hyperjob_cluster_gpu_healthy_nodes", cluster=cluster) == 4
        assert sample(text, "hyperjob_cluster_allocatable", cluster=cluster, resource="nvidia.com/gpu") == 32
    assert 'hyperjob_queue_podgroups{phase="running",queue_name="default"} 0.0' in text  # nothing runs now


def test_get_events_and_describe_tell_the_hyperjobs_story(ran: Cli) -> None:
    table = ran.run("get", "events", f"hyperjob/{NAME}").stdout.splitlines()
    assert table[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    reasons = {(line.split()[2], line.split()[3]) for line in table[1:]}
    for reason in ("Submitted", "Admitted", "Running", "Completed"):
        assert (reason, f"hyperjob/{NAME}") in reasons, reason
    assert ("Dispatched", f"job/{NAME}-job-0") in reasons
    assert ("Scheduled", f"job/{NAME}-job-1") in reasons
    described = ran.run("describe", "hyperjob", NAME).stdout
    assert "\nEvents:\n" in described and "Admitted" in described
    assert "Submitted" in ran.run("describe", "queue", "global-ai").stdout
    listed = json.loads(ran.run("get", "events", "-o", "json").stdout)["items"]
    assert any(e["object"] == f"hyperjob/{NAME}" and e["reason"] == "Completed" for e in listed)


def test_liveness_files_record_the_endpoint(ran: Cli) -> None:
    home = Path(ran.env["HYPERJOB_HOME"])
    records = [json.loads(p.read_text()) for p in (home / "logs").glob("*.alive")]
    assert records and all(r["metrics"].startswith("http://127.0.0.1:") for r in records)


def test_a_hyperjob_its_queue_cannot_hold_waits_with_the_reason_in_events_and_metrics(ran: Cli, tmp_path: Path) -> None:
    """The example in a queue capped at 16 GPUs: the queue's capability refuses it, whatever else
    the shared system runs meanwhile."""
    capped = "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: capped-ai}\n"
    capped += "spec: {weight: 1, capability: {nvidia.com/gpu: 16}}\n---\n"
    manifest = (
        EXAMPLE.read_text().replace(f"name: {NAME}", "name: too-big").replace("queue: global-ai", "queue: capped-ai")
    )
    path = tmp_path / "too-big.yaml"
    path.write_text(capped + manifest)
    with ran.applied(path, "too-big"):
        table = ran.wait_for(
            "the waiting event",
            lambda: [r for r in ran.run("get", "events", "hyperjob/too-big").stdout.splitlines() if "QueueLimit" in r],
        )
        assert table[0].split()[1:4] == ["Warning", "QueueLimit", "hyperjob/too-big"]
        assert "queue capped-ai" in table[0]
        queue_events = ran.run("get", "events", "queue/capped-ai").stdout
        assert "QueueLimit" in queue_events and "too-big" in queue_events
        _, text = fetch(endpoints(ran)["status_aggregator"])
        assert sample(text, "hyperjob_pending_hyperjobs", reason="QueueLimit") >= 1  # the system is shared
        assert sample(text, "hyperjob_hyperjobs", phase="Pending") >= 1
