"""The system's state is its owner's alone (ADR 0006): ``hyperjob up`` keeps its home ``0700`` and
what it and its servers write there (Redis' append-only files, NATS' store, the logs) unreadable
by other local users."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from .conftest import Cli

pytestmark = pytest.mark.e2e


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_the_home_and_the_servers_files_are_the_owners_alone(cli: Cli) -> None:
    home = Path(cli.env["HYPERJOB_HOME"])
    assert mode(home) == 0o700
    redis = [p for p in (home / "redis").rglob("*") if p.is_file()]
    assert any("appendonly" in p.name for p in redis), redis  # the AOF is there to be checked
    readable = {
        str(p.relative_to(home)): oct(mode(p)) for p in [*redis, *(home / "nats").rglob("*")] if mode(p) & 0o077
    }
    assert readable == {}
