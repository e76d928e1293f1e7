"""State across ``down``/``up`` (issue 32, item 5): ``down`` keeps it and says so, ``down --purge``
and ``up --fresh`` remove it, and credentials, users and logs stay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from hyperjob.cli import main as cli_main
from hyperjob.cli.up import UpError


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A home an earlier ``up`` left: NATS' and Redis' data, credentials, logs, its endpoints."""
    home = tmp_path / "home"
    monkeypatch.setenv("HYPERJOB_HOME", str(home))
    for state in ("nats/jetstream", "redis", "logs"):
        (home / state).mkdir(parents=True)
    (home / "redis" / "appendonly.aof").write_text("state")
    (home / "credentials.json").write_text("{}")
    (home / "endpoints.json").write_text("{}")
    return home


def left(home: Path) -> set[str]:
    return {p.name for p in home.iterdir()}


def test_down_keeps_the_state_and_its_help_says_so(home: Path) -> None:
    result = CliRunner().invoke(cli_main.main, ["down"])
    help_text = " ".join(CliRunner().invoke(cli_main.main, ["down", "--help"]).output.split())

    assert result.exit_code == 0
    assert left(home) == {"nats", "redis", "logs", "credentials.json", "endpoints.json"}
    assert "is kept: the next `up` goes on with it" in help_text and "--purge removes it" in help_text


def test_down_purge_removes_the_state_but_not_credentials_or_logs(home: Path) -> None:
    result = CliRunner().invoke(cli_main.main, ["down", "--purge"])

    assert result.exit_code == 0
    assert f"state removed from {home}" in result.output
    assert left(home) == {"logs", "credentials.json"}


def test_up_fresh_starts_from_empty_state(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[set[str]] = []

    class Stopped:
        """The system as far as ``up`` gets here: what the home holds when it would start."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            pass

        def start(self, *args: Any) -> None:
            seen.append(left(home))
            raise UpError("stopped by the test")

    monkeypatch.setattr(cli_main, "System", Stopped)
    CliRunner().invoke(cli_main.main, ["up"])
    CliRunner().invoke(cli_main.main, ["up", "--fresh"])

    assert "nats" in seen[0] and "redis" in seen[0]  # without --fresh: kept
    assert "nats" not in seen[1] and "redis" not in seen[1] and "credentials.json" in seen[1]
