"""The chaos tests run only when asked for (``make test-chaos``, i.e. ``pytest -m chaos``): each
runs the whole system as separate processes for minutes. Their figures are printed at the end."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.service.outage_kit import REPORTED as FIGURES

HERE = Path(__file__).parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "chaos: faults of the control plane under load, on the real processes")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if "chaos" in (config.option.markexpr or ""):
        return
    mine = [item for item in items if HERE in Path(str(item.path)).parents]
    if mine:
        config.hook.pytest_deselected(items=mine)
        items[:] = [item for item in items if item not in mine]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if FIGURES:
        terminalreporter.section("chaos figures")
        for fault, figures in FIGURES.items():
            terminalreporter.write_line(f"{fault}: {json.dumps(figures, default=str)}")
