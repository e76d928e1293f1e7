"""What the documentation and the docstrings name exists: the store's API as the code has it
(``Store.commit(Commit)``, not an ``apply`` of old), and no file outside the repository (a design
card or a note a fresh clone does not have)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hyperjob import store

REPO = Path(__file__).resolve().parents[3]
SKIP = {".venv", ".git", "node_modules", ".hyperjob"}
TEXTS = sorted(
    p
    for pattern in ("**/*.md", "libs/*/src/**/*.py", "services/*/src/**/*.py", "cli/src/**/*.py")
    for p in REPO.glob(pattern)
    if not SKIP & set(p.relative_to(REPO).parts)
)
# What ``store.<name>`` may name: a method of the Store protocol, or a module of the package.
STORE_NAMES = set(dir(store.Store)) | {p.stem for p in Path(store.__file__).parent.glob("*.py")}
STORE_CALL = re.compile(r"\bstore\.([a-z_]+)\b")
OUTSIDE = re.compile(r"\.\./shared/|\bshared/(spec|design|scenarios|tools)/|ARCHITECTURE\.md|PERFORMANCE-NOTES\.md")


def named_store_api(text: str) -> set[str]:
    return set(STORE_CALL.findall(text))


@pytest.mark.parametrize("path", TEXTS, ids=lambda p: str(p.relative_to(REPO)))
def test_the_store_api_a_text_names_exists(path):
    unknown = named_store_api(path.read_text()) - STORE_NAMES
    assert not unknown, f"names store.{', store.'.join(sorted(unknown))}, which the store does not have"


@pytest.mark.parametrize("path", TEXTS, ids=lambda p: str(p.relative_to(REPO)))
def test_no_text_points_outside_the_repository(path):
    assert not OUTSIDE.findall(path.read_text())


def test_the_checks_catch_what_they_guard_against():
    assert named_store_api("then one `store.apply_batch` and") - STORE_NAMES == {"apply_batch"}
    assert OUTSIDE.search("as shared/spec/scenario-format.md says")
    assert OUTSIDE.search("(ARCHITECTURE.md, one core)")
