"""Kubeflow's kinds by the name they were applied as: ``get``/``describe``/``delete`` of ``mpijobs``,
``pytorchjobs`` and ``tfjobs`` (plural or singular, any case, as their CRDs name them; the CRDs
declare no short names).

Each runs as a plain Volcano Job carrying its kind in the ``hyperjob.io/source-kind`` annotation
(``api.kubeflow``); these views (``hyperjob.client.workloads``, shared with the apiserver) are the
jobs of that kind (a HyperJob's children are its, not here). ``get`` shows the operators' columns:
NAME, STATE (the last condition they would report: Created, Running, Restarting, Succeeded, Failed,
Suspended), AGE; ``-o yaml`` the manifest as applied (the splitter keeps it beside the Volcano Job
that runs it), with that condition in ``status.conditions``, so ``get -o yaml > f && apply -f f`` is
``unchanged``.
"""

from __future__ import annotations

from hyperjob import api, records
from hyperjob.client.workloads import applied_kind, loader, manifest, rows

from . import views
from .client import Client


def kind_named(name: str) -> str | None:
    """``MPIJob`` for ``mpijobs``, ``mpijob`` or ``MPIJob``; None for any other name."""
    lowered = name.lower()
    return next((k for k in api.KUBEFLOW_KIND_NAMES if lowered in (k.lower(), k.lower() + "s")), None)


NAMES = tuple(name for kind in api.KUBEFLOW_KIND_NAMES for name in (kind.lower(), kind.lower() + "s"))


KINDS = {
    kind.lower() + "s": views.Kind(kind.lower() + "s", kind.lower(), rows, loader(kind), None, manifest, True)
    for kind in api.KUBEFLOW_KIND_NAMES
}


async def stored_kind(client: Client, name: str) -> str | None:
    """The kind the plain job ``name`` was applied as, or None when the system has no such job."""
    doc = await client.doc(records.HYPERJOB, name, records.HyperJobDoc)
    return applied_kind(doc.manifest) if doc is not None and doc.plain else None
