"""The CLI's connection to the running system: the typed client (``hyperjob.client``) at the
endpoints ``hyperjob up`` recorded (or ``NATS_URL``/``REDIS_URL``)."""

from __future__ import annotations

from hyperjob.client import Client, ClientError, plain
from hyperjob.events.access import without_credentials

from .config import Endpoints, resolve_endpoints


async def connect(endpoints: Endpoints | None = None) -> Client:
    endpoints = endpoints or resolve_endpoints()
    try:
        return await Client.connect(endpoints.nats_url, endpoints.redis_url, producer="hyperjob-cli")
    except ClientError as exc:  # its message names the URLs: never with their passwords
        message = str(exc)
        for url in (endpoints.nats_url, endpoints.redis_url):
            message = message.replace(url, without_credentials(url))
        raise ClientError(message) from None


__all__ = ["Client", "ClientError", "connect", "plain"]
