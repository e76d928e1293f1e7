"""Why a HyperJob waits, in ``get``, ``describe`` (its Events) and the status-aggregator's
``hyperjob_pending_hyperjobs{reason}``: a gang no cluster could ever hold (inadmissible at once),
a cross-cluster gang member its cluster cannot hold, and a node fault under a running HyperJob.
(Queue capability: ``test_metrics``.) A HyperJob that runs again shows no stale reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import REPO, Cli
from .test_metrics import endpoints, fetch, sample

pytestmark = pytest.mark.e2e

EXAMPLE = (REPO / "examples" / "hyperjob-llm.yaml").read_text()


def variant(path: Path, name: str, split: dict[str, int], duration: str = "600s") -> Path:
    """The README's HyperJob as ``name``, ``split`` replicas per cluster, pods lasting ``duration``."""
    replicas = sum(split.values())
    clusters = "\n".join(f"    - {{name: {c}, replicas: {n}}}" for c, n in split.items())
    text = (
        EXAMPLE.replace("name: llm-train-hyperjob", f"name: {name}")
        .replace("sim-duration: 10s", f"sim-duration: {duration}")
        .replace("replicas: 64", f"replicas: {replicas}")
        .replace("minAvailable: 64", f"minAvailable: {replicas}")
        .replace("    - {name: cluster-a, replicas: 32}\n    - {name: cluster-b, replicas: 32}", clusters)
    )
    path.write_text(text)
    return path


def waiting(cli: Cli, name: str) -> str:
    return cli.json("get", "hyperjobs", name)["waitingReason"]


def warnings(cli: Cli, name: str, reason: str) -> list[str]:
    """The Warning events of ``hyperjob/name`` (its children's included) with this reason."""
    table = cli.run("get", "events", f"hyperjob/{name}").stdout.splitlines()[1:]
    return [row for row in table if row.split()[1:3] == ["Warning", reason]]


def pending_by_reason(cli: Cli, reason: str) -> float:
    _, text = fetch(endpoints(cli)["status_aggregator"])
    return sample(text, "hyperjob_pending_hyperjobs", reason=reason)


def test_a_gang_no_cluster_could_ever_hold_is_inadmissible_at_once(cli: Cli, tmp_path: Path) -> None:
    """40 GPUs pinned to cluster-a, which has 32 in all: no waiting for room that never comes."""
    with cli.applied(variant(tmp_path / "wide.yaml", "too-wide", {"cluster-a": 40}, "10s"), "too-wide"):
        reason = cli.wait_for("the inadmissible reason", lambda: waiting(cli, "too-wide"))
        assert reason.startswith("inadmissible: "), reason  # said at once, naming the child and the shortfall
        assert "cluster cluster-a can never hold it: nvidia.com/gpu: needs 40, allocatable 32" in reason
        assert cli.json("get", "hyperjobs", "too-wide")["phase"] in ("Pending", "Admitted")
        row = next(r for r in cli.run("get", "hyperjobs").stdout.splitlines() if r.startswith("too-wide "))
        assert "inadmissible" in row
        events = cli.wait_for("the Inadmissible event", lambda: warnings(cli, "too-wide", "Inadmissible"))
        assert "allocatable 32" in events[0]
        assert "Inadmissible" in cli.run("describe", "hyperjob", "too-wide").stdout
        assert all(j["hyperJob"] != "too-wide" for j in cli.json("get", "jobs"))  # nothing dispatched
        assert pending_by_reason(cli, "Inadmissible") >= 1


def test_a_gang_member_its_cluster_cannot_hold_names_the_member_and_the_cluster(cli: Cli, tmp_path: Path) -> None:
    """cluster-b full: the gang's member there cannot be held, and the HyperJob says which member
    and where, until cluster-b has room again; then it runs with no reason left over."""
    filler = variant(tmp_path / "filler.yaml", "filler", {"cluster-b": 32})
    gang = variant(tmp_path / "gang.yaml", "gang", {"cluster-a": 8, "cluster-b": 8})
    with cli.applied(filler, "filler"):
        cli.wait_for("cluster-b to be full", lambda: cli.json("get", "hyperjobs", "filler")["phase"] == "Running")
        with cli.applied(gang, "gang"):
            reason = cli.wait_for("the waiting reason", lambda: waiting(cli, "gang"))
            assert "child gang-job-1: cluster cluster-b lacks nvidia.com/gpu: needs 8, free 0" in reason
            assert cli.json("get", "hyperjobs", "gang")["phase"] in ("Pending", "Admitted")
            row = next(r for r in cli.run("get", "hyperjobs").stdout.splitlines() if r.startswith("gang "))
            assert "gang-job-1: cluster cluster-b lacks" in row
            assert any("gang-job-1" in e for e in warnings(cli, "gang", "Unschedulable"))
            assert "gang-job-1: cluster cluster-b lacks" in cli.run("describe", "hyperjob", "gang").stdout
            assert pending_by_reason(cli, "Unschedulable") >= 1
            cli.run("delete", "hyperjob", "filler", "--timeout", "120")  # cluster-b has room again
            cli.wait_for("the gang to run", lambda: cli.json("get", "hyperjobs", "gang")["phase"] == "Running")
            assert waiting(cli, "gang") == ""
            row = next(r for r in cli.run("get", "hyperjobs").stdout.splitlines() if r.startswith("gang "))
            assert "lacks" not in row


def test_a_node_fault_under_a_running_hyperjob_is_its_waiting_reason(cli: Cli, tmp_path: Path) -> None:
    """cluster-a's 32 GPUs all busy with the HyperJob; one node falls silent: its 8 pods have
    nowhere to go, and the HyperJob, back to Admitted, says which node took them, until it is back."""
    node = sorted(n["name"] for n in cli.json("get", "nodes") if n["cluster"] == "cluster-a")[0]
    with cli.applied(variant(tmp_path / "fault.yaml", "faulted", {"cluster-a": 32}), "faulted"):
        cli.wait_for("the HyperJob to run", lambda: cli.json("get", "hyperjobs", "faulted")["phase"] == "Running")
        assert waiting(cli, "faulted") == ""
        cli.run("agent", "--cluster", "cluster-a", "fault", f"silent@{node}")
        try:
            fault = f"8 pods evicted from NotReady node(s) {node}"
            reason = cli.wait_for(
                "the node fault as the reason", lambda: fault in waiting(cli, "faulted") and waiting(cli, "faulted")
            )
            assert reason.startswith(
                f"child faulted-job-0 on cluster cluster-a: {fault}; 8/32 tasks in gang unschedulable"
            )
            assert cli.json("get", "hyperjobs", "faulted")["phase"] == "Admitted"
            [child] = [j for j in cli.json("get", "jobs") if j["hyperJob"] == "faulted"]
            assert fault in child["waitingReason"]  # the child's own reason: its podgroup's message
            assert fault in next(
                r for r in cli.run("get", "jobs").stdout.splitlines() if r.startswith("faulted-job-0 ")
            )
            assert any(fault in e for e in warnings(cli, "faulted", "NodeFault"))
            assert "NodeFault" in cli.run("describe", "job", "faulted-job-0").stdout
            assert "NodeFault" in cli.run("describe", "hyperjob", "faulted").stdout
            assert pending_by_reason(cli, "NodeFault") >= 1
            _, volcano = fetch(endpoints(cli)["cluster_scheduler@cluster-a"])
            assert sample(volcano, "hyperjob_unschedulable_tasks", job_id="default/faulted-job-0") == 8
            assert sample(volcano, "hyperjob_unschedulable_jobs") >= 1
        finally:
            cli.run("agent", "--cluster", "cluster-a", "fault", f"clear@{node}")
        cli.wait_for("the HyperJob to run again", lambda: cli.json("get", "hyperjobs", "faulted")["phase"] == "Running")
        assert waiting(cli, "faulted") == ""
        _, volcano = fetch(endpoints(cli)["cluster_scheduler@cluster-a"])
        assert sample(volcano, "volcano_schedule_attempts_total", result="scheduled") >= 40  # 32, then 8 again
        assert sample(volcano, "hyperjob_e2e_job_scheduling_latency_seconds_count") >= 1
        assert sample(volcano, "hyperjob_e2e_scheduling_latency_seconds_count") >= 1
