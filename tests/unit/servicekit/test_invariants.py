"""What a service's code guarantees is checked by a check that raises a named error, never by an
``assert`` (gone under ``python -O``)."""

from __future__ import annotations

import ast
from pathlib import Path

import msgspec
import pytest

from hyperjob import api
from hyperjob.servicekit import InvariantError, present
from hyperjob.servicekit.projection import Projection

REPO = Path(__file__).resolve().parents[3]


class Row(msgspec.Struct, frozen=True):
    value: int


def test_no_service_asserts():
    found = [
        f"{path.relative_to(REPO)}:{node.lineno}"
        for path in sorted(REPO.glob("services/*/src/**/*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Assert)
    ]
    assert found == []


def test_present_is_the_value_or_a_named_error():
    assert present(0, "zero") == 0
    with pytest.raises(InvariantError, match="the placement of c1 is missing"):
        present(None, "the placement of c1")


def test_a_required_row_is_there_or_a_named_error():
    table = Projection().table("row", Row)
    table.put("a", Row(value=1))
    assert table.require("a") == Row(value=1)
    with pytest.raises(InvariantError, match="row 'b' is missing"):
        table.require("b")


def test_a_manifest_of_another_kind_than_its_reader_keeps_is_a_named_error():
    queue = api.decode({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q"}})
    assert api.expect_kind(queue, api.Queue) is queue
    with pytest.raises(api.UnexpectedKindError, match="a Queue where only a HyperJob is kept"):
        api.expect_kind(queue, api.HyperJob)
