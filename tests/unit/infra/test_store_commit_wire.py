"""The COMMIT script's wire: the request's fields in the order the Lua reads them, and every reply
code the script can return decoded (an unknown one refused, not read as some refusal)."""

from __future__ import annotations

import re

import msgspec
import pytest

from hyperjob.store import lua
from hyperjob.store.errors import StoreError
from hyperjob.store.keys import CommitRequest, KeyLayout, commit_request, commit_script_args
from hyperjob.store.lua import CommitReply
from hyperjob.store.model import Binding, Commit, Write
from hyperjob.store.redis_store import commit_result

COMMIT = Commit(
    consumer="splitter",
    event_ids=["e1"],
    writes=[Write(kind="hyperjob", name="default/a", data=b"{}", expected_version=3)],
    binds=[Binding(cluster="c1", pod="p", node="n1", request={"cpu": 2.0})],
    sentinel="splitter",
    epoch=5,
)


def test_the_request_is_one_array_in_the_order_the_script_reads_it():
    keys, encoded = commit_script_args(KeyLayout("hj"), COMMIT)
    wire = msgspec.msgpack.decode(encoded)
    # lua.COMMIT: alive, markers, writes, binds, unbinds = req[1..5]; okey, outbox, okey_name,
    # published = req[6..9]; the epoch req[10]
    script_reads = re.findall(r"req\[(\d+)\]", lua.COMMIT)
    assert max(map(int, script_reads)) == len(wire) == len(CommitRequest.__struct_fields__)
    assert keys[wire[0] - 1] == "hj:{splitter}:alive"
    assert [keys[m - 1] for m in wire[1]] == ["hj:{splitter}:m:splitter:e1"]
    doc, version, expected, data, name = wire[2][0]
    assert (keys[doc - 1], expected, data, name) == ("hj:{splitter}:d:hyperjob", 3, "{}", "default/a")
    assert wire[3][0][3:5] == ["p", "n1"] and wire[3][0][6] == ["cpu", "2.0"]
    assert wire[9] == 5


def test_a_delete_travels_as_false_and_an_unversioned_write_as_minus_one():
    _, request = commit_request(
        KeyLayout("hj"), Commit(consumer="x", writes=[Write(kind="queue", name="q", data=None)])
    )
    assert (request.writes[0].data, request.writes[0].expected) == (False, -1)


def test_every_code_the_script_returns_is_a_reply_the_client_decodes():
    returned = {int(code) for code in re.findall(r"(?:return|local out =) \{(\d+)", lua.COMMIT)} | {0}
    assert returned == {reply.value for reply in CommitReply}


@pytest.mark.parametrize(
    ("reply", "refusal"),
    [
        ([1, 1], "duplicate"),
        ([2, 1, 7], "conflict"),
        ([3], "wiped"),
        ([4, b"p", b"n2"], "bound-elsewhere"),
        ([5, b"n1", b"cpu", b"1.5"], "no-room"),
        ([6, b"n1"], "unknown-node"),
        ([7, 9], "stale"),
    ],
)
def test_each_refusal_is_decoded_by_its_code(reply, refusal):
    assert commit_result(reply, COMMIT).refusal == refusal


def test_a_commit_reports_its_versions_and_epoch():
    result = commit_result([0, 4, 6], COMMIT)
    assert (result.refusal, result.versions, result.epoch) == ("", [4], 6)


def test_an_unknown_reply_code_is_an_error_not_a_refusal():
    with pytest.raises(StoreError, match="COMMIT replied 8"):
        commit_result([8, b"n1"], COMMIT)
