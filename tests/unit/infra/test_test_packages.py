"""Tests import their helpers as modules of the ``tests`` package: no test edits ``sys.path``
(pytest puts the repository there once, ``pythonpath`` in pyproject.toml), and every folder of
tests is a package, so ``from tests.service import service_helpers`` names one module everywhere."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2]
EDITS_PATH = re.compile(r"\bsys\.path\.(insert|append|extend)\(|\bsys\.path\s*[+]?=")


def test_no_test_edits_sys_path():
    edits = [str(p.relative_to(TESTS)) for p in sorted(TESTS.rglob("*.py")) if EDITS_PATH.search(p.read_text())]
    assert edits == []


def test_every_folder_of_test_modules_is_a_package():
    folders = {p.parent for p in TESTS.rglob("test_*.py")} | {p.parent for p in TESTS.rglob("conftest.py")}
    assert sorted(str(f.relative_to(TESTS)) for f in folders if not (f / "__init__.py").is_file()) == []
