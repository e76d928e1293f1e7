"""``hyperjob schema [TYPE]``: JSON Schemas of the public contract, generated from the msgspec types
themselves (``msgspec.json.schema``), so they cannot drift from what the services decode.

The contract (``docs/submit-contract.md``): the manifests a program applies, the requests it
publishes on NATS (``hj.manifest.apply.<namespace>``, ``hj.object.delete.<namespace>`` ...), the
answers on ``hj.result.<event_id>`` and the status events on ``hj.hyperjob.status``. Each event
type carries its version in its ``type`` tag (``hj.manifest.apply.v1``); ``CONTRACT_VERSION``
versions the set as a whole.
"""

from __future__ import annotations

import json

import click
import msgspec

from hyperjob import events
from hyperjob.api.schema import Schema, manifest_types, schema_hook
from hyperjob.events import subjects

CONTRACT_VERSION = "v2"
SCHEMA_BASE = f"https://hyperjob.dev/schemas/{CONTRACT_VERSION}"

# What a submitter sends or reads, with the subject it travels on.
EVENTS: dict[str, tuple[type[msgspec.Struct], str]] = {
    "ApplyManifest": (events.ApplyManifest, subjects.in_namespace(subjects.APPLY, "<namespace>")),
    "DeleteObject": (events.DeleteObject, subjects.in_namespace(subjects.DELETE, "<namespace>")),
    "CommandHyperJob": (events.CommandHyperJob, subjects.in_namespace(subjects.HYPERJOB_COMMAND, "<namespace>")),
    "CommandObject": (events.CommandObject, subjects.in_namespace(subjects.OBJECT_COMMAND, "<namespace>")),
    "RequestAccepted": (events.RequestAccepted, subjects.result("<event_id>")),
    "RequestRejected": (events.RequestRejected, subjects.result("<event_id>")),
    "HyperJobStatusChanged": (events.HyperJobStatusChanged, subjects.HYPERJOB_STATUS),
    "HyperJobDeleted": (events.HyperJobDeleted, subjects.HYPERJOB_DELETED),
}


def types() -> dict[str, tuple[type[msgspec.Struct], str]]:
    """Every type of the contract with what it is (a manifest kind or the subject of an event)."""
    described = {name: (struct, "manifest") for name, struct in manifest_types().items()}
    return {**described, **{name: (struct, f"event on {subject}") for name, (struct, subject) in EVENTS.items()}}


def json_schema(name: str) -> Schema:
    struct, _ = types()[name]
    schema: Schema = msgspec.json.schema(struct, schema_hook=schema_hook)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"{SCHEMA_BASE}/{name}.json",
        "x-hyperjob-contract": CONTRACT_VERSION,
        **schema,
    }


@click.command()
@click.argument("type_name", metavar="[TYPE]", required=False)
def schema(type_name: str | None) -> None:
    """Print the JSON Schema of TYPE (a manifest kind or a request/answer/status event of the
    submit contract); without TYPE, list the types."""
    known = types()
    if type_name is None:
        width = max(len(n) for n in known)
        for name, (_, what) in known.items():
            click.echo(f"{name.ljust(width)}   {what}")
        return
    match = next((n for n in known if n.lower() == type_name.lower()), None)
    if match is None:
        raise click.UsageError(f"unknown type {type_name!r} (known: {', '.join(known)})")
    click.echo(json.dumps(json_schema(match), indent=2))


__all__ = ["CONTRACT_VERSION", "json_schema", "schema", "types"]
