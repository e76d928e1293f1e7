"""Kubernetes resource quantities (``500m``, ``64Gi``, ``1e3``) as plain floats in base units.

Base units: ``cpu`` in cores (``500m`` is 0.5), ``memory`` and storage in bytes, every other
resource (``nvidia.com/gpu``, ``pods``) as a plain number. A ``ResourceList`` is a mapping from
resource name to that float; it is what every core works with.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping

ResourceList = dict[str, float]
# Kubernetes keeps a quantity in an int64 of its smallest unit; beyond this no sum, product or
# conversion of resources stays exact or even finite (``1e308`` overflowed the splitter's sums).
MAX_QUANTITY = 2.0**63

_SUFFIXES: dict[str, float] = {
    "n": 1e-9,
    "u": 1e-6,
    "m": 1e-3,
    "": 1.0,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "P": 1e15,
    "E": 1e18,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
    "Pi": 2.0**50,
    "Ei": 2.0**60,
}
_QUANTITY = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]))?$")


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity."""


def parse_quantity(value: str | int | float) -> float:
    """Parse one quantity into base units; raise ``QuantityError`` naming the bad text."""
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, (int, float)):
        return _bounded(value, value)
    if not isinstance(value, str):
        raise QuantityError(f"{value!r} is not a quantity")
    match = _QUANTITY.match(value.strip()[:100])
    if not match:
        raise QuantityError(f"{value[:100]!r} is not a quantity (expected e.g. 500m, 2, 64Gi, 1e3)")
    number, exponent, suffix = match.groups()
    if exponent:
        return _bounded(float(number + exponent), value)
    return _bounded(float(number) * _SUFFIXES[suffix or ""], value)


def _bounded(amount: float | int, written: object) -> float:
    try:
        result = float(amount)
    except OverflowError:  # an int too large for a float
        result = math.inf
    if not math.isfinite(result):
        raise QuantityError(f"{written!r} is not a finite quantity")
    if abs(result) > MAX_QUANTITY:
        raise QuantityError(f"{written!r} is too large (at most {MAX_QUANTITY:.4g})")
    return result


def parse_resource_list(raw: Mapping[str, str | int | float] | None) -> ResourceList:
    """Parse a manifest's ``{name: quantity}`` map; errors name the resource."""
    result: ResourceList = {}
    for name, value in (raw or {}).items():
        try:
            result[name] = parse_quantity(value)
        except QuantityError as exc:
            raise QuantityError(f"{name}: {exc}") from None
    return result


def add(*lists: Mapping[str, float]) -> ResourceList:
    """Sum resource lists dimension by dimension."""
    total: ResourceList = {}
    for resources in lists:
        for name, amount in resources.items():
            total[name] = total.get(name, 0.0) + amount
    return total


def scale(resources: Mapping[str, float], factor: float) -> ResourceList:
    return {name: amount * factor for name, amount in resources.items()}


def total(lists: Iterable[Mapping[str, float]]) -> ResourceList:
    return add(*lists)


def fits(request: Mapping[str, float], free: Mapping[str, float], tolerance: float = 1e-9) -> bool:
    """True when every requested dimension is available (a missing dimension is zero)."""
    return all(amount <= free.get(name, 0.0) + tolerance for name, amount in request.items() if amount > 0)


def format_quantity(name: str, amount: float) -> str:
    """Render a base-unit amount back in Kubernetes notation, for people."""
    if name == "cpu":
        return f"{amount:g}" if float(amount).is_integer() else f"{round(amount * 1000)}m"
    if name in ("memory", "ephemeral-storage"):
        for suffix in ("Ti", "Gi", "Mi", "Ki"):
            unit = _SUFFIXES[suffix]
            if amount >= unit and float(amount / unit).is_integer():
                return f"{int(amount / unit)}{suffix}"
    return f"{amount:g}"
