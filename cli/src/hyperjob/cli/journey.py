"""``hyperjob trace NAME``: one life of a HyperJob as a waterfall of spans in the terminal (the
spans of ``client.spans``, read from the system's own event log, so it works without a tracing
backend), and the trace id with its link in Jaeger where a Jaeger answers.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from urllib.parse import urlsplit

from hyperjob.client.spans import Span, Step, lives, load, main_trace, steps, waterfall

__all__ = ["Span", "Step", "jaeger_line", "jaeger_url", "lives", "load", "main_trace", "render", "steps", "waterfall"]

BAR_WIDTH = 32
NAME_WIDTH = 60
JAEGER_UI_PORT = 16686  # Jaeger's UI and query API, beside its OTLP receiver


# -- Jaeger -------------------------------------------------------------------------------------


def jaeger_url(given: str | None, otlp_endpoint: str | None) -> str | None:
    """Where Jaeger's UI should be: the URL given, else the OTLP endpoint's host on Jaeger's UI
    port (spans go there), else None (no spans are exported: there is nothing to look up)."""
    if given:
        return given.rstrip("/")
    if not otlp_endpoint:
        return None
    parts = urlsplit(otlp_endpoint)
    return f"{parts.scheme or 'http'}://{parts.hostname or 'localhost'}:{JAEGER_UI_PORT}"


def jaeger_answers(url: str, timeout: float = 1.0) -> bool:
    """Whether a Jaeger query API answers at ``url`` (its service list), within ``timeout`` seconds."""
    try:
        with urllib.request.urlopen(f"{url}/api/services", timeout=timeout) as response:  # noqa: S310 - http(s) only
            return bool(response.status == 200)
    except (OSError, ValueError):
        return False


def jaeger_line(trace: str, url: str | None, reachable: bool) -> str:
    """The header line that says where to see ``trace`` in Jaeger, or why nowhere."""
    if not trace:
        return "jaeger:   no trace id (published without a traceparent)"
    if url is None:
        return (
            "jaeger:   none configured (spans are exported only where OTEL_EXPORTER_OTLP_ENDPOINT is set; --jaeger URL)"
        )
    if not reachable:
        return f"jaeger:   no Jaeger answers at {url}: no link"
    return f"jaeger:   {url}/trace/{trace}"


# -- rendering ------------------------------------------------------------------------------------


def render(found: list[Step], hyperjob: str, jaeger: tuple[str | None, bool] = (None, False), life: int = 0) -> str:
    """The waterfall of one life (``life``: 1 the oldest, 0 the latest): a header with its trace id,
    the Jaeger link (``jaeger``: the UI's URL and whether it answers) and the other lives' traces,
    then one row per span."""
    every = lives(found, hyperjob)
    if not every:
        return f"no events of HyperJob {hyperjob!r} in the event log"
    number = life if 0 < life <= len(every) else len(every)
    mine = every[number - 1]
    trace = main_trace(mine)
    root = waterfall(mine, hyperjob)
    lines = [
        f"HyperJob {hyperjob}, life {number} of {len(every)}: {len(list(root.walk()))} spans in {root.duration:.3f}s",
        f"trace id: {trace or '(none: published without a traceparent)'}",
        jaeger_line(trace, *jaeger),
    ]
    for other, steps_of in enumerate(every, start=1):
        if other != number:
            lines.append(f"life {other}: trace {main_trace(steps_of) or '(none)'} (--life {other})")
    return "\n".join([*lines, "", *_rows(root)])


def _rows(root: Span) -> list[str]:
    walked = list(_tree(root))
    names = [lead + ("! " if span.warning else "") + span.name for lead, span in walked]
    width = min(NAME_WIDTH, max(len(n) for n in names))
    total = max(root.duration, 1e-9)
    rows = [f"{'SPAN':<{width}}  {'SERVICE':<18} {'START':>9} {'DURATION':>9}  WATERFALL"]
    for name, (_, span) in zip(names, walked, strict=True):
        offset, took = span.start - root.start, span.duration
        rows.append(
            f"{name[:width]:<{width}}  {span.service[:18]:<18} {'+' + format(offset, '.3f') + 's':>9} "
            f"{(format(took, '.3f') + 's') if took else '·':>9}  |{_bar(offset, offset + took, total)}|"
        )
    return rows


def _tree(span: Span, lead: str = "", branch: str = "") -> Iterator[tuple[str, Span]]:
    """Each span with the tree drawn before its name (``├─``/``└─`` under its parent)."""
    yield lead + branch, span
    below = lead + {"": "", "├─ ": "│  ", "└─ ": "   "}[branch]
    for i, child in enumerate(span.children):
        yield from _tree(child, below, "└─ " if i == len(span.children) - 1 else "├─ ")


def _bar(begin: float, end: float, total: float) -> str:
    """From ``begin`` to ``end`` (seconds after the life began) on a ``BAR_WIDTH`` scale; an
    instant is one mark."""
    left = min(BAR_WIDTH - 1, int(begin / total * BAR_WIDTH))
    if end == begin:
        return " " * left + "◆" + " " * (BAR_WIDTH - left - 1)
    right = min(BAR_WIDTH, max(left + 1, round(end / total * BAR_WIDTH)))
    return " " * left + "█" * (right - left) + " " * (BAR_WIDTH - right)
