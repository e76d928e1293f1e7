"""Jaeger's stand-in in the container tests: accepts OTLP/HTTP exports on :4318 and counts them.

``POST /v1/traces`` (any body) answers 200 with an empty ExportTraceServiceResponse;
``GET /count`` answers ``{"requests": N, "bytes": B}`` for the traces received so far;
``GET /status`` answers 200 (the health check).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

received = {"requests": 0, "bytes": 0}
lock = threading.Lock()


class Sink(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        if self.path == "/v1/traces":
            with lock:
                received["requests"] += 1
                received["bytes"] += len(body)
        self._answer(200, b"", "application/x-protobuf")

    def do_GET(self) -> None:  # noqa: N802
        if self.path == "/count":
            with lock:
                self._answer(200, json.dumps(received).encode(), "application/json")
        elif self.path == "/status":
            self._answer(200, b"ok", "text/plain")
        else:
            self._answer(404, b"", "text/plain")

    def _answer(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


if __name__ == "__main__":
    ThreadingHTTPServer(("0.0.0.0", 4318), Sink).serve_forever()  # noqa: S104 - inside its container
