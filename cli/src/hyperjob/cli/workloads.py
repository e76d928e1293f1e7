"""Kubeflow's kinds by the name they were applied as: ``get``/``describe``/``delete`` of ``mpijobs``,
``pytorchjobs`` and ``tfjobs`` (plural or singular, any case, as their CRDs name them; the CRDs
declare no short names).

Each runs as a plain Volcano Job carrying its kind in the ``hyperjob.io/source-kind`` annotation
(``api.kubeflow``); these views are the jobs of that kind (a HyperJob's children are its, not
here). ``get`` shows the operators' columns: NAME, STATE (the last condition they would report:
Created, Running, Restarting, Succeeded, Failed, Suspended), AGE; ``-o yaml`` the manifest as
applied (the splitter keeps it beside the Volcano Job that runs it), with that condition in
``status.conditions``, so ``get -o yaml > f && apply -f f`` is ``unchanged``.
"""

from __future__ import annotations

from typing import Any

from hyperjob import api, records

from . import views
from .client import Client

View = dict[str, Any]
# Volcano Job phase → the operators' job condition (kubeflow.org/v1 JobConditionType).
_STATE = {
    "Pending": "Created",
    "Running": "Running",
    "Completing": "Running",
    "Restarting": "Restarting",
    "Completed": "Succeeded",
    "Failed": "Failed",
    "Terminating": "Failed",
    "Terminated": "Failed",
    "Aborting": "Suspended",
    "Aborted": "Suspended",
}


def applied_kind(manifest: View) -> str:
    """The kind a stored or listed manifest was applied as (``PyTorchJob``; ``Job`` for a Volcano Job)."""
    metadata = manifest.get("metadata") or {}
    return api.applied_kind(metadata.get("annotations") or {}, str(manifest.get("kind", "")))


def kind_named(name: str) -> str | None:
    """``MPIJob`` for ``mpijobs``, ``mpijob`` or ``MPIJob``; None for any other name."""
    lowered = name.lower()
    return next((k for k in api.KUBEFLOW_KIND_NAMES if lowered in (k.lower(), k.lower() + "s")), None)


NAMES = tuple(name for kind in api.KUBEFLOW_KIND_NAMES for name in (kind.lower(), kind.lower() + "s"))


def _loader(kind: str) -> Any:
    async def load(client: Client, name: str | None) -> list[View]:
        return [i for i in await views.jobs(client, name) if not i["hyperJob"] and applied_kind(i["manifest"]) == kind]

    return load


def rows(items: list[View], wide: bool = False) -> tuple[list[str], list[list[str]]]:
    table = []
    for i in items:
        row = [i["name"], _STATE.get(i["phase"], i["phase"]), views._age(i["created"])]
        table.append(row + ([i["cluster"], i["queue"], i["phase"]] if wide else []))
    return ["NAME", "STATE", "AGE"] + (["CLUSTER", "QUEUE", "PHASE"] if wide else []), table


def manifest(item: View) -> View:
    """The manifest as applied (``get -o yaml``; the Volcano Job that runs it for a job applied
    before the splitter kept it), its status also as the operators report it:
    ``conditions[-1:].type`` is the STATE column."""
    shown = views.job_manifest({**item, "manifest": item.get("applied") or item["manifest"]})
    state = _STATE.get(item["phase"], item["phase"])
    shown["status"] = {**shown["status"], "conditions": [{"type": state, "status": "True"}]}
    return shown


KINDS = {
    kind.lower() + "s": views.Kind(kind.lower() + "s", kind.lower(), rows, _loader(kind), None, manifest, True)
    for kind in api.KUBEFLOW_KIND_NAMES
}


async def stored_kind(client: Client, name: str) -> str | None:
    """The kind the plain job ``name`` was applied as, or None when the system has no such job."""
    doc = await client.doc(records.HYPERJOB, name, records.HyperJobDoc)
    return applied_kind(doc.manifest) if doc is not None and doc.plain else None
