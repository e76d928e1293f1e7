"""Replicas taking turns on one instance (docs/scale-out.md): the holder of the instance's lease in
the store consumes and runs rounds; the others wait as standbys and take over when it stops or its
lease lapses. Correctness never depends on the lease (the epoch fences every commit); progress
does: two replicas that both ran would keep refusing each other's commits."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from hyperjob.store import Store, StoreError

# A holder renews this many times per TTL: a renewal or two may fail (a slow store, a busy loop)
# before a standby may take over.
LEASE_RENEWALS = 4


class Lease:
    """One replica's hold on an instance's lease (``ttl`` seconds, renewed while held)."""

    def __init__(self, store: Store, instance: str, ttl: float, log: Any) -> None:
        self.store = store
        self.instance = instance
        self.ttl = ttl
        self.log = log  # the service's logger
        self.holder = uuid.uuid4().hex  # this replica's token in the lease

    async def take(self) -> bool:
        """Take or renew the lease; False when another replica holds it."""
        return await self.store.take_lease(self.instance, self.holder, self.ttl)

    async def keep(
        self, running: Callable[[], bool], taken: Callable[[], None], lost: Callable[[], Awaitable[None]]
    ) -> None:
        """For ever: renew the lease while holding it, take it when free. ``taken`` is told when
        this replica gets it and is not ``running``; ``lost`` when another got it while it was."""
        while True:
            await asyncio.sleep(self.ttl / LEASE_RENEWALS)
            try:
                held = await self.take()
            except Exception as exc:  # noqa: BLE001 - the store is away: nobody commits meanwhile; again
                self.log.debug("lease_unknown", instance=self.instance, error=str(exc))
                continue
            if held and not running():
                self.log.warning("lease_taken", instance=self.instance, holder=self.holder)
                taken()
            elif not held and running():
                self.log.warning("lease_lost", instance=self.instance, holder=self.holder)
                await lost()

    async def release(self) -> None:
        with contextlib.suppress(StoreError):  # unreleased, it lapses after its TTL
            await self.store.release_lease(self.instance, self.holder)
