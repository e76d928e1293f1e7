"""``as=Table``: what kubectl prints, as ``hyperjob get`` prints it (the same rows functions).
Columns only ``-o wide`` shows have priority 1; kubectl adds NAMESPACE itself (``-A``) from each
row's object metadata."""

from __future__ import annotations

from typing import Any

from .resources import Resource, View

Table = dict[str, Any]


def table(resource: Resource, items: list[View], objects: list[View], resource_version: str) -> Table:
    """The Table of ``items`` (views, for the cells) whose API objects are ``objects``."""
    narrow, _ = resource.rows([], False)
    header, rows = resource.rows(items, True)
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
        "rows": [{"cells": cells, "object": partial(obj)} for cells, obj in zip(rows, objects, strict=True)],
    }


def partial(obj: View) -> View:
    """What a Table row carries of its object (``includeObject=Metadata``, kubectl's default)."""
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}


def wants_table(accept: str) -> bool:
    """Whether the client asked for a Table (kubectl: ``application/json;as=Table;v=v1;g=meta.k8s.io``)."""
    return any("as=Table" in part.replace(" ", "") for part in accept.split(","))
