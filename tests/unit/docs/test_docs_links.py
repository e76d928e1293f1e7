"""Every relative link of the repository's Markdown points at a file of the repository (a fresh clone
has the API reference and the scenario format it links to), and the README links to both."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
LINK = re.compile(r"\]\(([^)\s]+)\)")
MARKDOWN = sorted(
    p for p in REPO.rglob("*.md") if not {".venv", ".git", "node_modules", ".hyperjob"} & set(p.relative_to(REPO).parts)
)


def relative_links(path: Path) -> list[str]:
    return [t for t in LINK.findall(path.read_text()) if not re.match(r"[a-z]+:|#", t)]


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: str(p.relative_to(REPO)))
def test_relative_links_stay_inside_the_repository_and_exist(path):
    for target in relative_links(path):
        resolved = (path.parent / target.split("#")[0]).resolve()
        assert resolved.is_relative_to(REPO), f"{target} leaves the repository"
        assert resolved.exists(), f"{target} does not exist"


def test_the_readme_points_to_the_api_reference_and_the_scenario_format_in_docs():
    readme = (REPO / "README.md").read_text()
    assert "](docs/api-reference.md)" in readme and "](docs/scenario-format.md)" in readme
    assert "../shared/" not in readme
