"""Field managers at the edge: who a write is by (``fieldManager``), and the managers each write
leaves, through ``fields`` (the pure part); ``Objects.record_managers`` keeps them once the
splitter has accepted the write."""

from __future__ import annotations

import datetime
from typing import Any

from starlette.requests import Request

from . import fields
from .resources import Resource
from .status import apply_conflict, bad_request, invalid_option

Body = dict[str, Any]
APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
MAX_MANAGER = 128  # Kubernetes' limit on a field manager's name
OPTIONS = {"POST": "CreateOptions", "PUT": "UpdateOptions", "PATCH": "PatchOptions"}  # what a 422 names


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def manager(request: Request, *, applying: bool) -> str:
    """The manager the request writes as; 422 naming the option, as Kubernetes answers, for an
    apply without ``fieldManager``, a name too long, or ``force`` on a patch other than an apply."""
    query = request.query_params
    options = OPTIONS.get(request.method, "PatchOptions")
    named = query.get("fieldManager")
    if applying and not named:
        raise invalid_option(
            options, "fieldManager", "FieldValueRequired", "Required value: is required for apply patch"
        )
    if named and len(named) > MAX_MANAGER:
        message = f"Too long: may not be more than {MAX_MANAGER} bytes"
        raise invalid_option(options, "fieldManager", "FieldValueTooLong", message)
    if not applying and request.method == "PATCH" and query.get("force") not in (None, ""):
        raise invalid_option(
            options, "force", "FieldValueForbidden", "Forbidden: may not be specified for non-apply patch"
        )
    return fields.manager_of(named, request.headers.get("user-agent", ""))


def updated(request: Request, resource: Resource, live: Body | None, new: Body) -> fields.Owners:
    """The owners once the request's manager has written ``new`` (a create, update or patch): it
    owns what it added or changed."""
    owners = fields.starting_owners(live, new)
    return fields.update(live or {}, new, owners, manager(request, applying=False), resource.group_version, now())


def applied(request: Request, resource: Resource, live: Body | None, wanted: Body) -> tuple[Body, fields.Owners]:
    """A server-side apply of ``wanted`` to ``live`` (None: a create): the object and its owners.
    409 naming each field another manager owns and the apply changes, unless ``force``; 400 when
    the configuration sets managedFields."""
    who = manager(request, applying=True)
    metadata = wanted.get("metadata")
    if isinstance(metadata, dict) and metadata.get("managedFields") is not None:
        raise bad_request("metadata.managedFields must be nil")
    force = request.query_params.get("force") in ("true", "1")
    base, config = in_one_form(
        {k: v for k, v in (live or {}).items() if k != "status"}, {k: v for k, v in wanted.items() if k != "status"}
    )
    try:
        owners = fields.starting_owners(base, {})
        merged, owners = fields.apply_moving_from_client_side(
            base, config, owners, who, resource.group_version, force=force, now=now()
        )
    except fields.Conflicts as exc:
        raise apply_conflict(exc.message(), exc.causes()) from None
    return merged, owners


def in_one_form(live: Body, wanted: Body) -> tuple[Body, Body]:
    """The live object and the configuration to merge into it, in one form. A HyperJob has two
    (the conceptual ``batch.volcano.sh`` one and the upstream ``training.volcano.sh`` one, which
    the services store) whose fields do not map one to one, and no conversion turns the stored
    form back into the conceptual one. A configuration of the other form replaces the object's
    body (its metadata kept, the managers of the other form's fields dropped), as if applied
    afresh: merged field by field, the two forms made an object neither accepts. One that sets
    metadata only (labels; kubectl's move from client-side apply) goes into the object as it is."""
    version = wanted.get("apiVersion")
    if not live or live.get("apiVersion") == version:
        return live, wanted
    if all(key in ("apiVersion", "kind", "metadata") for key in wanted):
        return live, {**wanted, "apiVersion": live.get("apiVersion")}
    metadata = dict(live.get("metadata") or {})
    entries = metadata.get("managedFields") or []
    metadata["managedFields"] = [e for e in entries if isinstance(e, dict) and e.get("apiVersion") == version]
    return {"apiVersion": version, "kind": wanted.get("kind", live.get("kind")), "metadata": metadata}, wanted


def accepted_patches(resource: Resource) -> tuple[str, ...]:
    """The patch types a resource takes, in Kubernetes' order: a strategic merge patch for its
    own kinds only."""
    strategic = (STRATEGIC_PATCH,) if resource.builtin else ()
    return (JSON_PATCH, MERGE_PATCH, *strategic, APPLY_PATCH)
