"""Authentication and least privilege on the servers ``hyperjob up`` starts (issue 14, ADR 0006):
every forgery an open system let through is refused by NATS or Redis themselves — a stranger
connecting, anyone but the CLI's user deleting a running HyperJob, a pod's Succeeded forged, a
fake node registered, another service's durable consumer deleted, Redis written or wiped — and
the system's state shows none of them. A second person added with ``hyperjob user add`` may
submit but not delete."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import nats
import nats.errors
import pytest
import redis.asyncio as aioredis
import redis.exceptions

from .conftest import REPO, Cli

pytestmark = pytest.mark.e2e

NAME = "auth-hj"
GHOST = "ghost-node"


def home(cli: Cli) -> Path:
    return Path(cli.env["HYPERJOB_HOME"])


def passwords(cli: Cli) -> dict[str, str]:
    return dict(json.loads((home(cli) / "credentials.json").read_text())["passwords"])


def endpoints(cli: Cli) -> dict[str, Any]:
    return dict(json.loads((home(cli) / "endpoints.json").read_text()))


def url(cli: Cli, server: str, user: str | None) -> str:
    plain = endpoints(cli)[f"{server}_url"]
    if user is None:
        return str(plain)
    scheme, rest = plain.split("://", 1)
    return f"{scheme}://{user}:{passwords(cli)[user]}@{rest}"


class Session:
    """One NATS connection as ``user``; ``refused`` says whether the server sent a permissions
    violation for what ``act`` published (JetStream's ack never comes then)."""

    def __init__(self, nc: Any) -> None:
        self.nc, self.errors = nc, []

    @classmethod
    async def open(cls, cli: Cli, user: str | None) -> Session:
        session = cls(None)

        async def on_error(exc: Exception) -> None:
            session.errors.append(str(exc))

        session.nc = await nats.connect(url(cli, "nats", user), error_cb=on_error, allow_reconnect=False)
        return session

    async def refused(self, act: Callable[[Any], Awaitable[Any]]) -> bool:
        before = len(self.errors)
        try:
            await act(self.nc.jetstream())
        except nats.errors.TimeoutError:
            pass
        else:
            return False
        await self.nc.flush()
        return any("permissions violation" in e.lower() for e in self.errors[before:])

    async def close(self) -> None:
        await self.nc.close()


def running_hyperjob(cli: Cli, tmp_path: Path) -> Path:
    manifest = tmp_path / "hj.yaml"
    manifest.write_text(
        (REPO / "examples" / "hyperjob-llm.yaml")
        .read_text()
        .replace("name: llm-train-hyperjob", f"name: {NAME}")
        .replace("replicas: 64", "replicas: 4")
        .replace("minAvailable: 64", "minAvailable: 4")
        .replace("replicas: 32", "replicas: 2")
        .replace("sim-duration: 10s", "sim-duration: 600s")
    )
    return manifest


def test_credentials_are_the_owners_alone(cli: Cli) -> None:
    path = home(cli) / "credentials.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    for server_file in ("nats/authorization.conf", "redis/users.acl"):
        assert stat.S_IMODE((home(cli) / server_file).stat().st_mode) == 0o600
    assert set(passwords(cli)) >= {"operator", "cli", "splitter", "node-agent-cluster-a", "job-controller-cluster-b"}
    assert all(secret not in (home(cli) / "redis" / "users.acl").read_text() for secret in passwords(cli).values())


def test_a_stranger_cannot_connect_to_nats_or_redis(cli: Cli) -> None:
    host, port = endpoints(cli)["nats_url"].split("://", 1)[1].rsplit(":", 1)
    for credentials in ({}, {"user": "mallory", "pass": "guess"}, {"user": "cli", "pass": "guess"}):
        with socket.create_connection((host, int(port)), timeout=5) as conn:
            conn.recv(4096)  # INFO
            conn.sendall(b"CONNECT " + json.dumps({"verbose": False, **credentials}).encode() + b"\r\nPING\r\n")
            assert b"Authorization Violation" in conn.recv(4096)

    async def redis_as_stranger() -> None:
        r = aioredis.Redis.from_url(url(cli, "redis", None))
        try:
            with pytest.raises(redis.exceptions.AuthenticationError):
                await r.get("hj:d:hyperjob")
        finally:
            await r.aclose()

    asyncio.run(redis_as_stranger())


def test_every_forgery_is_refused_by_the_servers_and_changes_nothing(cli: Cli, tmp_path: Path) -> None:
    with cli.applied(running_hyperjob(cli, tmp_path), NAME):
        cli.wait_for("the HyperJob to run", lambda: cli.json("get", "hyperjobs", NAME)["phase"] == "Running")
        outcome = asyncio.run(forge(cli))
        assert outcome == {key: True for key in outcome}, outcome
        # The system saw none of it: the HyperJob runs on, no ghost node, every consumer in place.
        assert cli.json("get", "hyperjobs", NAME)["phase"] == "Running"
        assert GHOST not in cli.run("get", "nodes").stdout
        assert cli.json("get", "jobs", f"{NAME}-job-0")["phase"] == "Running"


async def forge(cli: Cli) -> dict[str, bool]:
    refused: dict[str, bool] = {}
    delete = json.dumps({"type": "hj.object.delete.v1", "event_id": "forged", "kind": "HyperJob", "name": NAME})
    succeeded = json.dumps({"type": "node.pods.phase.v1", "phase": "Succeeded", "pods": [f"{NAME}-job-0-trainer-0"]})
    ghost = json.dumps({"type": "node.status.v1", "node": GHOST, "allocatable": {"nvidia.com/gpu": "1000"}})
    for user in ("node-agent-cluster-a", "job-controller-cluster-a", "dashboard"):
        s = await Session.open(cli, user)
        refused[f"{user} deletes a HyperJob"] = await s.refused(
            lambda js: js.publish("hj.object.delete", delete.encode(), timeout=1)
        )
        await s.close()
    for user, cluster in (("cli", "cluster-a"), ("node-agent-cluster-b", "cluster-a")):
        s = await Session.open(cli, user)
        refused[f"{user} forges a pod's Succeeded in {cluster}"] = await s.refused(
            lambda js, c=cluster: js.publish(f"node.pods.phase.{c}", succeeded.encode(), timeout=1)
        )
        refused[f"{user} registers a node in {cluster}"] = await s.refused(
            lambda js, c=cluster: js.publish(f"nodestatus.{c}.{GHOST}", ghost.encode(), timeout=1)
        )
        refused[f"{user} registers a node's heartbeat in {cluster}"] = await s.refused(
            lambda js, c=cluster: js.publish(f"heartbeat.{c}.{GHOST}", b"{}", timeout=1)
        )
        await s.close()
    operator = await Session.open(cli, "operator")
    where = await durable_streams(operator.nc.jetstream(), "job-controller-cluster-a")
    assert where, "the job-controller's durable consumer exists"
    for user in ("cli", "node-agent-cluster-a", "job-controller-cluster-b"):
        s = await Session.open(cli, user)
        for stream in where:
            refused[f"{user} deletes job-controller-cluster-a's consumer on {stream}"] = await s.refused(
                lambda js, st=stream: js.delete_consumer(st, "job-controller-cluster-a")
            )
        await s.close()
    refused["the consumer is still there"] = where == await durable_streams(
        operator.nc.jetstream(), "job-controller-cluster-a"
    )
    await operator.close()
    refused |= await forge_redis(cli)
    return refused


async def durable_streams(js: Any, durable: str) -> list[str]:
    found = []
    for info in await js.streams_info():
        for consumer in await js.consumers_info(info.config.name):
            if consumer.name == durable:
                found.append(info.config.name)
    return sorted(found)


async def forge_redis(cli: Cli) -> dict[str, bool]:
    refused = {}
    for user, what, attempt in (
        ("cli", "writes", lambda r: r.set("hj:d:hyperjob", "x")),
        ("cli", "deletes the HyperJob", lambda r: r.hdel("hj:d:hyperjob", NAME)),
        ("job-controller-cluster-a", "deletes the HyperJob", lambda r: r.hdel("hj:d:hyperjob", NAME)),
        ("node-agent-cluster-a", "wipes Redis", lambda r: r.execute_command("FLUSHALL")),
        ("splitter", "turns persistence off", lambda r: r.execute_command("CONFIG", "SET", "appendonly", "no")),
    ):
        r = aioredis.Redis.from_url(url(cli, "redis", user))
        try:
            await attempt(r)
            refused[f"redis: {user} {what}"] = False
        except redis.exceptions.NoPermissionError:
            refused[f"redis: {user} {what}"] = True
        finally:
            await r.aclose()
    return refused


def test_a_second_user_may_submit_but_not_delete(cli: Cli, tmp_path: Path) -> None:
    added = cli.run("user", "add", "bob", "--verbs", "apply")
    assert "HYPERJOB_USER=bob" in added.stdout
    bob = Cli({**cli.env, "HYPERJOB_USER": "bob"})
    queue = tmp_path / "q.yaml"
    queue.write_text(
        "apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {name: bobs-q}\nspec: {weight: 1}\n"
    )
    assert "created" in bob.run("apply", "-f", str(queue)).stdout
    refused = bob.run("delete", "queue", "bobs-q", "--timeout", "10", check=False)
    assert refused.returncode != 0
    assert "bobs-q" in cli.run("get", "queues").stdout  # still there: NATS never took bob's delete
    assert cli.run("user", "add", "splitter", check=False).returncode != 0  # no taking a service's name
    env = cli.run("user", "add", "bob", "--verbs", "apply", "-o", "env").stdout
    assert "NATS_URL=nats://bob:" in env and "REDIS_URL=redis://bob:" in env
    cli.run("delete", "queue", "bobs-q")
    assert os.environ.get("HYPERJOB_USER") is None  # the suite's own CLI acts as the CLI's user


def team_queue(tmp_path: Path, name: str) -> Path:
    queue = tmp_path / f"{name}.yaml"
    queue.write_text(f"apiVersion: scheduling.volcano.sh/v1beta1\nkind: Queue\nmetadata: {{name: {name}}}\n")
    return queue


def test_a_team_a_user_is_refused_in_team_b_by_nats(cli: Cli, tmp_path: Path) -> None:
    """``--namespaces team-a``: carol applies, deletes and commands in team-a; in team-b (and on the
    every-namespace subjects: queues, priority classes) NATS itself refuses her, and nothing there changes."""
    added = cli.run("user", "add", "carol", "--namespaces", "team-a")
    assert "in namespace team-a" in added.stdout
    carol = Cli({**cli.env, "HYPERJOB_USER": "carol"})
    manifest = running_hyperjob(cli, tmp_path)
    cli.run("apply", "-n", "team-b", "-f", str(manifest))  # the CLI's user may act everywhere
    try:
        refused = carol.run("apply", "-n", "team-b", "-f", str(manifest), check=False)
        assert refused.returncode != 0
        only_hyperjob = tmp_path / "only-hj.yaml"
        only_hyperjob.write_text(manifest.read_text().split("---", 1)[1])
        assert f"hyperjob/{NAME} created" in carol.run("apply", "-n", "team-a", "-f", str(only_hyperjob)).stdout
        assert carol.run("apply", "-f", str(team_queue(tmp_path, "carols-q")), check=False).returncode != 0
        outcome = asyncio.run(carol_in_team_b(cli))
        assert outcome == {key: True for key in outcome}, outcome
        assert carol.run("delete", "hyperjob", NAME, "-n", "team-b", "--timeout", "10", check=False).returncode != 0
        assert carol.run("suspend", NAME, "-n", "team-b", check=False).returncode != 0
        # team-b's HyperJob is untouched: carol's requests never reached the splitter.
        assert cli.json("get", "hyperjobs", NAME, "-n", "team-b")["phase"] in ("Pending", "Running")
        assert "carols-q" not in cli.run("get", "queues").stdout
        assert f"hyperjob/{NAME} deleted" in carol.run("delete", "hyperjob", NAME, "-n", "team-a").stdout
    finally:
        for team in ("team-a", "team-b"):
            cli.run("delete", "hyperjob", NAME, "-n", team, "--ignore-not-found", "--timeout", "120", check=False)


async def carol_in_team_b(cli: Cli) -> dict[str, bool]:
    refused: dict[str, bool] = {}
    delete = json.dumps({"type": "hj.object.delete.v1", "event_id": "carol-del", "kind": "HyperJob", "name": NAME})
    command = json.dumps({"type": "hj.hyperjob.command.v1", "event_id": "carol-cmd", "name": NAME, "action": "abort"})
    s = await Session.open(cli, "carol")
    for subject, payload in (
        ("hj.object.delete.team-b", delete),
        ("hj.object.delete", delete),  # the every-namespace form (contract v1)
        ("hj.hyperjob.command.team-b", command),
        ("hj.hyperjob.command", command),
        ("hj.manifest.apply.team-b", "{}"),
    ):
        refused[f"carol publishes {subject}"] = await s.refused(
            lambda js, sub=subject, p=payload: js.publish(sub, p.encode(), timeout=1)
        )
    await s.close()
    return refused
