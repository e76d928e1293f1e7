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
Opaque = dict[str, Any]


class ObjectMeta(Spec, frozen=True, kw_only=True):
    name: Name
    namespace: Name = "default"
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    generation: int = 0
    uid: str = ""
    creation_timestamp: str = ""


class NamedObjectRef(Spec, frozen=True, kw_only=True):
    kind: str
    name: str
