"""What a person is told when NATS refuses her (a real nats-server with ``hyperjob up``'s users):
a wrong password says the credentials were refused, not that the system is down; a request on a
subject her user may not publish names the subject and says so, instead of "nats: timeout"."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hyperjob.client import Client, ClientError
from hyperjob.testkit.auth import Auth, Identity
from hyperjob.testkit.servers import NatsServer

pytestmark = pytest.mark.service

AUTH = Auth.generate(
    [
        Identity(name="operator", role="operator"),
        Identity(name="team-a", role="user", namespaces=("team-a",)),
    ]
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    with NatsServer(tmp_path_factory.mktemp("secured-nats"), auth=AUTH) as s:
        yield s


async def test_a_wrong_password_says_the_credentials_were_refused(server: NatsServer, redis_url: str) -> None:
    url = server.url_for("team-a").replace(AUTH.password("team-a"), "not-her-password")
    with pytest.raises(ClientError) as refused:
        await Client.connect(url, redis_url)
    message = str(refused.value)
    assert "refused the credentials" in message and "hyperjob up" not in message, message
    assert "not-her-password" not in message


async def test_a_request_her_user_may_not_publish_names_the_subject(server: NatsServer, redis_url: str) -> None:
    operator = await Client.connect(server.url_for("operator"), redis_url)  # declares the streams
    await operator.close()
    client = await Client.connect(server.url_for("team-a"), redis_url)
    try:
        job = {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": {"name": "x", "namespace": "team-b"},
        }
        with pytest.raises(ClientError) as denied:
            await client.apply(job)
    finally:
        await client.close()
    message = str(denied.value)
    assert "permission denied" in message and "hj.manifest.apply.team-b" in message, message
    assert "timeout" not in message
