"""``python -m hyperjob.dashboard``: serve the dashboard.

Settings (environment): ``NATS_URL``, ``REDIS_URL`` (required), ``DASHBOARD_HOST`` (default
127.0.0.1: the dashboard has no authentication, so it listens on loopback unless told otherwise,
e.g. ``0.0.0.0`` inside a container), ``DASHBOARD_PORT`` (default 8765), ``DASHBOARD_POD_LOGS``
(the work directory of this machine's exec- and container-mode node-agents, whose pod logs a
HyperJob's page shows; ``hyperjob up`` sets it to its own; unset, the page says logs are not shown).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import uvicorn

from .app import create_app


def main() -> None:
    nats_url, redis_url = os.environ.get("NATS_URL"), os.environ.get("REDIS_URL")
    if not nats_url or not redis_url:
        sys.exit("dashboard: set NATS_URL and REDIS_URL")
    host = os.environ.get("DASHBOARD_HOST", "127.0.0.1")
    port = int(os.environ.get("DASHBOARD_PORT", "8765"))
    pod_logs = os.environ.get("DASHBOARD_POD_LOGS")
    app = create_app(nats_url, redis_url, Path(pod_logs) if pod_logs else None)
    uvicorn.run(app, host=host, port=port, log_level="warning")


if __name__ == "__main__":
    main()
