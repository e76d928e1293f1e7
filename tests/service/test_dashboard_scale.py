"""The dashboard with 1,000 HyperJobs, in headless Chromium: the list draws one page of rows, and
filtering by namespace and phase shows exactly the matching HyperJobs.

The dashboard is served (uvicorn, in the test's event loop) over real NATS and Redis holding what
the splitter and the status-aggregator would have written for 1,000 HyperJobs. First paint (from
navigation to the first rows drawn) and filter latency are printed as figures, not asserted.
Set ``HYPERJOB_SCREENSHOTS=DIR`` to keep the screenshot."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import uvicorn

from hyperjob import api, events, records
from hyperjob.client import Client
from hyperjob.dashboard.app import build_app
from tests.e2e.browser import BROWSER, Browser

pytestmark = [
    pytest.mark.service,
    pytest.mark.skipif(BROWSER is None, reason="no headless browser installed (apt-get install chromium)"),
]

COUNT = 1000
NAMESPACES = ("default", "team-a", "team-b", "team-c")
PHASES = ("Running", "Pending", "Completed", "Failed", "Aborted")
QUEUES = ("default", "research", "prod")
CLUSTERS = ("cluster-a", "cluster-b")


def hyperjob(i: int) -> tuple[records.HyperJobDoc, records.HyperJobStatusDoc, str]:
    """The i-th HyperJob (namespace, phase, queue, cluster and label all vary with i) and its phase."""
    namespace, phase = NAMESPACES[i % 4], PHASES[i % 5]
    name, queue, cluster = f"hj-{i:04d}", QUEUES[i % 3], CLUSTERS[i % 2]
    manifest = {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "HyperJob",
        "metadata": {"name": name, "namespace": namespace, "labels": {"tier": "gold" if i % 7 == 0 else "bronze"}},
        "spec": {"replicatedJobs": [{"name": "job", "replicas": 1, "templateSpec": {"queue": queue}}]},
    }
    key = api.object_key(namespace, name)
    child = events.ChildRef(name=f"{name}-job-0", cluster=cluster, replicas=4)
    doc = records.HyperJobDoc(
        name=key, manifest=manifest, created=time.time() - 60 * (COUNT - i), admitted=True, children=[child]
    )
    status = records.HyperJobStatusDoc(name=key, phase=phase, status={"placement": {cluster: 4}})
    return doc, status, phase


@contextlib.asynccontextmanager
async def served(client: Client) -> AsyncIterator[str]:
    """The dashboard over ``client``, on a free loopback port, for the block's life."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(build_app(lambda: contextlib.nullcontext(client)), log_level="warning"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        while not server.started:
            await asyncio.sleep(0.05)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/"
    finally:
        server.should_exit = True
        await task
        sock.close()


# Sets one filter as a person does (the select's value, then its change event) and keeps, in the
# page, how long until the rows were drawn and the browser painted the next frame.
FILTER = """(() => {{
  const select = document.querySelector('#filters select[name="{name}"]');
  const start = performance.now();
  select.value = {value!r};
  select.dispatchEvent(new Event('change', {{bubbles: true}}));
  requestAnimationFrame(() => setTimeout(() => {{ window.filterMs = performance.now() - start; }}));
}})()"""

ROWS = """[...document.querySelectorAll('#hyperjobs tr')].slice(1).map((tr) =>
  [...tr.querySelectorAll('td')].slice(0, 3).map((td) => td.textContent))"""

TYPE_LABELS = """(() => { const input = document.querySelector('#filters input[name="label"]');
  input.value = 'tier=gold'; input.dispatchEvent(new Event('input', {bubbles: true})); })()"""

# How long /api/snapshot took (the first paint waits for it) and how large it was.
SNAPSHOT_FETCH = """performance.getEntriesByType('resource').filter((e) => e.name.endsWith('/api/snapshot'))
  .map((e) => [e.duration, e.encodedBodySize])[0]"""


async def test_a_thousand_hyperjobs_filtered_by_namespace_and_phase(bus, store, tmp_path: Path) -> None:
    expected = []
    for i in range(COUNT):
        doc, status, phase = hyperjob(i)
        await store.put_if_version(records.HYPERJOB, doc.name, doc, None)
        await store.put_if_version(records.HYPERJOB_STATUS, status.name, status, None)
        if (doc.manifest["metadata"]["namespace"], phase) == ("team-b", "Running"):
            expected.append(doc.manifest["metadata"]["name"])
    gold = [name for name in expected if int(name.removeprefix("hj-")) % 7 == 0]

    async with served(Client(bus, store)) as url:
        browser = await asyncio.to_thread(Browser)
        try:
            await asyncio.to_thread(browser.open, url)
            first_rows = float(await asyncio.to_thread(browser.wait_for, "document.body.dataset.firstRows", 60))
            assert await asyncio.to_thread(
                browser.evaluate, "document.getElementById('results').dataset.matches"
            ) == str(COUNT)
            assert len(await asyncio.to_thread(browser.evaluate, ROWS)) == 50  # one page drawn, not 1,000 rows
            await asyncio.to_thread(browser.evaluate, "document.querySelector('button[data-page=\"2\"]').click()")
            second_page = await asyncio.to_thread(browser.evaluate, ROWS)
            assert [r[0] for r in second_page] == [f"hj-{i:04d}" for i in range(50, 100)]

            latencies = []
            for name, value in (("ns", "team-b"), ("phase", "Running")):
                await asyncio.to_thread(browser.evaluate, FILTER.format(name=name, value=value))
                latencies.append(await asyncio.to_thread(browser.wait_for, "window.filterMs"))
                await asyncio.to_thread(browser.evaluate, "delete window.filterMs")

            rows = await asyncio.to_thread(browser.evaluate, ROWS)
            assert [r[0] for r in rows] == sorted(expected)  # 50 of 1,000: every match fits one page
            assert {(r[1], r[2]) for r in rows} == {("team-b", "Running")}
            assert await asyncio.to_thread(browser.evaluate, "location.hash") == "#/?ns=team-b&phase=Running"
            shot = Path(os.environ.get("HYPERJOB_SCREENSHOTS", tmp_path)) / "hyperjobs-1000-filtered.png"
            shot.parent.mkdir(parents=True, exist_ok=True)
            await asyncio.to_thread(browser.screenshot, shot)
            # Sorted by name, descending, with a click on its column's head.
            await asyncio.to_thread(browser.evaluate, "document.querySelector('th[data-sort=name]').click()")
            rows = await asyncio.to_thread(browser.evaluate, ROWS)
            assert [r[0] for r in rows] == sorted(expected, reverse=True)
            # And by a label selector, typed as `get -l` takes it.
            await asyncio.to_thread(browser.evaluate, TYPE_LABELS)
            rows = await asyncio.to_thread(browser.evaluate, ROWS)
            assert [r[0] for r in rows] == sorted(gold, reverse=True) and gold
            snapshot_fetch = await asyncio.to_thread(browser.evaluate, SNAPSHOT_FETCH)
        finally:
            await asyncio.to_thread(browser.close)
    namespace_ms, phase_ms = latencies
    fetch_ms, size = snapshot_fetch
    print(
        f"\nfigures: first rows {first_rows:.0f} ms after navigation; filter: {namespace_ms:.1f} ms, {phase_ms:.1f} ms"
    )
    print(f"figures: /api/snapshot {fetch_ms:.0f} ms, {size / 1024:.0f} KiB")
