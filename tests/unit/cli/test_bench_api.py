"""``hyperjob bench api``'s HyperJobs and report, without starting anything."""

from __future__ import annotations

from typing import Any

from click.testing import CliRunner

from hyperjob import api
from hyperjob.api import parse_quantity
from hyperjob.cli import bench_api as ba
from hyperjob.cli.main import main

PLAN = ba.Plan(hyperjobs=3, watchers=2, lists=4, applies=2, concurrency=8)


def figures(**changes: Any) -> dict[str, Any]:
    lists = (ba.Listed([0.4, 0.1, 0.2, 0.3], 3, 900), ba.Listed([0.2, 0.1, 0.1, 0.1], 3, 400))
    watched = ba.Watched(opened=2, open_seconds=0.25, seen=[1.5, 1.0], accepted_after=0.05)
    applied = (ba.Applied(2, 0, 0.5), ba.Applied(2, 0, 0.25))
    return ba.report(PLAN, (3, 0.1), lists, watched, applied) | changes


def test_the_bench_hyperjob_is_a_valid_manifest_its_queue_can_never_admit() -> None:
    manifest = ba.hyperjob_manifest("bench-00001")
    api.decode(manifest)
    api.decode(ba.queue_manifest())
    [job] = manifest["spec"]["replicatedJobs"]
    assert job["templateSpec"]["queue"] == ba.QUEUE
    asked = parse_quantity(
        job["templateSpec"]["tasks"][0]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"]
    )
    assert asked > parse_quantity(ba.queue_manifest()["spec"]["capability"]["cpu"])  # waits: starts no pod


def test_the_report_gives_percentiles_rates_and_the_counts_of_every_stage() -> None:
    report = figures()
    assert report["list"] == {"items": 3, "bytes": 900, "p50": 0.2, "p95": 0.4, "p99": 0.4}
    assert report["listTable"]["rows"] == 3 and report["listTable"]["p50"] == 0.1
    assert report["watch"] == {
        "watchers": 2, "opened": 2, "openSeconds": 0.25, "saw": 2,
        "p50": 1.0, "p99": 1.5, "max": 1.5, "acceptedAfter": 0.05,
    }  # fmt: skip
    assert report["applyApi"]["perSecond"] == 4.0 and report["applyNats"]["perSecond"] == 8.0
    assert report["seedPerSecond"] == 30.0 and ba.complete(PLAN, report)


def test_a_count_that_falls_short_makes_the_run_incomplete() -> None:
    short = figures()
    short["watch"] = short["watch"] | {"saw": 1}
    assert not ba.complete(PLAN, short)
    failed = ba.Applied(1, 1, 0.5, first_error="422: invalid")
    assert failed.figures()["firstError"] == "422: invalid"
    assert not ba.complete(PLAN, figures(applyApi=failed.figures()))
    assert not ba.complete(PLAN, figures(seeded=2))


def test_nothing_measured_reports_no_percentile_and_no_rate() -> None:
    assert ba.latencies([], 0.5, 0.99) == {"p50": None, "p99": None}
    assert ba.rate(0, 1.0) is None and ba.rate(5, 0.0) is None


def test_the_bench_is_listed_with_its_sizes() -> None:
    result = CliRunner().invoke(main, ["bench", "api", "--help"])
    assert result.exit_code == 0
    assert "--hyperjobs" in result.output and "10000" in result.output and "--watchers" in result.output
