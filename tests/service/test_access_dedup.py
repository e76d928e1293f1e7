"""Deduplication a person cannot poison (a real nats-server with ``hyperjob up``'s users):
JetStream's ``Nats-Msg-Id`` window is per stream, and a service's message ids are derived from
what it handles, so a person who reads a request could publish, on her own subject of the same
stream, the id of the answer first. The ids a service puts on the wire are keyed by its
credentials: her copy is stored as hers, the answer is stored too, and a retry of the answer is
still dropped as a duplicate."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

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
