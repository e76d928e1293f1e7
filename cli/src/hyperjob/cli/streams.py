"""Declaring the streams: the operator's step before any service starts (ADR 0006: services may
only read the streams). ``hyperjob up`` calls ``declare_streams``; compose runs this module once,
as the operator, before the services (``python -m hyperjob.cli.streams``, settings ``NATS_URL``
and ``NATS_STREAM_REPLICAS``)."""

from __future__ import annotations

import asyncio
import os
import sys

from hyperjob.bus.natsbus import NatsBus
from hyperjob.events.access import without_credentials
from hyperjob.events.subjects import STREAMS


def stream_replicas() -> int | None:
    """``NATS_STREAM_REPLICAS``: copies of every stream on a NATS cluster (unset: as declared)."""
    return int(os.environ.get("NATS_STREAM_REPLICAS", "0")) or None


async def declare_streams(operator_url: str, replicas: int | None = None) -> None:
    """Create, or update to this version's configuration, every stream (with ``replicas`` copies)."""
    bus = await NatsBus.connect(operator_url, STREAMS, name="hyperjob-streams", replicas=replicas)
    await bus.close()


def main() -> None:
    url = os.environ.get("NATS_URL")
    if not url:
        sys.exit("streams: set NATS_URL (the operator's)")
    asyncio.run(declare_streams(url, stream_replicas()))
    print(f"streams declared on {without_credentials(url)} ({stream_replicas() or 'declared'} replicas)")


if __name__ == "__main__":
    main()
