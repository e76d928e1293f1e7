"""Make ``libs/`` importable when the editable install predates the package (a fresh checkout)."""

from __future__ import annotations

import importlib.util
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parents[3]

for package in ("simulator", "schedcore", "jobcore", "fleetcore"):
    if importlib.util.find_spec(package) is None or getattr(importlib.util.find_spec(package), "origin", 1) is None:
        if str(REPO / "libs") not in sys.path:
            sys.path.insert(0, str(REPO / "libs"))
