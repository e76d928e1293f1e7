"""The submit contract (docs/submit-contract.md) as a program in another language uses it: plain
NATS and hand-written JSON, no hyperjob code."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import nats
import pytest

from .conftest import Cli

pytestmark = pytest.mark.e2e


def nats_url(cli: Cli) -> str:
    """The system's NATS as a person connects to it: with the CLI user's credentials."""
    plain = str(json.loads(cli.run("get", "services", "-o", "json").stdout)["items"][0]["endpoints"]["nats"])
    credentials = json.loads((Path(cli.env["HYPERJOB_HOME"]) / "credentials.json").read_text())
    return plain.replace("://", f"://cli:{credentials['passwords']['cli']}@", 1)


async def submit(url: str, subject: str, request: dict[str, Any] | bytes, event_id: str) -> dict[str, Any] | None:
    """Publish one request; its answer on hj.result.<event_id>, or None after 10 s."""
    nc = await nats.connect(url)
    try:
        answers = await nc.subscribe(f"hj.result.{event_id}", max_msgs=1)
        data = request if isinstance(request, bytes) else json.dumps(request).encode()
        await nc.publish(subject, data, headers={"Nats-Msg-Id": event_id})
        try:
            message = await answers.next_msg(timeout=10)
        except nats.errors.TimeoutError:
            return None
        return json.loads(message.data)  # type: ignore[no-any-return]
    finally:
        await nc.close()


def test_a_plain_json_apply_and_delete_are_answered(cli: Cli) -> None:
    url, queue = nats_url(cli), {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue"}
    request_id = str(uuid.uuid4())
    apply = {"type": "hj.manifest.apply.v1", "event_id": request_id, "producer": "contract-test"}
    answer = asyncio.run(
        submit(url, "hj.manifest.apply", {**apply, "manifest": {**queue, "metadata": {"name": "json-q"}}}, request_id)
    )
    assert answer is not None
    assert (answer["type"], answer["kind"], answer["name"], answer["outcome"]) == (
        "hj.request.accepted.v1",
        "Queue",
        "json-q",
        "created",
    )

    bad_id = str(uuid.uuid4())
    bad = {**apply, "event_id": bad_id, "manifest": {**queue, "metadata": {"name": "Not_A_Label"}}}
    rejected = asyncio.run(submit(url, "hj.manifest.apply", bad, bad_id))
    assert rejected is not None
    assert rejected["type"] == "hj.request.rejected.v1"
    assert rejected["reason"].startswith("$.metadata.name:")

    delete_id = str(uuid.uuid4())
    delete = {"type": "hj.object.delete.v1", "event_id": delete_id, "kind": "Queue", "name": "json-q"}
    deleted = asyncio.run(submit(url, "hj.object.delete", delete, delete_id))
    assert deleted is not None and deleted["outcome"] == "deleted"


def test_garbage_gets_a_rejection_naming_what_is_wrong(cli: Cli) -> None:
    request_id = str(uuid.uuid4())
    garbage = {"type": "hj.manifest.apply.v1", "event_id": request_id, "manifest": "not an object"}
    answer = asyncio.run(submit(nats_url(cli), "hj.manifest.apply.default", garbage, request_id))
    assert answer is not None and answer["type"] == "hj.request.rejected.v1"
    assert "$.manifest" in answer["reason"], answer
    unknown_id = str(uuid.uuid4())
    unknown = {"type": "hj.manifest.apply.v9", "event_id": unknown_id, "manifest": {}}
    answer = asyncio.run(submit(nats_url(cli), "hj.manifest.apply", unknown, unknown_id))
    assert answer is not None and "unknown message type 'hj.manifest.apply.v9'" in answer["reason"], answer


def test_a_namespaced_request_is_answered_and_one_reaching_past_its_subject_is_refused(cli: Cli) -> None:
    url, request_id = nats_url(cli), str(uuid.uuid4())
    delete = {"type": "hj.object.delete.v1", "event_id": request_id, "kind": "HyperJob", "name": "nope"}
    answer = asyncio.run(submit(url, "hj.object.delete.team-a", delete, request_id))
    assert answer is not None and answer["reason"] == "HyperJob 'nope' in namespace 'team-a' not found", answer
    other_id = str(uuid.uuid4())
    answer = asyncio.run(
        submit(url, "hj.object.delete.team-a", {**delete, "event_id": other_id, "namespace": "team-b"}, other_id)
    )
    assert answer is not None and answer["reason"].startswith("$.namespace: namespace 'team-b' is not"), answer
