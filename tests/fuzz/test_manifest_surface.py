"""Fuzz the manifest surface (issue 14, item 3): what ``hyperjob apply`` reads from a file and what
the splitter decodes from a request. Valid manifests are mutated — deep nesting, YAML alias
bombs, invalid UTF-8, overflowing numbers, documents over the size limit, random values at random
places — and each outcome must be a clean answer: the objects, or one error per object that
names the field (``$...``). Never a crash, a traceback, a hang or a segfault.

Through the splitter (the simulator's fleet): every mutated manifest gets an answer on
``hj.result.<id>``, nothing is dead-lettered, and a rejected one changes nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from hyperjob import api, events
from hyperjob.cli import manifests
from hyperjob.events import subjects
from tests.fuzz import payloads
from tests.fuzz.fleet import REPO, Fleet

EXAMPLES = [
    d for name in ("hyperjob-llm.yaml",) for d in yaml.safe_load_all((REPO / "examples" / name).read_text()) if d
]
HUGE_NUMBERS = st.sampled_from([1e308, -1e308, 10**400, 2**64, -(2**63), 1e-320, "1e308", "1e400", "9Ei", "-1"])


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a document (the keys and indexes leading there)."""
    out = [at]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, (*at, i))
    return out


def _replaced(document: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(document, dict):
        return {**document, head: _replaced(document[head], rest, new)}
    copy = list(document)
    copy[head] = _replaced(copy[head], rest, new)
    return copy


def _nested(depth: int) -> Any:
    value: Any = "x"
    for i in range(depth):
        value = [value] if i % 2 else {"k": value}
    return value


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    """A manifest file's bytes: an example with one hostile change."""
    document = draw(st.sampled_from(EXAMPLES))
    how = draw(st.sampled_from(["value", "number", "nesting", "alias-bomb", "utf8", "size", "text-nesting"]))
    if how == "alias-bomb":
        width, levels = draw(st.integers(2, 12)), draw(st.integers(2, 9))
        lines = ["a0: &a0 [x]"] + [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * width)}]" for i in range(1, levels)]
        body = yaml.safe_dump(document, sort_keys=False)
        return (body + "x-bomb:\n" + "".join(f"  {line}\n" for line in lines)).encode()
    if how == "text-nesting":
        depth = draw(st.integers(60, 200_000))
        return yaml.safe_dump(document, sort_keys=False).encode() + b"x-deep: " + b"[" * depth + b"]" * depth + b"\n"
    place = draw(st.sampled_from(_paths(document)))
    if how == "value":
        new: Any = draw(payloads.JSON)
    elif how == "number":
        new = draw(HUGE_NUMBERS)
    elif how == "nesting":
        new = _nested(draw(st.integers(50, 800)))  # deeper: see text-nesting
    elif how == "size":
        new = "x" * draw(st.sampled_from([1024 * 1024 - 4096, 1024 * 1024, 2 * 1024 * 1024]))
    else:
        new = "\udcff"  # becomes an invalid UTF-8 byte below
    text = msgspec.json.encode(_replaced(document, place, new)) if how != "utf8" else None
    if how == "utf8":
        body = yaml.safe_dump(_replaced(document, place, "@@BAD@@"), sort_keys=False).encode()
        return body.replace(b"@@BAD@@", draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf8\x88"])))
    return text  # JSON is YAML too


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("manifests")


@given(mutated())
def test_apply_reads_any_mutated_manifest_into_objects_or_errors_that_name_the_field(files: Path, data: bytes) -> None:
    path = files / "m.yaml"
    path.write_bytes(data)
    try:
        found = manifests.objects(str(path))
    except manifests.SourceError as exc:  # the whole file refused: one line naming where
        assert "$" in str(exc) or "not valid YAML" in str(exc) or "limit" in str(exc), str(exc)
        return
    for obj in found:
        assert not obj.error or "$" in obj.error, obj.error


@pytest.fixture(scope="module")
def fleet() -> Iterator[tuple[Fleet, asyncio.AbstractEventLoop]]:
    loop = asyncio.new_event_loop()
    try:
        yield loop.run_until_complete(Fleet.boot()), loop
    finally:
        loop.close()


@st.composite
def requested(draw: st.DrawFn) -> Any:
    """A manifest as a client would send it (plain data), with one hostile change."""
    document = draw(st.sampled_from(EXAMPLES))
    place = draw(st.sampled_from(_paths(document)))
    how = draw(st.sampled_from(["value", "number", "nesting"]))
    new = {"value": payloads.JSON, "number": HUGE_NUMBERS, "nesting": st.integers(50, 800).map(_nested)}[how]
    return _replaced(document, place, draw(new))


def _letters(the_fleet, subject: str | None = None) -> int:
    return sum(subject in (None, d.subject) for d in the_fleet.engine.bus.messages("DLQ"))


def test_the_splitter_answers_every_mutated_manifest_and_a_rejected_one_changes_nothing(fleet) -> None:
    the_fleet, loop = fleet
    sent = iter(range(10**9))

    @given(requested())
    def applied(manifest: Any) -> None:
        n = next(sent)
        request = events.ApplyManifest(event_id=f"fuzz-m-{n}", occurred_at=0.0, producer="fuzz", manifest=manifest)
        try:
            data = events.encode(request)
        except (RecursionError, OverflowError, TypeError, ValueError):
            return  # a client cannot even send it
        before = the_fleet.state()
        letters, splitter_letters = _letters(the_fleet), _letters(the_fleet, "dlq.splitter")
        loop.run_until_complete(the_fleet.inject(subjects.APPLY, data))
        answers = [d for d in the_fleet.engine.bus.messages("HYPERJOB") if d.subject == subjects.result(f"fuzz-m-{n}")]
        if not isinstance(manifest, dict):  # not even a request: dead-lettered, answered, nothing changed
            # every consumer of applies (the splitter, the workflow-controller) dead-letters its copy;
            # the splitter answers it, naming what is wrong (the submit contract)
            assert _letters(the_fleet, "dlq.splitter") == splitter_letters + 1
            assert len(answers) == 1 and b"$.manifest" in answers[0].data, answers
            assert the_fleet.state() == before
            return
        assert _letters(the_fleet) == letters
        assert len(answers) == 1, "no answer"
        answer = msgspec.json.decode(answers[0].data, type=events.RequestAccepted | events.RequestRejected)
        if isinstance(answer, events.RequestRejected):
            assert "$" in answer.reason, answer.reason
            assert the_fleet.state() == before

    applied()


def test_the_damages_of_the_issue_each_give_one_clean_error() -> None:
    job = next(d for d in EXAMPLES if d["kind"] in ("HyperJob", "Job"))
    deep = yaml.safe_dump(job).encode() + b"x: " + b"[" * 100_000 + b"]" * 100_000 + b"\n"
    bomb = "a: &a [x,x,x,x,x,x,x,x,x,x]\n" + "".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 10)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    with pytest.raises(api.ManifestError, match=r"^\$.*nested more than"):
        api.load_documents(deep.decode())
    with pytest.raises(api.ManifestError, match=r"^\$\.[a-i]\b.*more than 1000000 values"):
        api.load_documents(bomb)  # 10^9 values: refused from the parser's events, before anything is built
    cpu = ("spec", "template", "spec", "tasks", 0, "template", "spec", "containers", 0, "resources", "requests", "cpu")
    with pytest.raises(api.ManifestError, match=r"^\$\.spec\.template\.spec\.tasks\[0\].*\.cpu: .*too large"):
        api.decode(_replaced(job, cpu, 1e308))
    with pytest.raises(api.quantity.QuantityError, match="too large"):
        api.quantity.parse_quantity("1e308")
