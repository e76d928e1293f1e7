"""The documents a client reads from the store: the read model, a public contract (ADR 0012).

Each service keeps its state as documents in the store (``hyperjob.records``, one writer per
kind). Some of those kinds are also what ``hyperjob get``, ``describe``, the dashboard and the
apiserver show, so their schemas are an API: a newer service writes them while an older CLI or
dashboard reads them, and the reverse, during every rolling upgrade. They are declared here, the
client reads no other document type (``check``), and each one changes only compatibly:

- a field is added with a default, never required;
- a field is never removed, renamed, retyped or given another default;
- a value is added to an enum only once every reader decodes it (readers first, then writers).

``tests/unit/client/test_read_model.py`` keeps each type's JSON schema as released and fails on a
change that breaks these rules; a compatible change updates the kept schema with the change.
"""

from __future__ import annotations

from typing import Any

import msgspec

from hyperjob import records
from hyperjob.jobcore import model as jobcore_model

__all__ = ["READ_MODEL", "NotInReadModelError", "check", "schema"]

# Every document type a client decodes, each with the kinds it is stored under.
READ_MODEL: tuple[type[msgspec.Struct], ...] = (
    records.HyperJobDoc,  # hyperjob
    records.HyperJobStatusDoc,  # hjstatus
    records.QueueDoc,  # queue
    records.PriorityClassDoc,  # priorityclass
    records.QueueUsageDoc,  # queueusage@<cluster>
    records.PodGroupPhaseDoc,  # pgphase@<cluster>
    jobcore_model.JobRecord,  # job@<cluster>
    records.CronJobDoc,  # cronjob
    records.JobFlowDoc,  # jobflow
    records.JobTemplateDoc,  # jobtemplate
)


class NotInReadModelError(TypeError):
    """A client asked to decode a document type the read model does not declare."""


def check(type_: type) -> None:
    """Refuse to read a document type outside the read model: reading one would make another
    service's private state an API no compatibility check covers."""
    if type_ not in READ_MODEL:
        raise NotInReadModelError(
            f"{type_.__module__}.{type_.__qualname__} is not in the read model "
            "(hyperjob.client.readmodel.READ_MODEL, ADR 0012): declare it there to read it"
        )


def schema() -> dict[str, Any]:
    """The read model's JSON schema: each type by name, and the structs they hold."""
    roots, components = msgspec.json.schema_components(READ_MODEL, schema_hook=_any_json)
    return {"roots": {t.__name__: root for t, root in zip(READ_MODEL, roots, strict=True)}, "$defs": components}


def _any_json(type_: type) -> dict[str, Any]:
    """A manifest's or status's values are Any as stored (``records.JSONObject``): any JSON value."""
    if type_ is object:
        return {"description": "any JSON value"}
    raise TypeError(f"no JSON schema for {type_!r} in the read model")
