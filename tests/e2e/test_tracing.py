"""One trace per HyperJob, seen by a real OTLP/HTTP receiver: ``hyperjob up`` with
``OTEL_EXPORTER_OTLP_ENDPOINT`` pointing at a small HTTP server in the test, which decodes each
``ExportTraceServiceRequest`` (``opentelemetry-proto``). The README example (one HyperJob split
across two clusters) applied through the CLI gives one trace id, printed by ``apply``, holding
spans from the CLI and every service; ``hyperjob trace`` prints the journey with that id."""

from __future__ import annotations

import gzip
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from .conftest import REPO, running_system

pytestmark = pytest.mark.e2e

SERVICES = (
    "hyperjob-cli",
    "splitter",
    "global-scheduler",
    "cluster-scheduler",
    "job-controller",
    "node-agent",
    "status-aggregator",
)


class Receiver:
    """An OTLP/HTTP trace receiver: every span it was sent, as (service, trace id, name, attributes)."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, str, str, dict[str, Any]]] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver.add(request)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def add(self, request: ExportTraceServiceRequest) -> None:
        found = []
        for resource_spans in request.resource_spans:
            resource = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            for scope in resource_spans.scope_spans:
                for span in scope.spans:
                    attributes = {a.key: _value(a.value) for a in span.attributes}
                    found.append((resource.get("service.name", ""), span.trace_id.hex(), span.name, attributes))
        with self.lock:
            self.spans += found

    def of_trace(self, trace_id: str) -> list[tuple[str, str, str, dict[str, Any]]]:
        with self.lock:
            return [s for s in self.spans if s[1] == trace_id]


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    thread = threading.Thread(target=found.server.serve_forever, daemon=True)
    thread.start()
    yield found
    found.server.shutdown()
    found.server.server_close()


def test_one_hyperjob_across_two_clusters_is_one_trace_with_spans_from_every_service(
    tmp_path: Path, receiver: Receiver
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    manifest = tmp_path / "llm.yaml"
    manifest.write_text(
        (REPO / "examples" / "hyperjob-llm.yaml").read_text().replace("sim-duration: 10s", "sim-duration: 2s")
    )
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_BSP_SCHEDULE_DELAY": "200",
        "HYPERJOB_TRACE_POD_SAMPLE": "0.1",
    }
    with running_system(home, 2, "--no-dashboard", env=env) as cli:
        applied = cli.run("apply", "-f", str(manifest)).stderr  # stdout stays kubectl's
        [trace_id] = re.findall(r"^trace id: ([0-9a-f]{32})$", applied, re.MULTILINE)
        cli.wait_for(
            "the HyperJob to complete",
            lambda: cli.json("get", "hyperjob", "llm-train-hyperjob").get("phase") == "Completed",
            timeout=180,
        )

        def every_service() -> set[str]:
            spans = receiver.of_trace(trace_id)
            services = {s[0] for s in spans}
            binds = {s[3].get("cluster") for s in spans if s[2] == "bind gang"}
            # Both clusters' schedulers are one service name: wait for each cluster's bind too
            # (each process exports its spans in its own batches).
            complete = all(s in services for s in SERVICES) and binds >= {"cluster-a", "cluster-b"}
            return services if complete else set()

        try:
            cli.wait_for(f"spans of {', '.join(SERVICES)} in trace {trace_id}", every_service, timeout=60)
        except AssertionError as timed_out:  # say what did arrive: which services, which binds
            spans = receiver.of_trace(trace_id)
            seen = sorted({(s[0], s[2]) for s in spans})
            binds = sorted({str(s[3].get("cluster")) for s in spans if s[2] == "bind gang"})
            raise AssertionError(
                f"{timed_out}; spans of the trace by (service, name): {seen}; clusters of 'bind gang': {binds}"
            ) from None
        shown = cli.run("trace", "llm-train-hyperjob").stdout

    spans = receiver.of_trace(trace_id)
    names = {s[2] for s in spans}
    assert {"apply HyperJob", "validate", "admit", "split", "create job", "bind gang", "run pods", "status"} <= names
    bound = [s for s in spans if s[2] == "bind gang"]
    assert {s[3]["cluster"] for s in bound} == {"cluster-a", "cluster-b"}
    assert sum(s[3]["pods"] for s in bound) == 64
    assert {s[3].get("hyperjob.name") for s in spans if s[2] == "admit"} == {"llm-train-hyperjob"}
    # Per-pod spans are sampled (10 % here), lifecycle spans never are.
    pods = {s[3]["pod.name"] for s in spans if s[2] == "pod Running"}
    assert 0 < len(pods) < 64
    # The waterfall: the same trace id, every step from submission to completion.
    assert f"trace id: {trace_id}" in shown
    for step in ("Submitted", "Admitted", "Dispatched", "Scheduled", "Running", "Completed"):
        assert f" {step} " in shown, step
    # Spans, nested: each cluster's binding of its child under that child.
    for cluster in ("cluster-a", "cluster-b"):
        assert f"│  ├─ schedule on {cluster}: Dispatched → Scheduled" in shown, cluster
    # The endpoint is an OTLP receiver, no Jaeger: no link to nothing.
    assert "jaeger:   no Jaeger answers at http://127.0.0.1:16686: no link" in shown
