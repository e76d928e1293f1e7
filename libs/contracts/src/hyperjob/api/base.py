"""Struct conventions shared by every manifest type.

Manifests are decoded strictly: an unknown field, a wrong type or a value out of range fails with
msgspec's message, which names the field path (``$.spec.tasks[0].replicas``).
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec


class Spec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True, rename="camel", omit_defaults=True):
    """Base for every manifest struct: camelCase on the wire, strict, immutable."""


NonNegative = Annotated[int, msgspec.Meta(ge=0)]
Positive = Annotated[int, msgspec.Meta(ge=1)]
# A DNS-1123 label, as Kubernetes and Volcano's webhook require of a Job's name (its pods and
# services are named after it): lower-case alphanumerics and '-', at most 63 characters.
DNS_LABEL_MAX = 63
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
Name = Annotated[str, msgspec.Meta(min_length=1, max_length=DNS_LABEL_MAX, pattern=DNS_LABEL_PATTERN)]
Quantity = str | int | float
QuantityMap = dict[str, Quantity]
# Kubernetes fields the system carries through without reading them (probes, volumes, affinity
# terms): kept as the YAML wrote them, so their values stay untyped.
Opaque = dict[str, Any]
# A manifest as YAML or JSON decodes it, before ``api.decode`` has checked it: the edge where untyped
# data enters (files, the bus), so its values are Any. Inside, manifests are the typed structs.
RawDocument = dict[str, Any]


class ObjectMeta(Spec, frozen=True, kw_only=True):
    name: Name
    namespace: Name = "default"
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    generation: int = 0
    uid: str = ""
    creation_timestamp: str = ""


DEFAULT_NAMESPACE = "default"
# Kinds without a namespace, as in Kubernetes and Volcano: a person needs rights in every
# namespace to apply, delete or command them.
CLUSTER_SCOPED_KINDS = frozenset({"Queue", "PriorityClass"})


def object_key(namespace: str, name: str) -> str:
    """How the system keys a namespaced object: its name in ``default`` (as before namespaces
    counted), ``<namespace>/<name>`` in any other, so ``team-a/x`` and ``team-b/x`` are two objects."""
    return name if namespace in ("", DEFAULT_NAMESPACE) else f"{namespace}/{name}"


def split_key(key: str) -> tuple[str, str]:
    """``(namespace, name)`` of an ``object_key``."""
    namespace, _, name = key.rpartition("/")
    return namespace or DEFAULT_NAMESPACE, name


def fleet_name(meta: ObjectMeta) -> str:
    """The name an object goes by where only names are known (its child Jobs, their clusters'
    services): its own in ``default``, ``<namespace>-<name>`` in any other. A DNS label still, so
    child Jobs derive theirs from it (``<fleet name>-<replicated job>-<index>``)."""
    return fleet_key(meta.namespace, meta.name)


def fleet_key(namespace: str, name: str) -> str:
    """``fleet_name`` of ``namespace/name``: a plain Job's name on its cluster (ADR 0010)."""
    return object_key(namespace, name).replace("/", "-")


# A plain Job sent to its cluster under its fleet name keeps the name it was applied under here.
APPLIED_NAME_ANNOTATION = "hyperjob.io/applied-name"


class NamedObjectRef(Spec, frozen=True, kw_only=True):
    kind: str
    name: str
