"""``hyperjob bench live``'s arguments and report, without starting anything."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from hyperjob.cli import bench_live as bl
from hyperjob.cli.main import main


def test_replicas_are_split_evenly_over_the_clusters_or_put_whole_on_one_round_robin() -> None:
    plan = bl.Plan(clusters=3, nodes=10, hyperjobs=4, replicas=64)
    assert plan.cluster_names() == ["cluster-a", "cluster-b", "cluster-c"]
    assert plan.shares(0) == {"cluster-a": 22, "cluster-b": 21, "cluster-c": 21}
    whole = bl.Plan(clusters=2, nodes=10, hyperjobs=4, replicas=64, split=False)
    assert [whole.shares(i) for i in range(3)] == [{"cluster-a": 64}, {"cluster-b": 64}, {"cluster-a": 64}]
    manifest = bl.hyperjob_manifest("hj", 64, plan.shares(0))
    assert manifest["spec"]["template"]["spec"]["minAvailable"] == 64
    assert sum(c["replicas"] for c in manifest["spec"]["splitPolicy"]["clusters"]) == 64


def test_a_burst_that_does_not_fit_the_fleet_is_refused_before_anything_starts() -> None:
    with pytest.raises(click.UsageError, match="do not fit 160 GPUs"):
        bl.Plan(clusters=2, nodes=10, hyperjobs=3, replicas=64).check()
    result = CliRunner().invoke(main, ["bench", "live", "--nodes", "1", "--hyperjobs", "2", "--replicas", "16"])
    assert result.exit_code == 1 and "do not fit 16 GPUs" in result.output


def test_the_report_divides_by_the_pods_that_ran_and_names_the_figures_the_issue_asks_for() -> None:
    plan = bl.Plan(clusters=2, nodes=500, hyperjobs=2, replicas=64)
    idle = (
        bl.Counters(at=0.0, cpu={"splitter": 1.0, "nats-server": 0.0}),
        bl.Counters(at=10.0, cpu={"splitter": 1.5, "nats-server": 1.0}),
    )
    run = (
        bl.Counters(
            at=0.0,
            cpu={"splitter": 2.0, "cluster_scheduler@cluster-a": 0.0, "cluster_scheduler@cluster-b": 0.0},
            nats_in=100,
            redis_calls=10,
        ),
        bl.Counters(
            at=2.0,
            cpu={"splitter": 2.128, "cluster_scheduler@cluster-a": 0.128, "cluster_scheduler@cluster-b": 0.128},
            nats_in=484,
            redis_calls=138,
        ),
    )
    observed = bl.Observed(submitted_at=100.0, running={"bench-00000": 101.0, "bench-00001": 102.0})
    figures = bl.report(plan, idle, run, observed, nodes_seen=1000, load={"run": (1.0, 1.0, 1.0)})
    assert figures["podsPerSecond"] == 64.0  # 128 pods in 2 s
    assert (figures["submitToRunningP50"], figures["submitToRunningP99"]) == (1.0, 2.0)
    assert figures["cpuMsPerPod"] == {"cluster_scheduler": 2.0, "splitter": 1.0}
    assert figures["natsMessagesInPerPod"] == 3.0 and figures["redisCommandsPerPod"] == 1.0
    assert figures["idleCpuPercent"] == 5.0  # the services only; NATS apart
    assert figures["idleCpuPercentByProcess"]["nats-server"] == 10.0
    assert (figures["nodesSeen"], figures["nodesSeenMin"], figures["nodesTotal"]) == (1000, 1000, 1000)


def test_admission_cpu_is_what_the_admitting_services_spent_until_the_last_admission_per_hyperjob() -> None:
    observed = bl.Observed(
        submitted_at=10.0,
        admitted={"bench-00000": 10.5, "bench-00001": 12.0},
        cpu_at_submit={"splitter": 1.0, "global_scheduler": 2.0, "cluster_scheduler@cluster-a": 0.0},
        cpu_at_admitted={
            "splitter": 1.004,
            "global_scheduler": 3.0,
            "cluster_scheduler@cluster-a": 1.0,
            "cluster_scheduler@cluster-b": 1.0,  # started after the submit: all it used counts
        },
    )
    assert bl.admission_cpu(observed, 2) == {
        "admissionCpuMsPerHyperJob": {"global_scheduler": 500.0, "splitter": 2.0},
        # 1 s of CPU in 2 s; the cluster-schedulers' 2 s in all: one core
        "admissionCoreShare": {"cluster_scheduler": 1.0, "global_scheduler": 0.5, "splitter": 0.0, "all": 1.5},
    }
    assert bl.admission_cpu(observed, 3) == {}  # not every HyperJob was admitted: no figure


def test_subjects_fold_into_families_without_cluster_or_object_names() -> None:
    clusters = ["cluster-a", "cluster-b"]
    assert bl.family("sched.gang.control.cluster-a", clusters) == "sched.gang.control"
    assert bl.family("jobstate.cluster-b.job-1.0", clusters) == "jobstate"
    assert bl.family("hj.result.1234", clusters) == "hj.result"
    assert bl.family("state.splitter.hyperjob.x", clusters) == "state.splitter"
    assert bl.percentile([3.0, 1.0, 2.0], 0.5) == 2.0 and bl.percentile([], 0.99) is None
