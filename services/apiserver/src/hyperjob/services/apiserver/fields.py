"""Field managers and server-side apply, as Kubernetes' structured-merge-diff does them (pure).

An object's ``metadata.managedFields`` says which manager owns which fields: one entry per manager
and operation (``Apply`` for a server-side apply, ``Update`` for a create, update or patch, that one
per API version too), its fields a set of paths written as FieldsV1 (``{"f:spec": {"f:x": {}}}``;
``"."`` marks a path owned as a whole that also has owned children).

- **Update** (``update``): the fields the request added or changed become the updater's and are
  taken from any other manager, without a conflict; the fields it removed are no one's any more.
- **Apply** (``apply``): the applied configuration is merged into the object (maps key by key;
  lists, these kinds' being atomic as a CRD's are by default, as a whole); the applier owns
  exactly the fields it sent; a field it owned, sent no more and no other manager owns is removed.
  A field the apply changes that another manager owns is a conflict, unless ``force`` takes it.

Which fields count: not ``apiVersion``, ``kind``, the name, namespace and the metadata the server
sets, nor ``status`` (the system's, as a CRD's with a status subresource is reset on the main
resource). Objects are JSON values; a path is the field names from the object's root.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, replace
from typing import Any

from .patch import merge_patch

Obj = dict[str, Any]
Path = tuple[str, ...]
Fields = frozenset[Path]
APPLY, UPDATE = "Apply", "Update"
# Metadata the server sets: never owned (structured-merge-diff's ``stripMeta``).
SERVER_METADATA = frozenset({"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
                             "managedFields", "selfLink", "deletionTimestamp",
                             "deletionGracePeriodSeconds"})  # fmt: skip


@dataclass(frozen=True)
class Owner:
    """One ``managedFields`` entry."""

    manager: str
    operation: str  # APPLY or UPDATE
    api_version: str
    fields: Fields
    time: str = ""

    @property
    def key(self) -> tuple[str, str, str]:
        """What tells entries apart: an applier is one entry whatever version it applies in."""
        return self.manager, self.operation, "" if self.operation == APPLY else self.api_version

    def described(self) -> str:
        """As a conflict names it: ``"kubectl"``, or ``"kubectl-edit" using v1`` for an updater."""
        name = json.dumps(self.manager)
        return name if self.operation == APPLY else f"{name} using {self.api_version}"


Owners = dict[tuple[str, str, str], Owner]


@dataclass(frozen=True)
class Conflict:
    owner: Owner
    path: Path


class Conflicts(Exception):
    """An apply that would change fields other managers own: 409, each field and manager named."""

    def __init__(self, conflicts: list[Conflict]) -> None:
        self.conflicts = sorted(conflicts, key=lambda c: (c.owner.key, c.path))
        super().__init__(self.message())

    def message(self) -> str:
        """Kubernetes' wording (``Apply failed with 1 conflict: conflict with "a": .spec.x``)."""
        if len(self.conflicts) == 1:
            only = self.conflicts[0]
            return f"Apply failed with 1 conflict: conflict with {only.owner.described()}: {show(only.path)}"
        lines: list[str] = []
        for owner in dict.fromkeys(c.owner for c in self.conflicts):
            lines.append(f"conflicts with {owner.described()}:")
            lines += [f"- {show(c.path)}" for c in self.conflicts if c.owner == owner]
        return f"Apply failed with {len(self.conflicts)} conflicts: " + "\n".join(lines)

    def causes(self) -> list[Obj]:
        return [
            {"reason": "FieldManagerConflict", "message": f"conflict with {c.owner.described()}", "field": show(c.path)}
            for c in self.conflicts
        ]


def show(path: Path) -> str:
    """A path as Kubernetes prints one: ``.spec.replicas``."""
    return "".join(f".{name}" for name in path)


# -- which fields an object has, and what changed --------------------------------------------------


def owned_view(obj: Obj) -> Obj:
    """The part of ``obj`` whose fields are owned (see the module's docstring)."""
    view = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "status")}
    metadata = view.get("metadata")
    if isinstance(metadata, dict):
        kept = {k: v for k, v in metadata.items() if k not in SERVER_METADATA}
        view["metadata"] = kept
        if not kept:
            del view["metadata"]
    return view


def field_set(obj: Obj, prefix: Path = ()) -> set[Path]:
    """The fields an applied configuration sets: its leaves (a scalar, a list as a whole), as
    structured-merge-diff's ``ToFieldSet`` (an empty map sets none)."""
    out: set[Path] = set()
    for key, value in obj.items():
        if isinstance(value, dict):
            out |= field_set(value, (*prefix, key))
        else:
            out.add((*prefix, key))
    return out


@dataclass(frozen=True)
class Comparison:
    added: frozenset[Path]
    modified: frozenset[Path]
    removed: frozenset[Path]


def compare(old: Obj, new: Obj) -> Comparison:
    """What changed from ``old`` to ``new``, leaf by leaf; a map added or removed is itself in
    ``added`` or ``removed`` too, with its leaves (structured-merge-diff's ``Compare``)."""
    added: set[Path] = set()
    modified: set[Path] = set()
    removed: set[Path] = set()

    def walk(lhs: Any, rhs: Any, path: Path) -> None:
        if isinstance(lhs, dict) and isinstance(rhs, dict) and (lhs or rhs):
            for key in lhs.keys() | rhs.keys():
                walk(lhs.get(key), rhs.get(key), (*path, key))
            return
        if lhs is None and rhs is not None:
            added.update(_paths(rhs, path))
        elif rhs is None and lhs is not None:
            removed.update(_paths(lhs, path))
        elif lhs != rhs:
            modified.add(path)

    walk(old, new, ())
    return Comparison(frozenset(added), frozenset(modified), frozenset(removed))


def _paths(value: Any, path: Path) -> set[Path]:
    """``path`` and, for a map, every path below it."""
    out = {path}
    if isinstance(value, dict):
        for key, inner in value.items():
            out |= _paths(inner, (*path, key))
    return out


def _remove(obj: Obj, path: Path) -> Obj:
    """``obj`` without the field at ``path`` (its parent maps kept)."""
    if not path or not isinstance(obj.get(path[0]), dict) and len(path) > 1:
        return obj
    if len(path) == 1:
        return {k: v for k, v in obj.items() if k != path[0]}
    return {**obj, path[0]: _remove(obj[path[0]], path[1:])}


def _value(obj: Any, path: Path) -> Any:
    for name in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(name)
    return obj


# -- update and apply -----------------------------------------------------------------------------


def update(live: Obj, new: Obj, owners: Owners, manager: str, api_version: str, now: str) -> Owners:
    """The owners once ``manager`` has written ``new`` over ``live`` (a create: ``live`` empty): the
    fields it added or changed are its, taken from the others; the fields it removed, no one's."""
    changed = compare(owned_view(live), owned_view(new))
    taken = changed.added | changed.modified
    mine = Owner(manager, UPDATE, api_version, frozenset(), now)
    before = owners.get(mine.key, mine)
    result = _without(owners, mine.key, taken | changed.removed)
    fields = (before.fields | taken) - changed.removed
    if fields:
        stamp = now if fields != before.fields or taken or changed.removed else before.time
        result[mine.key] = replace(before, api_version=api_version, fields=fields, time=stamp)
    return result


def apply(
    live: Obj, config: Obj, owners: Owners, manager: str, api_version: str, *, force: bool, now: str
) -> tuple[Obj, Owners]:
    """The object and its owners once ``manager`` has applied ``config`` to ``live`` (a create:
    ``live`` empty), or Conflicts naming the fields other managers own that it would change."""
    key = (manager, APPLY, "")
    before = owners.get(key)
    fields = frozenset(field_set(owned_view(config)))
    merged = merge_patch(live, config)
    others = {k: o for k, o in owners.items() if k != key}
    kept = fields.union(*(o.fields for o in others.values()))
    for path in sorted(before.fields - kept if before else ()):
        if not isinstance(_value(merged, path), dict) and not any(p[: len(path)] == path for p in kept):
            merged = _remove(merged, path)  # it sent the field no more and no one else owns it
    changed = compare(owned_view(live), owned_view(merged))
    touched = changed.added | changed.modified
    conflicts = [Conflict(o, p) for o in others.values() for p in sorted(o.fields & touched)]
    if conflicts and not force:
        raise Conflicts(conflicts)
    result = _without(others, key, touched | changed.removed)
    if fields:
        same = before is not None and before.fields == fields and not touched and not changed.removed
        result[key] = Owner(manager, APPLY, api_version, fields, before.time if same and before else now)
    return merged, result


KUBECTL = "kubectl"  # the manager of ``kubectl apply --server-side``
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def apply_moving_from_client_side(
    live: Obj, config: Obj, owners: Owners, manager: str, api_version: str, *, force: bool, now: str
) -> tuple[Obj, Owners]:
    """``apply``, and kubectl's move from client-side to server-side apply, as Kubernetes'
    ``lastAppliedManager`` does: an apply by ``kubectl`` takes without a conflict the fields the
    object's last-applied configuration sets to the values they have (what ``kubectl apply`` set);
    any other conflict still stands. Another manager's name opts out."""
    try:
        return apply(live, config, owners, manager, api_version, force=force, now=now)
    except Conflicts as exc:
        if manager != KUBECTL:
            raise
        allowed = _last_applied_fields(live)
        left = [c for c in exc.conflicts if c.path not in allowed]
        if left:
            raise Conflicts(left) from None
    return apply(live, config, owners, manager, api_version, force=True, now=now)


def _last_applied_fields(live: Obj) -> frozenset[Path]:
    """The fields ``live``'s last-applied configuration sets to the values they have."""
    try:
        last = json.loads(((live.get("metadata") or {}).get("annotations") or {})[LAST_APPLIED])
    except (KeyError, TypeError, ValueError):
        return frozenset()
    if not isinstance(last, dict):
        return frozenset()
    written = owned_view(last)
    differ = compare(written, owned_view(live))
    return frozenset(field_set(written)) - differ.added - differ.modified - differ.removed


def _without(owners: Owners, keep: tuple[str, str, str], paths: frozenset[Path]) -> Owners:
    """Every owner but ``keep`` without ``paths``; an owner left with no field is dropped."""
    result: Owners = {}
    for key, owner in owners.items():
        fields = owner.fields if key == keep else owner.fields - paths
        if fields:
            result[key] = owner if fields == owner.fields else replace(owner, fields=fields)
    return result


# -- managedFields as the API writes them ---------------------------------------------------------


def encode_fields(fields: Fields) -> Obj:
    """FieldsV1: ``{"f:spec": {"f:x": {}}}``, ``"."`` where an owned path has owned children."""
    tree: Obj = {}
    for path in fields:
        node = tree
        for name in path:
            node = node.setdefault(f"f:{name}", {})
    for path in fields:
        node = tree
        for name in path:
            node = node[f"f:{name}"]
        if node:
            node["."] = {}
    return _sorted(tree)


def _sorted(tree: Obj) -> Obj:
    return {k: _sorted(tree[k]) for k in sorted(tree, key=lambda k: (k != ".", k))}


def decode_fields(tree: Any, prefix: Path = ()) -> Fields:
    """The paths of a FieldsV1 tree; ValueError when it is not one. Elements other than fields
    (``k:``, ``v:``, ``i:``: list items, which these kinds' atomic lists never have) are left out."""
    if not isinstance(tree, dict):
        raise ValueError("fieldsV1: must be an object")
    out: set[Path] = set()
    for key, inner in tree.items():
        if key == "." and prefix:
            out.add(prefix)
        elif key.startswith("f:"):
            path = (*prefix, key[2:])
            out |= decode_fields(inner, path) if inner else {path}
    return frozenset(out)


def to_entries(owners: Owners) -> list[Obj]:
    """``metadata.managedFields``, in Kubernetes' order (appliers first, then by time and name)."""
    ordered = sorted(owners.values(), key=lambda o: (o.operation, o.time, o.manager, o.api_version))
    return [
        {
            "manager": o.manager,
            "operation": o.operation,
            "apiVersion": o.api_version,
            "time": o.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": encode_fields(o.fields),
        }
        for o in ordered
    ]


def from_entries(entries: Any) -> Owners:
    """The owners ``metadata.managedFields`` lists; ValueError naming what is wrong."""
    if not isinstance(entries, list):
        raise ValueError("metadata.managedFields: must be a list")
    owners: Owners = {}
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ValueError(f"metadata.managedFields[{i}]: must be an object")
        operation, manager = entry.get("operation"), entry.get("manager", "")
        if operation not in (APPLY, UPDATE) or not isinstance(manager, str):
            raise ValueError(f"metadata.managedFields[{i}].operation: must be Apply or Update")
        fields = decode_fields(entry.get("fieldsV1") or {})
        owner = Owner(manager, operation, str(entry.get("apiVersion", "")), fields, str(entry.get("time") or ""))
        owners[owner.key] = owner
    return owners


def is_reset(entries: Any) -> bool:
    """Whether a request sets ``managedFields`` to ``[]`` or ``[{}]``: every manager forgotten."""
    return isinstance(entries, list) and (entries == [] or entries == [{}])


def manager_of(field_manager: str | None, user_agent: str) -> str:
    """The manager a request writes as: its ``fieldManager``, else its user agent's first part
    (``kubectl`` of ``kubectl/v1.32.0 (linux/amd64) ...``), as Kubernetes names it."""
    return field_manager or user_agent.split("/")[0][:128]


def starting_owners(live: Obj | None, new: Obj) -> Owners:
    """The owners a write starts from, as Kubernetes decides: the request's ``managedFields`` when
    it sets some (kubectl's migration of client-side apply to server-side apply does), none when it
    sets ``[]`` or ``[{}]``, else (none set, or a list that is not managedFields) the live object's."""
    written = (new.get("metadata") or {}).get("managedFields")
    if is_reset(written):
        return {}
    if written:
        with contextlib.suppress(ValueError):
            return from_entries(written)
    return from_entries(((live or {}).get("metadata") or {}).get("managedFields") or [])
