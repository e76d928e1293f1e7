"""``hyperjob up`` makes a home left by an older ``up`` (``0755``, an AOF ``0644``) its owner's
alone before it starts anything, and what it creates afterwards is private too."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from hyperjob.cli.up import make_private


@pytest.fixture
def umask_kept() -> Iterator[None]:
    """``make_private`` sets the process's umask (for ``up`` and its children): put it back."""
    old = os.umask(0o022)
    os.umask(old)
    yield
    os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_an_old_home_becomes_private_and_so_does_what_is_made_after(tmp_path: Path, umask_kept: None) -> None:
    home = tmp_path / "home"
    (home / "redis").mkdir(parents=True)
    home.chmod(0o755)
    (home / "redis").chmod(0o755)
    aof = home / "redis" / "appendonly.aof"
    aof.write_text("*1\r\n")
    aof.chmod(0o644)
    make_private(home)
    assert (mode(home), mode(home / "redis"), mode(aof)) == (0o700, 0o700, 0o600)
    (home / "later.log").write_text("")
    assert mode(home / "later.log") == 0o600
