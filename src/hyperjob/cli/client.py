"""Talking to a running system: requests over NATS (answered on ``hj.result.<id>``), reads from the store."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import msgspec

from hyperjob import events
from hyperjob.bus.natsbus import NatsBus
from hyperjob.events import subjects
from hyperjob.events.subjects import STREAMS
from hyperjob.store.redis_store import RedisStore

from .config import Endpoints

ANSWERS = events.decoder(events.RequestAccepted, events.RequestRejected)


class Client:
    def __init__(self, bus: NatsBus, store: RedisStore) -> None:
        self.bus = bus
        self.store = store

    @classmethod
    async def connect(cls, endpoints: Endpoints) -> Client:
        bus = await NatsBus.connect(endpoints.nats_url, STREAMS, name="hyperjob-cli")
        return cls(bus, await RedisStore.connect(endpoints.redis_url))

    async def close(self) -> None:
        await self.bus.close()
        await self.store.close()

    async def request(
        self, subject: str, message: events.Message, timeout: float = 30.0
    ) -> events.RequestAccepted | events.RequestRejected:
        """Send a command and wait for its answer (the splitter publishes it into the stream, so an
        answer that arrives before we look is not missed)."""
        await self.bus.publish(subject, events.encode(message), msg_id=message.event_id)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            answer = await self.bus.last(subjects.result(message.event_id))
            if answer is not None:
                return ANSWERS.decode(answer.data)  # type: ignore[no-any-return]
            await asyncio.sleep(0.05)
        raise TimeoutError(f"no answer within {timeout:g}s: is the system running (hyperjob up)?")

    async def apply(self, manifest: dict[str, Any]) -> events.RequestAccepted | events.RequestRejected:
        return await self.request(
            subjects.APPLY,
            events.ApplyManifest(
                event_id=events.new_request_id(), occurred_at=time.time(), producer="hyperjob-cli", manifest=manifest
            ),
        )

    async def delete(self, kind: str, name: str) -> events.RequestAccepted | events.RequestRejected:
        return await self.request(
            subjects.DELETE,
            events.DeleteObject(
                event_id=events.new_request_id(), occurred_at=time.time(), producer="hyperjob-cli", kind=kind, name=name
            ),
        )

    async def docs(self, kind: str, type_: type[Any]) -> dict[str, Any]:
        return {name: doc.decode(type_) for name, doc in sorted((await self.store.list(kind)).items())}

    async def doc(self, kind: str, name: str, type_: type[Any]) -> Any | None:
        stored = await self.store.get(kind, name)
        return stored.decode(type_) if stored is not None else None

    async def capacities(self) -> dict[str, events.ClusterCapacityReported]:
        """Each cluster's latest capacity summary (a cluster is known once it reported)."""
        decoder = events.decoder(events.ClusterCapacityReported)
        latest = await self.bus.last_per_subject(subjects.CAPACITY_ALL)
        reports = [decoder.decode(d.data) for d in latest.values()]
        return {r.cluster: r for r in sorted(reports, key=lambda r: r.cluster)}

    async def cluster_names(self) -> list[str]:
        return sorted(await self.capacities())

    async def instances(self) -> dict[str, events.InstanceStarted]:
        """Every service instance that started, by name (its latest start)."""
        decoder = events.decoder(events.InstanceStarted)
        latest = await self.bus.last_per_subject(subjects.INSTANCES)
        started = [decoder.decode(d.data) for d in latest.values()]
        return {s.instance: s for s in started}

    async def node_statuses(self, cluster: str) -> dict[str, events.NodeStatus]:
        decoder = events.decoder(events.NodeStatus)
        latest = await self.bus.last_per_subject(subjects.node_statuses(cluster))
        statuses = [decoder.decode(d.data) for d in latest.values()]
        return {s.node: s for s in sorted(statuses, key=lambda s: s.node)}


def plain(value: Any) -> Any:
    return msgspec.to_builtins(value)
