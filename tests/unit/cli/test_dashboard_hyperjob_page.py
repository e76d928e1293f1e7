"""A HyperJob's dashboard page: its trace as the waterfall of spans ``hyperjob trace`` draws, and
the end of its pods' logs where pods really run, or why there are none (issue 32, item 5).

The HyperJob runs through the real services under the simulator; the dashboard then reads its
log and store as it reads JetStream and Redis, and pod logs from files as the exec- and
container-mode agents write them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from hyperjob.dashboard import app
from tests.unit.cli import simulated

SCENARIO = simulated.scenario("page", "4", simulated.hyperjob("small-a", "default", duration="5s"))


@pytest.fixture(scope="module")
def system() -> simulated.Reader:
    return simulated.run(SCENARIO)


def _detail(system: simulated.Reader, pod_logs: Path | None) -> dict[str, Any]:
    found = asyncio.run(app.hyperjob_detail(system, "default", "small-a", pod_logs))  # type: ignore[arg-type]
    assert found is not None
    return found


def test_the_page_has_the_trace_as_spans_nested_under_their_parents(system: simulated.Reader) -> None:
    trace = _detail(system, None)["trace"]
    spans = trace["spans"]
    root = spans[0]
    assert (root["name"], root["depth"], root["parent"], root["offset"]) == ("hyperjob/small-a", 0, None, 0.0)
    assert root["duration"] == trace["duration"] > 0 and trace["lives"] == 1
    [job] = [s for s in spans if s["name"].startswith("job/small-a-")]
    under_job = [s["name"].split(":")[0] for s in spans if s["parent"] == spans.index(job)]
    assert job["depth"] == 1 and job["parent"] == 0
    assert "schedule on cluster-a" in under_job and "run" in under_job
    for span in spans:  # each inside its parent, on the life's scale
        parent = spans[span["parent"]] if span["parent"] is not None else root
        assert span["depth"] == (parent["depth"] + 1 if span is not root else 0)
        assert parent["offset"] <= span["offset"] <= span["offset"] + span["duration"] <= trace["duration"] + 1e-9


def test_simulated_pods_have_no_log_and_the_page_says_so(system: simulated.Reader, tmp_path: Path) -> None:
    logs = _detail(system, tmp_path)["logs"]
    assert logs["pods"] == [] and logs["without"] == 2
    assert "its pods are simulated" in logs["note"] and str(tmp_path) in logs["note"]
    unknown = _detail(system, None)["logs"]
    assert unknown["pods"] == [] and "DASHBOARD_POD_LOGS" in unknown["note"]


def test_the_page_shows_the_end_of_each_pods_log_where_pods_really_run(
    system: simulated.Reader, tmp_path: Path
) -> None:
    pods = [p["name"] for j in _detail(system, None)["jobs"] for p in j["pods"]]
    exec_pod, container_pod = sorted(pods)
    # An exec pod's log is its output as written; a container pod's is podman's k8s-file.
    (tmp_path / "cluster-a" / exec_pod).mkdir(parents=True)
    (tmp_path / "cluster-a" / exec_pod / "log").write_text("".join(f"step {i}\n" for i in range(100)))
    box = tmp_path / "cluster-a" / container_pod
    box.mkdir()
    (box / "container").write_text("hyperjob-agent-" + container_pod)
    (box / "log").write_text(
        "2026-12-07T10:00:00.1Z stdout F epoch 1 loss 0.5\n"
        "2026-12-07T10:00:00.2Z stderr P partial \n"
        "2026-12-07T10:00:00.3Z stderr F line\n"
    )
    logs = _detail(system, tmp_path)["logs"]
    shown = {p["pod"]: p for p in logs["pods"]}
    assert set(shown) == {exec_pod, container_pod} and logs["without"] == 0 and logs["note"] == ""
    assert shown[exec_pod]["cluster"] == "cluster-a"
    assert shown[exec_pod]["tail"].splitlines() == [f"step {i}" for i in range(100 - app.LOG_LINES, 100)]
    assert shown[container_pod]["tail"] == "epoch 1 loss 0.5\npartial line\n"
