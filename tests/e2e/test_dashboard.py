"""The web dashboard ``hyperjob up`` serves, in a real headless browser (Chromium from the system's
packages; the browser tests skip, saying so, where none is installed), and its live event stream.

Set ``HYPERJOB_SCREENSHOTS=DIR`` to keep the screenshots for a person to look at."""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .browser import BROWSER, Browser
from .conftest import REPO, Cli

pytestmark = pytest.mark.e2e

NAME = "dash-hj"
needs_browser = pytest.mark.skipif(
    BROWSER is None, reason="no headless browser installed (apt-get install chromium): dashboard browser tests skipped"
)


def dashboard_url(cli: Cli) -> str:
    status = json.loads((Path(cli.env["HYPERJOB_HOME"]) / "services.json").read_text())
    assert status["dashboard"].startswith("http://127.0.0.1:")
    return str(status["dashboard"])


@pytest.fixture
def browser() -> Iterator[Browser]:
    opened = Browser()
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture(scope="module")
def running_hyperjob(cli: Cli, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    manifest = tmp_path_factory.mktemp("dashboard") / "hj.yaml"
    manifest.write_text(
        (REPO / "examples" / "hyperjob-llm.yaml")
        .read_text()
        .replace("name: llm-train-hyperjob", f"name: {NAME}")
        .replace("replicas: 64", "replicas: 8")
        .replace("minAvailable: 64", "minAvailable: 8")
        .replace("replicas: 32", "replicas: 4")
        .replace("sim-duration: 10s", "sim-duration: 300s")
    )
    with cli.applied(manifest, NAME):
        cli.wait_for("the HyperJob to run", lambda: cli.json("get", "hyperjobs", NAME)["phase"] == "Running")
        yield NAME


@needs_browser
def test_a_hyperjobs_page_shows_its_children_pods_timeline_events_and_spec_live(
    cli: Cli, running_hyperjob: str, browser: Browser, tmp_path: Path
) -> None:
    browser.open(f"{dashboard_url(cli)}#/hyperjobs/default/{running_hyperjob}")
    # Drawn, and connected to the event stream (the first paint may come from /api/snapshot).
    browser.wait_for("document.querySelector('#gantt') !== null && document.getElementById('live').className === 'on'")
    dom = browser.html()
    assert f"HyperJob {NAME}" in dom
    assert 'id="live" class="on"' in dom  # the page got its data from the event stream
    for child, cluster in ((f"{NAME}-job-0", "cluster-a"), (f"{NAME}-job-1", "cluster-b")):
        # Each child links to its page, each cluster to its own.
        assert (
            f'<td><a href="#/jobs/{child}">{child}</a></td><td><a href="#/clusters/{cluster}">{cluster}</a></td>' in dom
        )
    assert browser.evaluate("document.querySelectorAll('#gantt rect.running').length") == 8  # a bar per running pod
    assert f'href="#/jobs/{NAME}-job-0?pod={NAME}-job-0-trainer-0"' in dom  # a pod links to its job's page
    assert 'href="#/nodes/cluster-a-node-' in dom  # and its node
    # The Gantt fits the page: no wider than its box, its last time label inside the drawing.
    fits = "document.getElementById('gantt').width.baseVal.value <= document.getElementById('timeline').clientWidth"
    assert browser.evaluate(fits) is True
    last_label = "(() => { const t = document.querySelector('#gantt text[text-anchor=end]').getBBox();"
    last_label += " return t.x + t.width; })()"
    assert browser.evaluate(last_label) <= browser.evaluate("document.getElementById('gantt').width.baseVal.value")
    # Its Events (those `describe` shows, its children's included) and its spec as YAML.
    objects = browser.evaluate(
        "[...document.querySelectorAll('#events tr')].slice(1).map((tr) => tr.cells[4].textContent)"
    )
    assert f"hyperjob/{NAME}" in objects and f"job/{NAME}-job-0" in objects, objects
    spec = browser.evaluate("document.getElementById('spec').textContent")
    assert "kind: HyperJob" in spec and f"name: {NAME}" in spec and "replicatedJobs:" in spec
    shot = Path(os.environ.get("HYPERJOB_SCREENSHOTS", tmp_path)) / "hyperjob-page.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    browser.screenshot(shot)
    assert shot.stat().st_size > 10_000

    # Live: suspending the HyperJob shows on the open page, which is never reloaded.
    browser.evaluate("window.notReloaded = true")
    cli.run("suspend", NAME)
    try:
        browser.wait_for("document.querySelector('h2 .phase').textContent === 'Suspended'", timeout=60)
        assert browser.evaluate("window.notReloaded") is True
        browser.screenshot(shot.with_name("hyperjob-page-suspended.png"))
    finally:
        cli.run("resume", NAME, check=False)


# Each span's bar inside its track (an instant's diamond may stand half out at an end).
BARS_INSIDE = """[...document.querySelectorAll('#trace .track')].every((track) => {
  const t = track.getBoundingClientRect(), b = track.firstElementChild.getBoundingClientRect();
  return b.left >= t.left - 6 && b.right <= t.right + 6; })"""


@needs_browser
def test_a_hyperjobs_page_draws_its_trace_as_a_waterfall_and_the_end_of_its_pods_logs(
    cli: Cli, running_hyperjob: str, browser: Browser, tmp_path: Path
) -> None:
    # The pods are simulated (no log): one is given the log an exec-mode agent would have written.
    pod = f"{NAME}-job-0-trainer-0"
    box = Path(cli.env["HYPERJOB_HOME"]) / "pods" / "cluster-a" / pod
    box.mkdir(parents=True, exist_ok=True)
    (box / "log").write_text("".join(f"step {i} loss {1 / (i + 1):.3f}\n" for i in range(200)))
    try:
        browser.open(f"{dashboard_url(cli)}#/hyperjobs/default/{running_hyperjob}")
        browser.wait_for("document.querySelector('#trace') !== null && document.querySelector('#pod-log') !== null")
        spans = browser.evaluate(
            "[...document.querySelectorAll('#trace tr[data-depth]')].map((tr) => [+tr.dataset.depth, "
            "tr.cells[0].textContent, parseFloat(getComputedStyle(tr.cells[0]).paddingLeft)])"
        )
        assert spans[0][:2] == [0, f"hyperjob/{NAME}"]
        jobs = [s for s in spans if s[1].startswith(f"job/{NAME}-job-")]
        assert len(jobs) == 2 and {s[0] for s in jobs} == {1}
        nested = [s for s in spans if s[0] == 2]
        assert any(s[1].startswith("schedule on cluster-") for s in nested)  # each child's binding, under it
        assert nested[0][2] > jobs[0][2] > spans[0][2]  # indented under its parent
        assert browser.evaluate(BARS_INSIDE) is True
        fits = "document.getElementById('trace').getBoundingClientRect().right <= document.body.clientWidth"
        assert browser.evaluate(fits) is True
        # The log's last lines, and what the page says of the pods without one.
        text = browser.evaluate("document.getElementById('pod-log').textContent").splitlines()
        assert text[-1] == "step 199 loss 0.005" and len(text) < 200
        assert browser.evaluate("document.getElementById('log-pod').value") == pod
        assert "7 of 8 pods have no log" in browser.evaluate("document.getElementById('logs-note').textContent")
        shot = Path(os.environ.get("HYPERJOB_SCREENSHOTS", tmp_path)) / "hyperjob-page-trace-logs.png"
        shot.parent.mkdir(parents=True, exist_ok=True)
        browser.screenshot(shot)
    finally:
        (box / "log").unlink()
        box.rmdir()


@needs_browser
def test_the_list_pages_show_hyperjobs_queues_clusters_and_nodes(
    cli: Cli, running_hyperjob: str, browser: Browser
) -> None:
    base = dashboard_url(cli)
    browser.open(base)
    browser.wait_for(f"document.querySelector('a[href=\"#/hyperjobs/default/{NAME}\"]') !== null")
    browser.open(f"{base}#/queues")
    assert '<td><a href="#/queues/global-ai">global-ai</a></td>' in browser.wait_for(
        "document.body.dataset.rendered === '/queues' && document.body.innerHTML"
    )
    browser.open(f"{base}#/clusters")
    clusters = browser.wait_for("document.body.dataset.rendered === '/clusters' && document.body.innerHTML")
    assert '<td><a href="#/clusters/cluster-a">cluster-a</a></td>' in clusters
    assert '<td><a href="#/nodes/cluster-b-node-3">cluster-b-node-3</a></td>' in clusters
    # A child Job's page: its pods, each on a node that links to its own page, and its HyperJob.
    browser.open(f"{base}#/jobs/{NAME}-job-1")
    job = browser.wait_for(f"document.body.dataset.rendered === '/jobs/{NAME}-job-1' && document.body.innerHTML")
    assert f'<a href="#/hyperjobs/default/{NAME}">{NAME}</a>' in job and f'id="pod-{NAME}-job-1-trainer-0"' in job
    browser.open(f"{base}#/nodes/cluster-b-node-0")
    node = browser.wait_for("document.body.dataset.rendered === '/nodes/cluster-b-node-0' && document.body.innerHTML")
    assert "Node cluster-b-node-0" in node and "cluster-b-node-1" not in node


def test_the_event_stream_sends_a_new_snapshot_when_something_changes(cli: Cli, tmp_path: Path) -> None:
    def snapshots() -> Iterator[dict[str, Any]]:
        for line in stream:
            if line.startswith(b"data: "):
                yield json.loads(line[6:])

    with urllib.request.urlopen(f"{dashboard_url(cli)}api/events", timeout=60) as stream:
        received = snapshots()
        assert "dash-q" not in {q["name"] for q in next(received)["queues"]}
        (tmp_path / "q.yaml").write_text(
            "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: dash-q}\nspec: {weight: 1}\n"
        )
        cli.run("apply", "-f", str(tmp_path / "q.yaml"))
        try:
            # The next snapshots come unasked, as things change; one of the first has the queue.
            for _, snapshot in zip(range(20), received, strict=False):
                if "dash-q" in {q["name"] for q in snapshot["queues"]}:
                    break
            else:
                raise AssertionError("no snapshot with the new queue")
        finally:
            cli.run("delete", "queue", "dash-q", check=False)
