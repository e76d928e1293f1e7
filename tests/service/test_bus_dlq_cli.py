"""``hyperjob get dlq`` and ``hyperjob dlq replay|purge`` as a user runs them, against a NATS server
of the test's own (the CLI uses the real stream names, no test namespace): the table and
``-o json`` name the consumer, subject, reason, error and where the original is stored; replay
puts a copied letter and a letter by reference back on their subjects and removes them; purge
asks which letters, and removes them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hyperjob.bus import MAX_PAYLOAD, Delivery, Verdict
from hyperjob.events import subjects
from hyperjob.events.subjects import STREAMS
from hyperjob.testkit.isolation import open_nats_bus
from hyperjob.testkit.servers import NatsServer, free_port

pytestmark = pytest.mark.service

HYPERJOB = str(Path(sys.executable).parent / "hyperjob")


@pytest.fixture
def nats(tmp_path: Path) -> Iterator[NatsServer]:
    server = NatsServer(tmp_path / "nats", port=free_port())
    server.start()
    yield server
    server.stop()


def cli(nats: NatsServer, redis_url: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NATS_URL": nats.url, "REDIS_URL": redis_url, "HYPERJOB_HOME": str(tmp_path / "home")}
    return subprocess.run([HYPERJOB, *args], env=env, capture_output=True, text=True, timeout=60)


async def letter_for(bus, subject: str, payload: bytes, reason: str, error: str, durable: str) -> int:  # noqa: ANN001
    """Store ``payload`` on ``subject`` and dead-letter it for ``durable`` as the bus would."""
    ack = await bus.publish(subject, payload, msg_id=f"orig-{subject}-{len(payload)}")
    original = Delivery(subject=subject, data=payload, headers={}, stream=ack.stream, seq=ack.seq, num_delivered=1)
    await bus.dead_letter(durable, original, Verdict("dlq", reason=reason, error_type="Unreadable", error=error))
    return ack.seq


async def test_get_replay_and_purge_dead_letters_from_the_command_line(nats, redis_url, tmp_path) -> None:
    async with open_nats_bus(nats.url, "", STREAMS, cleanup=False) as bus:
        await letter_for(bus, subjects.DELETE, b'{"type":"x"}', "unknown-type", "unknown message type 'x'", "splitter")
        huge = b"y" * (MAX_PAYLOAD - 200)
        huge_seq = await letter_for(bus, subjects.node_fault("c1"), huge, "undecodable", "not JSON", "agent-faults")
        await letter_for(bus, subjects.DELETE, b"junk", "undecodable", "not JSON: bad", "splitter-sched")

        table = cli(nats, redis_url, tmp_path, "get", "dlq")
        assert table.returncode == 0, table.stderr
        header, *rows = table.stdout.splitlines()
        assert header.split() == ["SEQ", "CONSUMER", "SUBJECT", "REASON", "ERROR", "STREAM/SEQ", "AGE"]
        assert len(rows) == 3 and "unknown-type" in rows[0] and f"NODE/{huge_seq}*" in rows[1]

        listed = json.loads(cli(nats, redis_url, tmp_path, "get", "dlq", "-o", "json").stdout)["items"]
        by_consumer = {item["consumer"]: item for item in listed}
        assert by_consumer["agent-faults"]["by_reference"] is True and by_consumer["agent-faults"]["size"] == 0
        assert by_consumer["splitter"]["subject"] == subjects.DELETE

        replayed = cli(nats, redis_url, tmp_path, "dlq", "replay", "--consumer", "agent-faults")
        assert replayed.returncode == 0 and "replayed to node.fault.c1" in replayed.stdout, replayed.stderr
        [again] = [d for d, _ in await bus.stored(subjects.node_fault("c1"))][-1:]
        assert again.data == huge and again.msg_id == f"replay.{by_consumer['agent-faults']['seq']}"
        replayed = cli(nats, redis_url, tmp_path, "dlq", "replay", "--seq", str(by_consumer["splitter"]["seq"]))
        assert replayed.returncode == 0, replayed.stderr
        assert [d.data for d, _ in await bus.stored(subjects.DELETE)][-1] == b'{"type":"x"}'

        refused = cli(nats, redis_url, tmp_path, "dlq", "purge")
        assert refused.returncode == 1 and "--all" in refused.stderr and "Traceback" not in refused.stderr
        purged = cli(nats, redis_url, tmp_path, "dlq", "purge", "--all")
        assert purged.returncode == 0 and purged.stdout.count("purged") == 1, purged.stderr
        empty = cli(nats, redis_url, tmp_path, "get", "dlq")
        assert empty.returncode == 0 and empty.stdout == "" and "No resources found" in empty.stderr
