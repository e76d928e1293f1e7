"""Streams a person cannot tamper with: deduplication she cannot poison, and no durable consumer
of hers on streams that are not hers.

Deduplication a person cannot poison (a real nats-server with ``hyperjob up``'s users):
JetStream's ``Nats-Msg-Id`` window is per stream, and a service's message ids are derived from
what it handles, so a person who reads a request could publish, on her own subject of the same
stream, the id of the answer first. The ids a service puts on the wire are keyed by its
credentials: her copy is stored as hers, the answer is stored too, and a retry of the answer is
still dropped as a duplicate."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import nats
import nats.errors
import nats.js.errors
import pytest
from nats.js.api import AckPolicy, ConsumerConfig

from hyperjob import events
from hyperjob.bus.natsbus import NatsBus
from hyperjob.events import subjects
from hyperjob.events.subjects import STREAMS
from hyperjob.testkit.auth import Auth, Identity
from hyperjob.testkit.servers import NatsServer

pytestmark = pytest.mark.service

AUTH = Auth.generate(
    [
        Identity(name="operator", role="operator"),
        Identity(name="splitter", role="splitter"),
        Identity(name="team-a", role="user", namespaces=("team-a",)),
    ]
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    with NatsServer(tmp_path_factory.mktemp("secured-nats"), auth=AUTH) as s:
        yield s


async def test_an_answer_id_published_first_by_a_person_does_not_drop_the_answer(server: NatsServer) -> None:
    operator = await NatsBus.connect(server.url_for("operator"), STREAMS)  # declares the streams
    her = await NatsBus.connect(server.url_for("team-a"), STREAMS)
    splitter = await NatsBus.connect(server.url_for("splitter"), STREAMS)
    try:
        request = events.new_request_id()
        answer_id = events.derive_id(request, "answer")  # what the splitter's answer is published as
        squat = await her.publish(subjects.in_namespace(subjects.APPLY, "team-a"), b"{}", msg_id=answer_id)
        assert not squat.duplicate

        answer = b'{"type":"hj.request.accepted.v1"}'
        first = await splitter.publish(subjects.result(request), answer, msg_id=answer_id)
        again = await splitter.publish(subjects.result(request), answer, msg_id=answer_id)  # a retry
        assert not first.duplicate and again.duplicate
        stored = await operator.last(subjects.result(request))
        assert stored is not None and stored.data == answer
    finally:
        for bus in (operator, her, splitter):
            await bus.close()


async def durables(js: Any, stream: str) -> list[str]:
    return [c.name for c in await js.consumers_info(stream) if c.config.durable_name]


async def test_a_person_reads_through_ephemeral_consumers_but_creates_no_durable(server: NatsServer) -> None:
    """A person's tools read streams through consumers the server names (ephemeral); a durable
    one on a stream that is not hers (left to pile up, or named like a service's next one) is
    refused, however she asks for it."""
    operator = await NatsBus.connect(server.url_for("operator"), STREAMS)
    her = await nats.connect(server.url_for("team-a"), allow_reconnect=False)
    js = her.jetstream()
    try:
        mine = ConsumerConfig(filter_subject="hj.hyperjob.status", ack_policy=AckPolicy.NONE)
        info = await js.add_consumer("HYPERJOB", mine)  # a read: named by the server, ephemeral
        await js.delete_consumer("HYPERJOB", info.name)
        for config in (
            ConsumerConfig(name="squat", durable_name="squat", filter_subject="hj.hyperjob.status"),
            ConsumerConfig(durable_name="squat2", filter_subject="hj.hyperjob.status"),
        ):
            with pytest.raises((nats.errors.TimeoutError, nats.js.errors.APIError)):
                await js.add_consumer("HYPERJOB", config, timeout=1)
        with pytest.raises(nats.js.errors.APIError):  # the bare subject: the server refuses a durable name
            await js._jsm._api_request(  # noqa: SLF001 - the raw API request, as a hand-made client sends it
                "$JS.API.CONSUMER.CREATE.HYPERJOB",
                json.dumps({"stream_name": "HYPERJOB", "config": {"durable_name": "squat3"}}).encode(),
                timeout=1,
            )
        assert await durables(operator._js, "HYPERJOB") == []  # noqa: SLF001
    finally:
        await her.close()
        await operator.close()
