"""``hyperjob describe``'s text for people, as ``kubectl describe`` prints it: ``Key:  value``
lines, a nested map as an indented section, a list of objects as a table, quantities in
Kubernetes notation (``memory: 2Ti``, not ``2199023255552.0``), times as a date and an age, and
the object's Events as a table at the end.

``render`` takes what ``views.describe`` returns and only formats it: the facts are the view's (the
same ``-o yaml`` prints), so the two never disagree. A field a section repeats from the object
itself (a HyperJob's ``status.phase``) is shown once.
"""

from __future__ import annotations

import datetime
import re
import time
from collections.abc import Mapping
from typing import Any

from hyperjob.api.quantity import format_quantity
from hyperjob.client.views import age

# Fields that are points in time (seconds since the epoch), shown as a date and an age.
TIME_FIELDS = frozenset({"created", "started", "finished", "lastTransitionTime", "lastScheduleTime", "scheduledAt"})
# Fields that are resource lists (base units), shown in Kubernetes notation.
QUANTITY_FIELDS = frozenset(
    {
        *("allocatable", "free", "used", "request", "requests", "minResources", "capacity", "allocated"),
        *("deserved", "largestNodeFree", "freeAccelerators"),
    }
)
# Fields that are durations in seconds, shown as an age.
AGE_FIELDS = frozenset({"lastReportAge", "uptime"})
# Columns left out of a table when every row has the object's own value (its namespace).
REPEATED_COLUMNS = frozenset({"namespace"})
# Columns left out of a table of objects (too wide to read there; ``-o yaml`` has them).
WIDE_COLUMNS = frozenset({"labels", "annotations", "manifest", "pods", "status", "jobStates"})
# Maps whose keys are data (cluster names, task names), not field names: shown as they are.
DATA_MAPS = frozenset({"placement", "usage", "tasks", "clusters", "links", "gangs"})
NONE = "<none>"
UNKNOWN = "<unknown>"
INDENT = "  "


def render(described: Mapping[str, Any], now: float | None = None) -> str:
    """The object's sections, then ``Events:`` (a table, or ``<none>``)."""
    now = time.time() if now is None else now
    fields = {k: v for k, v in described.items() if k != "events"}
    lines = _section(fields, {}, now, 0, data=False)
    events = described.get("events")
    if isinstance(events, list) and events:
        lines += ["Events:", *_table(events, now, 1, ("type", "reason", "age", "object", "message"))]
    else:
        lines.append(f"Events:{INDENT}{NONE}")
    return "\n".join(lines)


def _section(fields: Mapping[str, Any], parent: Mapping[str, Any], now: float, depth: int, data: bool) -> list[str]:
    """One map's lines at ``depth``: each field in order, scalars aligned; ``data``: its keys are
    names (clusters, tasks), shown as they are."""
    shown = {k: v for k, v in fields.items() if not (k in parent and parent[k] == v)}
    labels = {k: f"{k if data else _title(k)}:" for k in shown}
    width = max((len(label) for label in labels.values()), default=0)
    pad = INDENT * depth
    lines: list[str] = []
    for key, value in shown.items():
        label = labels[key]
        if isinstance(value, dict) and value and _camel(key) not in QUANTITY_FIELDS and key != "labels":
            lines += [f"{pad}{label}", *_section(value, fields, now, depth + 1, data=_camel(key) in DATA_MAPS)]
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            lines += [f"{pad}{label}", *_table(value, now, depth + 1, parent=fields)]
        elif key == "labels" and isinstance(value, dict) and value:
            first, *rest = [f"{k}={v}" for k, v in sorted(value.items())]
            lines += [f"{pad}{label.ljust(width)}  {first}", *(f"{pad}{' ' * width}  {r}" for r in rest)]
        else:
            lines.append(f"{pad}{label.ljust(width)}  {_value(key, value, now)}")
    return lines


def _table(
    rows: list[dict[str, Any]],
    now: float,
    depth: int,
    columns: tuple[str, ...] = (),
    parent: Mapping[str, Any] | None = None,
) -> list[str]:
    """Objects as a table (kubectl's header and dashes), their plain fields as columns; a column
    that only repeats the object's own value (its namespace) is left out."""
    parent = parent or {}
    keys = list(columns) or [
        k
        for k in dict.fromkeys(k for row in rows for k in row)
        if k not in WIDE_COLUMNS
        and not (k in REPEATED_COLUMNS and k in parent and all(row.get(k) == parent[k] for row in rows))
    ]
    cells = [[_value(k, row.get(k), now, brief=True) for k in keys] for row in rows]
    header = [_title(k) for k in keys]
    widths = [max(len(c) for c in column) for column in zip(header, *cells, strict=True)]
    pad = INDENT * depth

    def line(values: list[str]) -> str:
        return (pad + "   ".join(v.ljust(w) for v, w in zip(values, widths, strict=True))).rstrip()

    return [line(header), line(["-" * len(h) for h in header]), *(line(c) for c in cells)]


def _value(key: str, value: Any, now: float, brief: bool = False) -> str:
    """One field for people: a time, a resource list, a map or list in one line, or the value."""
    if value is None or value == "" or value == {} or value == []:
        return NONE
    if _camel(key) in TIME_FIELDS and isinstance(value, int | float) and not isinstance(value, bool):
        if not value:
            return UNKNOWN  # not recorded (a time of 0 would claim 1970)
        return age(now - value) if brief else f"{_date(value)} ({age(now - value)} ago)"
    if _camel(key) in AGE_FIELDS and isinstance(value, int | float) and not isinstance(value, bool):
        return age(value)
    if isinstance(value, dict):
        if _camel(key) in QUANTITY_FIELDS:
            return ", ".join(f"{r}: {_quantity(r, a)}" for r, a in sorted(value.items()))
        return ", ".join(f"{k}={_value(k, v, now, brief=True)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(_value(key, v, now, brief=True) for v in value)
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _quantity(resource: str, amount: Any) -> str:
    return format_quantity(resource, float(amount)) if isinstance(amount, int | float) else str(amount)


def _camel(key: str) -> str:
    """A field's name as the API spells it (``largest_node_free`` → ``largestNodeFree``)."""
    head, *rest = key.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _title(key: str) -> str:
    """``splitCount`` → ``Split Count``, ``min_available`` → ``Min Available``, as kubectl titles fields."""
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", key).replace("_", " ").split()
    return " ".join(w[:1].upper() + w[1:] for w in words)


def _date(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%a, %d %b %Y %H:%M:%S +0000")
