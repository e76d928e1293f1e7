"""Lists in chunks (``limit``/``continue``): the token, the chunks in key order from the first
chunk's snapshot, and 410 with a fresh token once that snapshot is gone. Requests are handled as
routed, the read model replaced by a fleet of PyTorchJobs the test changes between requests."""

from __future__ import annotations

import json
from typing import Any

import pytest
from starlette.requests import Request

from hyperjob.bus import InMemoryBus
from hyperjob.client import workloads
from hyperjob.events.access import Identity
from hyperjob.events.subjects import STREAMS
from hyperjob.services.apiserver import app, chunks
from hyperjob.services.apiserver.identity import Tokens
from hyperjob.services.apiserver.objects import Objects
from hyperjob.services.apiserver.status import ApiError

from .test_apiserver_kinds import PYTORCHJOB, job

CLI = Identity(name="cli", role="user")


class Reader:
    """The apiserver's client as lists use it: the bus its changelog (resource versions) goes to."""

    def __init__(self) -> None:
        self.bus = InMemoryBus(STREAMS)


@pytest.fixture
def fleet(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> tuple[app.State, list[str]]:
    """PyTorchJobs named as the returned list says, changed by the test between requests."""
    names = [f"torch-{i}" for i in (3, 1, 4, 0, 2)]

    async def jobs(client: object, name: str | None) -> list[dict]:
        return [job(n, "PyTorchJob") for n in names]

    monkeypatch.setattr(workloads, "jobs", jobs)
    return app.State(client=Reader(), tokens=Tokens(tmp_path / "none.json"), version="test"), names  # type: ignore[arg-type]


async def list_(state: app.State, query: str) -> dict:
    scope = {"type": "http", "method": "GET", "query_string": query.encode(), "headers": [], "path_params": PYTORCHJOB}
    response = await app._collection(Request(scope), state, CLI)
    return json.loads(bytes(response.body))


def named(listed: dict) -> list[str]:
    return [item["metadata"]["name"] for item in listed["items"]]


# -- the token --------------------------------------------------------------------------------------


def test_a_token_names_the_lists_version_and_the_last_key_answered():
    token = chunks.Continue(42, ("team-a", "x"))
    assert chunks.decode(chunks.encode(token)) == token


@pytest.mark.parametrize(
    "text",
    [
        "not a token!",
        "e30=",  # base64 of {}
        chunks.encode(chunks.Continue(42, ("", "x"))).replace("e", "f"),
        "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MCwic3RhcnQiOlsiIiwieCJdfQ==",  # rv 0: never a list's
    ],
)
def test_a_token_this_apiserver_did_not_answer_with_is_an_error_naming_continue(text):
    with pytest.raises(chunks.ChunkError, match="^continue: "):
        chunks.decode(text)


@pytest.mark.parametrize("text", ["ten", "-1", "1.5"])
def test_a_limit_that_is_no_whole_number_is_an_error_naming_limit(text):
    with pytest.raises(chunks.ChunkError, match="^limit: "):
        chunks.limit_of(text)


# -- lists ----------------------------------------------------------------------------------------


async def test_a_list_with_limit_answers_chunks_in_name_order_each_with_a_token_for_the_rest(fleet):
    state, _ = fleet
    first = await list_(state, "limit=2")
    assert named(first) == ["torch-0", "torch-1"] and first["metadata"]["remainingItemCount"] == 3
    second = await list_(state, f"limit=2&continue={first['metadata']['continue']}")
    assert named(second) == ["torch-2", "torch-3"]
    last = await list_(state, f"limit=2&continue={second['metadata']['continue']}")
    assert named(last) == ["torch-4"] and "continue" not in last["metadata"]
    assert (
        first["metadata"]["resourceVersion"]
        == second["metadata"]["resourceVersion"]
        == last["metadata"]["resourceVersion"]
    )
    assert "continue" not in (await list_(state, "limit=5"))["metadata"]
    assert "continue" not in (await list_(state, ""))["metadata"]


async def test_the_chunks_after_the_first_come_from_its_snapshot(fleet):
    """Objects created or deleted after the first chunk do not show in the later ones, as
    Kubernetes serves every chunk from the first one's resourceVersion."""
    state, names = fleet
    first = await list_(state, "limit=2")
    names.remove("torch-3")
    names.append("torch-22")
    assert named(await list_(state, "")) == ["torch-1", "torch-4", "torch-0", "torch-2", "torch-22"]
    rest = await list_(state, f"continue={first['metadata']['continue']}")
    assert named(rest) == ["torch-2", "torch-3", "torch-4"]


async def test_a_token_whose_snapshot_is_gone_is_gone_with_a_token_going_on_in_the_list_as_it_is_now(fleet):
    state, names = fleet
    first = await list_(state, "limit=2")
    state.objects = Objects(state.client)  # a restarted apiserver: the snapshot is not kept
    names.append("torch-11")
    with pytest.raises(ApiError) as expired:
        await list_(state, f"limit=2&continue={first['metadata']['continue']}")
    assert (expired.value.code, expired.value.reason) == (410, "Expired")
    fresh = expired.value.status()["metadata"]["continue"]
    rest = await list_(state, f"limit=10&continue={fresh}")
    assert named(rest) == ["torch-11", "torch-2", "torch-3", "torch-4"]  # after torch-1, as the list is now


@pytest.mark.parametrize(
    ("query", "field"),
    [("continue=garbage", "continue"), ("limit=x", "limit"), ("limit=-3", "limit")],
)
async def test_a_bad_token_or_limit_is_a_bad_request_naming_it(fleet, query, field):
    state, _ = fleet
    with pytest.raises(ApiError) as refused:
        await list_(state, query)
    assert (refused.value.code, refused.value.reason) == (400, "BadRequest")
    assert refused.value.message.startswith(f"{field}: ")


async def test_a_continued_list_with_a_resource_version_is_a_bad_request(fleet):
    state, _ = fleet
    first = await list_(state, "limit=2")
    with pytest.raises(ApiError) as refused:
        await list_(state, f"resourceVersion=1&continue={first['metadata']['continue']}")
    assert refused.value.code == 400 and "continue" in refused.value.message


async def test_kubectls_table_carries_the_token_too(fleet):
    state, _ = fleet
    scope = {
        "type": "http", "method": "GET", "query_string": b"limit=3", "path_params": PYTORCHJOB,
        "headers": [(b"accept", b"application/json;as=Table;v=v1;g=meta.k8s.io")],
    }  # fmt: skip
    table = json.loads(bytes((await app._collection(Request(scope), state, CLI)).body))
    assert [row["cells"][0] for row in table["rows"]] == ["torch-0", "torch-1", "torch-2"]
    assert table["metadata"]["continue"] and table["metadata"]["resourceVersion"]
