"""Kubeflow's kinds (MPIJob, PyTorchJob, TFJob) in the read model, by the kind they were applied as:
what ``hyperjob get pytorchjobs`` and the apiserver's ``kubeflow.org`` resources show.

Each runs as a plain Volcano Job carrying its kind in the ``hyperjob.io/source-kind`` annotation
(``api.kubeflow``); the jobs of a kind are the plain jobs applied as it (a HyperJob's children are
its, not here). Rows are the operators' columns: NAME, STATE (the last condition they would report:
Created, Running, Restarting, Succeeded, Failed, Suspended), AGE; the manifest is the one applied
(the splitter keeps it beside the Volcano Job that runs it), with that condition in
``status.conditions``, so ``get -o yaml > f && apply -f f`` is ``unchanged``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from hyperjob import api

from . import Client
from .views import View, _age, job_manifest, jobs

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


def loader(kind: str) -> Callable[[Client, str | None], Awaitable[list[View]]]:
    """The loader of the plain jobs applied as ``kind`` (``PyTorchJob``)."""

    async def load(client: Client, name: str | None) -> list[View]:
        return [i for i in await jobs(client, name) if not i["hyperJob"] and applied_kind(i["manifest"]) == kind]

    return load


def rows(items: list[View], wide: bool = False) -> tuple[list[str], list[list[str]]]:
    table = []
    for i in items:
        row = [i["name"], _STATE.get(i["phase"], i["phase"]), _age(i["created"])]
        table.append(row + ([i["cluster"], i["queue"], i["phase"]] if wide else []))
    return ["NAME", "STATE", "AGE"] + (["CLUSTER", "QUEUE", "PHASE"] if wide else []), table


def manifest(item: View) -> View:
    """The manifest as applied (the Volcano Job that runs it for a job applied before the splitter
    kept it), its status also as the operators report it: ``conditions[-1:].type`` is STATE."""
    shown = job_manifest({**item, "manifest": item.get("applied") or item["manifest"]})
    state = _STATE.get(item["phase"], item["phase"])
    shown["status"] = {**shown["status"], "conditions": [{"type": state, "status": "True"}]}
    return shown
