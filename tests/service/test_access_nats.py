"""The grants of ``events.access``, enforced by a real nats-server: the forgeries that an open
server lets through (a node-agent completing another cluster's pods or registering a node there,
anyone deleting a HyperJob or another service's durable consumer, a stranger connecting at all)
are refused by NATS itself, while each role's own traffic flows."""

from __future__ import annotations

import json
import socket
import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.api import ConsumerConfig, StreamConfig

from hyperjob.events import access
from hyperjob.events.subjects import STREAMS
from hyperjob.testkit.auth import Auth, Identity, make_certificates
from hyperjob.testkit.servers import NatsServer, TlsFiles

pytestmark = pytest.mark.service

AUTH = Auth.generate(
    [
        Identity(name="operator", role="operator"),
        Identity(name="alice", role="user"),
        Identity(name="reader", role="user", verbs=()),
        Identity(name="node-agent-a", role="node-agent", cluster="a"),
        Identity(name="job-controller-a", role="job-controller", cluster="a"),
    ]
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NatsServer]:
    """nats-server with JetStream and one user per identity, as ``hyperjob up`` starts it."""
    with NatsServer(tmp_path_factory.mktemp("secured-nats"), auth=AUTH) as s:
        yield s


async def connect(server: NatsServer, user: str) -> Any:
    return await nats.connect(server.url_for(user), allow_reconnect=False)


@pytest.fixture
async def streams(server: NatsServer) -> AsyncIterator[Any]:
    """The operator declares the streams and the job-controller's consumer; yields its JetStream."""
    nc = await connect(server, "operator")
    js = nc.jetstream()
    for decl in STREAMS:
        await js.add_stream(StreamConfig(name=decl.name, subjects=decl.subjects))
    await js.add_consumer("JOB", ConsumerConfig(durable_name="job-controller-a", filter_subject="job.pods.start.a"))
    yield js
    for decl in STREAMS:
        await js.delete_stream(decl.name)
    await nc.close()


async def published(js: Any, stream: str, subject: str) -> bool:
    try:
        await js.get_last_msg(stream, subject)
    except nats.js.errors.NotFoundError:
        return False
    return True


async def test_a_node_agent_speaks_only_for_its_own_cluster(server, streams) -> None:
    agent = await connect(server, "node-agent-a")
    js = agent.jetstream()
    await js.publish("node.pods.phase.a", b"{}", timeout=2)  # its own cluster: accepted
    for forged in ("node.pods.phase.b", "nodestatus.b.ghost", "hj.object.delete"):
        with pytest.raises(nats.errors.TimeoutError):
            await js.publish(forged, b"{}", timeout=0.5)
    await agent.flush()
    await agent.close()
    assert await published(streams, "NODE", "node.pods.phase.a")
    assert not await published(streams, "NODE", "node.pods.phase.b")
    assert not await published(streams, "NODESTATUS", "nodestatus.b.ghost")
    assert not await published(streams, "HYPERJOB", "hj.object.delete")


async def test_only_the_clis_user_submits_and_deletes(server, streams) -> None:
    alice = await connect(server, "alice")
    await alice.jetstream().publish("hj.object.delete", b"{}", timeout=2)
    with pytest.raises(nats.errors.TimeoutError):  # a user does not speak for a cluster
        await alice.jetstream().publish("node.pods.phase.a", b"{}", timeout=0.5)
    await alice.close()
    assert await published(streams, "HYPERJOB", "hj.object.delete")


async def test_nobody_but_its_owner_deletes_a_durable_consumer(server, streams) -> None:
    for intruder in ("alice", "node-agent-a"):
        nc = await connect(server, intruder)
        with pytest.raises(nats.errors.TimeoutError):
            await nc.jetstream().delete_consumer("JOB", "job-controller-a")
        await nc.close()
    assert (await streams.consumer_info("JOB", "job-controller-a")).name == "job-controller-a"
    owner = await connect(server, "job-controller-a")
    assert await owner.jetstream().delete_consumer("JOB", "job-controller-a")  # a reset for its rebuild
    await owner.close()


def test_a_stranger_cannot_connect(server) -> None:
    for credentials in ({}, {"user": "mallory", "pass": "guess"}, {"user": "alice", "pass": "guess"}):
        with socket.create_connection((server.host, server.port), timeout=2) as conn:
            conn.recv(4096)  # INFO
            conn.sendall(b"CONNECT " + json.dumps({"verbose": False, **credentials}).encode() + b"\r\nPING\r\n")
            assert b"Authorization Violation" in conn.recv(4096)


async def test_a_reader_only_reads(server, streams) -> None:
    reader = await connect(server, "reader")
    with pytest.raises(nats.errors.TimeoutError):
        await reader.jetstream().publish("hj.manifest.apply", b"{}", timeout=0.5)
    await reader.close()
    assert not await published(streams, "HYPERJOB", "hj.manifest.apply")


def test_the_permissions_render_as_a_server_config(tmp_path: Path) -> None:
    block = access.nats_permissions("job-controller", cluster="a")
    assert json.loads(json.dumps(block)) == block
    assert "jobstate.a.>" in block["publish"]["allow"] and block["subscribe"] == {"allow": ["_INBOX.>"]}


async def test_with_tls_a_client_must_speak_tls_and_check_the_servers_certificate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_certificates(tmp_path / "tls")
    files = TlsFiles(
        cert=tmp_path / "tls" / "server.pem", key=tmp_path / "tls" / "server-key.pem", ca=tmp_path / "tls" / "ca.pem"
    )
    with NatsServer(tmp_path / "nats", auth=AUTH, tls=files) as secured:
        assert secured.url.startswith("tls://")
        with pytest.raises(ssl.SSLCertVerificationError):  # no CA to check the certificate against
            await nats.connect(secured.url_for("alice"), allow_reconnect=False, max_reconnect_attempts=0)
        monkeypatch.setenv("SSL_CERT_FILE", str(files.ca))  # what compose's env files set
        alice = await nats.connect(secured.url_for("alice"), allow_reconnect=False)
        await alice.jetstream().account_info()
        await alice.close()
        # In plain text, even with the right password, nothing but the demand for TLS.
        with socket.create_connection((secured.host, secured.port), timeout=2) as conn:
            assert b'"tls_required":true' in conn.recv(4096)
            hello = {"verbose": False, "user": "alice", "pass": AUTH.password("alice")}
            conn.sendall(b"CONNECT " + json.dumps(hello).encode() + b"\r\nPING\r\n")
            try:
                answer = conn.recv(4096)
            except ConnectionResetError:
                answer = b""
            assert not answer.startswith(b"PONG")
