"""Committed outputs on their way to the bus (the transactional outbox, ADR 0004).

A commit records its outputs in the store's outbox under a key; once they are published the key
is confirmed by the next commit (``take_published``), which forgets them in the store.

Invariants, enforced here: outputs go out in commit order (a later unit's never before an earlier
one's: a latest-value subject would go back to an old value), so a unit commits nothing while an
earlier one's outputs are still held (``behind``); a key counts as published only once its outputs
went out, and a key whose confirming commit was refused is confirmed again by the next one
(``give_back``)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from hyperjob.bus import Bus
from hyperjob.store import Output


class Outbox:
    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self._unpublished: list[tuple[str, list[Output]]] = []  # committed, not out yet, in order
        self._published: list[str] = []  # out, not yet confirmed to the store

    @property
    def behind(self) -> bool:
        """Whether an earlier commit's outputs are still to go out."""
        return bool(self._unpublished)

    async def publish(self, okey: str, outputs: list[Output]) -> None:
        """Publish one commit's outputs; on failure they are held (and stay in the store's
        outbox) until ``flush`` sends them."""
        if not outputs:
            return
        try:
            await self.bus.publish_many(outputs)
        except Exception:
            self._unpublished.append((okey, outputs))
            raise
        self._published.append(okey)

    async def flush(self) -> None:
        """Publish what earlier commits could not, in commit order (callers hold the runtime's
        lock); raises while the bus still refuses."""
        while self._unpublished:
            okey, outputs = self._unpublished[0]
            await self.bus.publish_many(outputs)
            self._unpublished.pop(0)
            self._published.append(okey)

    async def resend(self, pending: Sequence[tuple[str, list[Output]]]) -> None:
        """Outputs an earlier life of the instance committed and may never have sent (the store's
        outbox, in commit order): sent now; from the first the bus refuses on, held in order for
        ``flush`` (the outbox round), so none goes out before an earlier one."""
        self._unpublished.extend(pending)
        with contextlib.suppress(Exception):  # held: retried by the outbox round
            await self.flush()

    def take_published(self) -> list[str]:
        """The keys published since the last commit, for the next commit to confirm."""
        published, self._published = self._published, []
        return published

    def give_back(self, published: list[str]) -> None:
        """The commit that carried ``published`` did not happen: the next one confirms them."""
        self._published = published + self._published
