"""The workspace's layout: every member (libs/*, services/*, cli) is a distribution of its own in the
one ``hyperjob`` import namespace, and the root names each of them."""

from __future__ import annotations

import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
ROOT = tomllib.loads((REPO / "pyproject.toml").read_text())
MEMBERS = sorted(path for pattern in ROOT["tool"]["uv"]["workspace"]["members"] for path in REPO.glob(pattern))


def _name(member: Path) -> str:
    return str(tomllib.loads((member / "pyproject.toml").read_text())["project"]["name"])


def test_every_library_and_service_is_a_member():
    assert {m.relative_to(REPO).as_posix() for m in MEMBERS} >= {"libs/contracts", "libs/runtime", "cli"}
    services = {p.name for p in (REPO / "services").iterdir() if p.is_dir()}
    assert services <= {m.name for m in MEMBERS}
    assert not (REPO / "src").exists()  # no code outside the members


def test_no_member_ships_the_namespaces_own_init_which_would_hide_the_others():
    for member in MEMBERS:
        for namespace in (member / "src" / "hyperjob", member / "src" / "hyperjob" / "services"):
            assert not (namespace / "__init__.py").exists(), namespace / "__init__.py"


def test_the_root_depends_on_every_member_and_finds_each_in_the_workspace():
    names = {_name(m) for m in MEMBERS}
    assert set(ROOT["project"]["dependencies"]) == names
    assert set(ROOT["tool"]["uv"]["sources"]) == names


def test_a_services_member_holds_that_service_only():
    for member in (REPO / "services").iterdir():
        packages = {p.name for p in (member / "src" / "hyperjob").iterdir() if p.name != "__pycache__"}
        assert packages == {"services"}, member
        [service] = [p.name for p in (member / "src" / "hyperjob" / "services").iterdir() if p.name != "__pycache__"]
        assert service == member.name.replace("-", "_")
