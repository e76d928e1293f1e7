"""``as=Table``: what kubectl prints, as ``hyperjob get`` prints it (the same rows functions).
Columns only ``-o wide`` shows have priority 1; kubectl adds NAMESPACE itself (``-A``) from each
row's object metadata."""

from __future__ import annotations

from typing import Any

from .resources import Resource, View

Table = dict[str, Any]


def table(resource: Resource, items: list[View], objects: list[View], resource_version: str) -> Table:
    """The Table of ``items`` (views, for the cells) whose API objects are ``objects``; an object
    without a view (one deleted while no apiserver ran: only its name is known) has its name only."""
    narrow, _ = resource.rows([], False)
    header, rows = resource.rows([i for i in items if i], True)
    known = iter(rows)
    cells = [next(known) if item else [obj["metadata"]["name"]] + [""] * (len(header) - 1)
             for item, obj in zip(items, objects, strict=True)]  # fmt: skip
    columns = [
        {
            "name": name.title() if name.isupper() else name,
            "type": "string",
            "format": "name" if i == 0 else "",
            "description": "",
            "priority": 0 if name in narrow else 1,
        }
        for i, name in enumerate(header)
    ]
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": columns,
        "rows": [{"cells": row, "object": partial(obj)} for row, obj in zip(cells, objects, strict=True)],
    }


def partial(obj: View) -> View:
    """What a Table row carries of its object (``includeObject=Metadata``, kubectl's default)."""
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}


def wants_table(accept: str) -> bool:
    """Whether the client asked for a Table (kubectl: ``application/json;as=Table;v=v1;g=meta.k8s.io``)."""
    return any("as=Table" in part.replace(" ", "") for part in accept.split(","))
