"""The CLI's connection to the running system: the typed client (``hyperjob.client``) at the
endpoints ``hyperjob up`` recorded (or ``NATS_URL``/``REDIS_URL``)."""

from __future__ import annotations

from hyperjob.client import Client, ClientError, plain

from .config import Endpoints, resolve_endpoints


async def connect(endpoints: Endpoints | None = None) -> Client:
    endpoints = endpoints or resolve_endpoints()
    return await Client.connect(endpoints.nats_url, endpoints.redis_url, producer="hyperjob-cli")


__all__ = ["Client", "ClientError", "connect", "plain"]
