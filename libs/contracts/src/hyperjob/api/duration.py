"""Durations as users write them: a number of seconds, or Go-style text (``500ms``, ``1m30s``, ``2h``)."""

from __future__ import annotations

import re

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|us|ns|s|m|h|d)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


class DurationError(ValueError):
    pass


def parse_duration(value: str | int | float) -> float:
    """Seconds as a float; raise ``DurationError`` for anything else."""
    if isinstance(value, bool):
        raise DurationError(f"{value!r} is not a duration")
    if isinstance(value, (int, float)):
        if value < 0:
            raise DurationError(f"{value!r} is negative")
        return float(value)
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        pass
    else:
        if seconds < 0:
            raise DurationError(f"{value!r} is negative")
        return seconds
    parts = _PART.findall(text)
    if not text or "".join(n + u for n, u in parts) != text:
        raise DurationError(f"{value!r} is not a duration (expected e.g. 30, 500ms, 10s, 5m, 2h)")
    return sum(float(n) * _UNITS[u] for n, u in parts)
