"""The read model (``hyperjob.client.readmodel``, ADR 0012) changes only compatibly: the schema of
every document type a client reads is kept in ``read_model.schema.json`` as released, and a change
that an older reader (or an older document) would not survive fails here, naming the field.

A compatible change (a field added with a default, an enum value added) also fails until the kept
schema is written again: ``python -m tests.unit.client.test_read_model --write``."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from hyperjob import records
from hyperjob.client import readmodel

KEPT = Path(__file__).with_name("read_model.schema.json")
DOCS = ("description", "title")  # what a schema says to people, not what it decodes
Schema = dict[str, Any]


def breaking(old: Schema, new: Schema) -> list[str]:
    """What in ``new`` breaks a reader or a document of ``old``, one line each."""
    problems: list[str] = []
    for name, root in old["roots"].items():
        if name not in new["roots"]:
            problems.append(f"{name}: no longer in the read model")
        else:
            _compare(root, new["roots"][name], name, old["$defs"], new["$defs"], problems)
    return problems


def changed(old: Schema, new: Schema) -> bool:
    return _plain(old) != _plain(new)


def _compare(old: Schema, new: Schema, path: str, olds: Schema, news: Schema, out: list[str]) -> None:
    old, new = _resolve(old, olds), _resolve(new, news)
    if "properties" in old and "properties" in new:
        _compare_struct(old, new, path, olds, news, out)
    elif "enum" in old and "enum" in new:
        if missing := [v for v in old["enum"] if v not in new["enum"]]:
            out.append(f"{path}: values removed from the enum: {missing}")
    elif "anyOf" in old and "anyOf" in new:
        for i, option in enumerate(old["anyOf"]):
            if all(_problems(option, other, path, olds, news) for other in new["anyOf"]):
                out.append(f"{path}: option {i} of the union ({_plain(option)}) is gone or changed")
    elif "items" in old and "items" in new:
        _compare(old["items"], new["items"], f"{path}[]", olds, news, out)
    elif isinstance(old.get("additionalProperties"), dict) and isinstance(new.get("additionalProperties"), dict):
        _compare(old["additionalProperties"], new["additionalProperties"], f"{path}{{}}", olds, news, out)
    elif _plain(old) != _plain(new):
        out.append(f"{path}: was {_plain(old)}, is {_plain(new)}")
    if "default" in old and old.get("default") != new.get("default"):
        out.append(f"{path}: default was {old['default']!r}, is {new.get('default', 'none (required)')!r}")


def _compare_struct(old: Schema, new: Schema, path: str, olds: Schema, news: Schema, out: list[str]) -> None:
    for field, schema in old["properties"].items():
        if field not in new["properties"]:
            out.append(f"{path}.{field}: removed")
        else:
            _compare(schema, new["properties"][field], f"{path}.{field}", olds, news, out)
    for field in set(new.get("required", [])) - set(old.get("required", [])):
        out.append(f"{path}.{field}: required now (a document written before has none)")


def _problems(old: Schema, new: Schema, path: str, olds: Schema, news: Schema) -> list[str]:
    out: list[str] = []
    _compare(old, new, path, olds, news, out)
    return out


def _resolve(schema: Schema, defs: Schema) -> Schema:
    while "$ref" in schema:
        schema = {**defs[schema["$ref"].rsplit("/", 1)[1]], **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def _plain(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _plain(v) for k, v in schema.items() if k not in DOCS}
    if isinstance(schema, list):
        return [_plain(v) for v in schema]
    return schema


def test_the_read_model_changed_only_compatibly_since_its_schema_was_kept() -> None:
    kept, now = json.loads(KEPT.read_text()), readmodel.schema()
    assert breaking(kept, now) == [], "an incompatible change to the read model (ADR 0012)"
    assert not changed(kept, now), (
        "the read model changed compatibly: keep its new schema with "
        "`python -m tests.unit.client.test_read_model --write` in the same commit"
    )


# -- the rules themselves, on the kept schema ------------------------------------------------------------


def _edited(edit: Any) -> list[str]:
    kept = json.loads(KEPT.read_text())
    new = copy.deepcopy(kept)
    edit(new["$defs"])
    return breaking(kept, new)


def test_a_removed_or_retyped_field_breaks_and_names_it() -> None:
    assert _edited(lambda d: d["HyperJobDoc"]["properties"].pop("created")) == ["HyperJobDoc.created: removed"]
    retyped = _edited(lambda d: d["QueueDoc"]["properties"].update(created={"type": "string"}))
    assert retyped and retyped[0].startswith("QueueDoc.created: was")


def test_a_field_made_required_or_given_another_default_breaks() -> None:
    assert _edited(lambda d: d["QueueDoc"].setdefault("required", []).append("created")) == [
        "QueueDoc.created: required now (a document written before has none)"
    ]
    assert _edited(lambda d: d["JobRecord"]["properties"]["phase"].update(default="Running")) == [
        "JobRecord.phase: default was 'Pending', is 'Running'"
    ]


def test_an_enum_value_removed_breaks_and_one_added_does_not() -> None:
    def drop(d: Schema) -> None:
        d["JobRecord"]["properties"]["phase"]["enum"].remove("Aborted")

    def add(d: Schema) -> None:
        d["JobRecord"]["properties"]["phase"]["enum"].append("Frozen")

    assert _edited(drop) == ["JobRecord.phase: values removed from the enum: ['Aborted']"]
    assert _edited(add) == []


def test_a_field_added_with_a_default_is_compatible_but_must_be_kept() -> None:
    kept = json.loads(KEPT.read_text())
    new = copy.deepcopy(kept)
    new["$defs"]["QueueDoc"]["properties"]["note"] = {"type": "string", "default": ""}
    assert breaking(kept, new) == [] and changed(kept, new)


def test_a_client_reads_no_document_type_outside_the_read_model() -> None:
    with pytest.raises(readmodel.NotInReadModelError, match=r"records\.OwnerDoc is not in the read model"):
        readmodel.check(records.OwnerDoc)
    for type_ in readmodel.READ_MODEL:
        readmodel.check(type_)
        assert issubclass(type_, msgspec.Struct)


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    KEPT.write_text(json.dumps(readmodel.schema(), indent=1, sort_keys=True) + "\n")
    print(f"kept the read model's schema in {KEPT}")
