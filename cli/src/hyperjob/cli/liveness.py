"""Liveness of the services ``hyperjob up`` runs, judged on what JetStream says of their durable
consumers: a service that keeps work waiting on one of them and acknowledges nothing for a while
has stopped making progress (stuck in a handler, deadlocked, stopped), whatever its process says.

No process heartbeat is needed: the consumers' ack floors are the services' own record of their
progress. Judged only on observations: a round in which NATS or Redis did not answer starts every
clock again, so an outage of a dependency is no service's fault.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from hyperjob.bus.natsbus import NatsBus
from hyperjob.events import access


@dataclass(frozen=True)
class ConsumerProgress:
    """One durable consumer as JetStream reports it: how far its owner has acknowledged, and how
    much is waiting for it."""

    stream: str
    durable: str
    acked: int  # the ack floor's stream sequence
    waiting: int  # not yet delivered + delivered and not acknowledged


async def consumer_progress(bus: NatsBus) -> list[ConsumerProgress]:
    js = bus._js  # noqa: SLF001 - the bus lists no consumers; this is the operator's view of them all
    out = []
    for info in await js.streams_info():
        stream = info.config.name
        if stream is None:  # the server names every stream it lists; nats-py's type allows None
            continue
        for consumer in await js.consumers_info(stream):
            if consumer.config.durable_name:
                out.append(
                    ConsumerProgress(
                        stream=stream,
                        durable=consumer.name,
                        acked=consumer.ack_floor.stream_seq if consumer.ack_floor else 0,
                        waiting=(consumer.num_pending or 0) + (consumer.num_ack_pending or 0),
                    )
                )
    return out


@dataclass
class Progress:
    """Liveness judged on data: a service is stalled when one of its durable consumers has had work
    waiting and acknowledged nothing for ``timeout`` seconds of observations. No observation (a
    server not answering) starts the clocks again, so an outage of NATS or Redis stalls nobody."""

    timeout: float
    owners: dict[str, str]  # durable -> the instance it belongs to
    since: dict[tuple[str, str], tuple[int, float]] = field(default_factory=dict)  # -> (ack floor, since)
    now: Callable[[], float] = time.monotonic

    def observe(self, consumers: list[ConsumerProgress] | None) -> None:
        if consumers is None:
            self.since.clear()
            return
        now, seen = self.now(), {}
        for c in consumers:
            if c.waiting == 0:
                continue
            key = (c.stream, c.durable)
            previous = self.since.get(key)
            seen[key] = previous if previous is not None and previous[0] == c.acked else (c.acked, now)
        self.since = seen

    def stalled(self) -> dict[str, set[str]]:
        """Instance -> its stalled durables."""
        out: dict[str, set[str]] = {}
        now = self.now()
        for (_, durable), (_, since) in self.since.items():
            owner = self.owners.get(durable)
            if owner is not None and now - since >= self.timeout:
                out.setdefault(owner, set()).add(durable)
        return out

    def forget(self, durables: set[str]) -> None:
        self.since = {key: value for key, value in self.since.items() if key[1] not in durables}


def owners(instances: Iterable[str]) -> dict[str, str]:
    """Durable consumer -> the service instance it belongs to (``events.access``'s names)."""
    out = {}
    for instance in instances:
        role = next((r for r in access.SERVICE_ROLES if instance.startswith(r)), None)
        if role is None:
            continue
        cluster = instance[len(role) + 1 :]
        for durable in access.durables_of(role, cluster=cluster, instance=instance):
            out[durable] = instance
    return out
