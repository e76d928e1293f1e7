"""Hypothesis strategies for what can arrive on a subject: random bytes, JSON of any shape, unknown
tags, boundary sizes, and messages of the catalogue's own types with adversarial values (derived
from the msgspec types themselves, so a new field is fuzzed without anyone writing a strategy).

Each strategy yields ``Payload(kind, data)``; ``kind`` says what the consumer must do with it:
``poison`` (dead-letter it, change nothing), ``typed`` (a well-formed message of a type the
consumer handles, with hostile values: handle it or dead-letter it, never crash).
"""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import strategies as st

MIB = 1024 * 1024

_FLOATS = st.one_of(
    st.sampled_from([0.0, -1.0, 1.0, 0.5, 8.0, 1e308, -1e308, 1e-308, 1.8e19, 9.3e18]),
    st.floats(allow_nan=False, allow_infinity=False),
)
_INTS = st.one_of(
    st.sampled_from([0, -1, 1, 2, 2**31, 2**53, 2**63 - 1, -(2**63)]),
    st.integers(min_value=-(10**6), max_value=10**6),
)
_NAMES = st.sampled_from(["", "c1", "cluster-a", "cluster-b", "a-node-0", "n1", "default", "global-ai", "llm"])
_STRS = st.one_of(_NAMES, st.text(max_size=20), st.sampled_from(["a" * 300, "\x00", "../x", "ä€𝄞", " ", "*", ">"]))
JSON = st.recursive(
    st.none() | st.booleans() | _INTS | _FLOATS | _STRS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_STRS, inner, max_size=4),
    max_leaves=12,
)


class Payload(msgspec.Struct, frozen=True):
    kind: str  # "poison" or "typed"
    data: bytes
    what: str


def _value(info: Any, depth: int = 0) -> st.SearchStrategy[Any]:
    """Values of a msgspec type (``msgspec.inspect`` info), sometimes hostile, JSON-encodable."""
    t = msgspec.inspect
    if depth > 4:
        return st.none()
    if isinstance(info, t.StructType):
        return _struct(info, depth + 1)
    if isinstance(info, t.BoolType):
        return st.booleans()
    if isinstance(info, t.IntType):
        return _INTS
    if isinstance(info, t.FloatType):
        return _FLOATS | _INTS
    if isinstance(info, t.StrType):
        return _STRS
    if isinstance(info, t.NoneType):
        return st.none()
    if isinstance(info, t.BytesType):
        return st.binary(max_size=16).map(lambda b: b.hex())
    if isinstance(info, t.LiteralType):
        return st.sampled_from(list(info.values))
    if isinstance(info, t.UnionType):
        return st.one_of(*[_value(x, depth + 1) for x in info.types])
    if isinstance(info, t.ListType | t.VarTupleType | t.SetType | t.FrozenSetType):
        return st.lists(_value(info.item_type, depth + 1), max_size=3)
    if isinstance(info, t.TupleType):
        return st.tuples(*[_value(x, depth + 1) for x in info.item_types]).map(list)
    if isinstance(info, t.DictType):
        return st.dictionaries(_STRS, _value(info.value_type, depth + 1), max_size=3)
    return JSON


def _struct(info: Any, depth: int) -> st.SearchStrategy[dict[str, Any]]:
    required = {f.encode_name: _value(f.type, depth) for f in info.fields if f.required}
    optional = {f.encode_name: _value(f.type, depth) for f in info.fields if not f.required}
    base = st.fixed_dictionaries(required, optional=optional)
    if info.tag_field is not None:
        return base.map(lambda d, tag=info.tag, field=info.tag_field: {field: tag, **d})
    return base


def typed(types: tuple[type, ...]) -> st.SearchStrategy[Payload]:
    """Well-formed messages of ``types`` with hostile values."""
    return st.sampled_from(list(types)).flatmap(
        lambda cls: _struct(msgspec.inspect.type_info(cls), 0).map(
            lambda d, name=cls.__name__: Payload("typed", msgspec.json.encode(d), f"typed {name}")
        )
    )


def _tagged_shape(tags: list[str]) -> st.SearchStrategy[Payload]:
    """A known tag with a body of the wrong shape (fields of random types, missing ones)."""
    return st.tuples(st.sampled_from(tags), st.dictionaries(_STRS, JSON, max_size=5)).map(
        lambda p: Payload("poison", msgspec.json.encode({**p[1], "type": p[0]}), "wrong shape")
    )


def poison(tags: list[str]) -> st.SearchStrategy[Payload]:
    """What must be dead-lettered and change nothing: random bytes, JSON of any shape (a known
    tag with the wrong body included), unknown tags, invalid UTF-8, deep nesting, boundary sizes."""
    return st.one_of(
        st.binary(min_size=1, max_size=300).map(lambda b: Payload("poison", b, "random bytes")),
        JSON.filter(lambda v: not isinstance(v, dict)).map(
            lambda v: Payload("poison", msgspec.json.encode(v), "not an object")
        ),
        _tagged_shape(tags),
        st.text(min_size=1, max_size=30).map(
            lambda tag: Payload("poison", msgspec.json.encode({"type": f"x.{tag}.v9", "event_id": "e"}), "unknown tag")
        ),
        st.sampled_from(tags).map(
            lambda tag: Payload("poison", b'{"type":"' + tag.encode() + b'","event_id":"\xff\xfe"}', "bad UTF-8")
        ),
        st.integers(min_value=100, max_value=100_000).map(
            lambda n: Payload("poison", b"[" * n + b"]" * n, f"nesting {n}")
        ),
        st.sampled_from([1, MIB // 2, MIB - 4096]).map(lambda n: Payload("poison", b"{" + b" " * n, f"{n} bytes")),
    )
