"""The splitter decodes an applied HyperJob once: its stored form is read back as the object the
apply validated, as long as it is that very stored document."""

from __future__ import annotations

from msgspec.structs import replace

from hyperjob import api, records
from hyperjob.cli.bench_live import hyperjob_manifest
from hyperjob.services.splitter.domain import DecodedManifests


def _hyperjob(name: str, replicas: int = 4) -> api.HyperJob:
    """The HyperJob ``hyperjob bench live`` submits: a gang split over two clusters."""
    half = replicas // 2
    hyperjob = api.decode(hyperjob_manifest(name, replicas, {"cluster-a": half, "cluster-b": replicas - half}))
    assert isinstance(hyperjob, api.HyperJob)
    return hyperjob


def test_the_validated_object_is_what_its_stored_form_decodes_to() -> None:
    hyperjob = _hyperjob("llm")
    assert api.decode_stored(api.encode(hyperjob)) == hyperjob


def test_the_stored_document_kept_gives_back_the_validated_object_itself() -> None:
    decoded = DecodedManifests()
    hyperjob = _hyperjob("llm")
    stored = api.encode(hyperjob)
    decoded.keep("llm", stored, hyperjob)
    doc = records.HyperJobDoc(name="llm", manifest=stored, created=1.0)
    assert decoded.of(doc) is hyperjob
    assert decoded.of(replace(doc, admitted=True)) is hyperjob  # the same document, other fields changed


def test_another_document_of_the_name_is_decoded_from_what_it_says() -> None:
    decoded = DecodedManifests()
    first, second = _hyperjob("llm", replicas=4), _hyperjob("llm", replicas=8)
    decoded.keep("llm", api.encode(first), first)
    read_back = records.HyperJobDoc(name="llm", manifest=api.encode(second), created=1.0)  # e.g. after a reload
    assert decoded.of(read_back) == second


def test_only_the_latest_owners_are_kept() -> None:
    decoded = DecodedManifests(size=2)
    docs = []
    for name in ("a", "b", "c"):
        hyperjob = _hyperjob(name)
        stored = api.encode(hyperjob)
        decoded.keep(name, stored, hyperjob)
        docs.append((records.HyperJobDoc(name=name, manifest=stored, created=1.0), hyperjob))
    (doc_a, a), (doc_c, c) = docs[0], docs[2]
    assert decoded.of(doc_c) is c
    assert decoded.of(doc_a) is not a and decoded.of(doc_a) == a  # forgotten: decoded again, the same
