"""``python -m hyperjob.services.apiserver``: serve the Kubernetes API until SIGTERM or SIGINT."""

from __future__ import annotations

import sys
from importlib.metadata import version
from pathlib import Path

import uvicorn

from hyperjob import telemetry
from hyperjob.client import Client
from hyperjob.servicekit.config import SettingsError, load_settings

from .app import create_app
from .config import Settings
from .identity import Tokens


def main() -> None:
    try:
        settings = load_settings(Settings, "APISERVER")
    except SettingsError as exc:
        sys.exit(f"apiserver: invalid configuration: {exc}")
    telemetry.setup("apiserver", settings.log_level)

    async def connect() -> Client:
        return await Client.connect(settings.nats_url, settings.redis_url, producer="apiserver")

    pod_logs = Path(settings.pod_logs) if settings.pod_logs else None
    app = create_app(connect, Tokens(Path(settings.credentials)), version("hyperjob-apiserver"), pod_logs)
    tls = {"ssl_certfile": settings.tls_cert, "ssl_keyfile": settings.tls_key} if settings.tls_cert else {}
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="warning", **tls)  # type: ignore[arg-type]


main()
