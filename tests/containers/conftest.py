"""The compose deployment under podman, built from a local Debian base (tests/containers/podman.py).

These tests need root, podman, runc, debootstrap and podman-compose, so plain ``make test`` leaves
them out: they are deselected unless the ``-m`` expression names their marker.
``make test-containers`` runs ``-m containers`` (in CI); ``make test-container-faults`` runs
``-m container_faults`` (the outage tests that wait for issue 14). The build times and each test's
figures are printed at the end of the run.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.containers import observe, podman_kit

HERE = Path(__file__).resolve().parent

MARKERS = {
    "containers": "the compose deployment under podman (make test-containers)",
    "container_faults": "outages injected into the compose deployment (make test-container-faults)",
}
TIMINGS, FIGURES = observe.TIMINGS, observe.FIGURES


def pytest_configure(config: pytest.Config) -> None:
    for name, description in MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {description}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if any(marker in (config.option.markexpr or "") for marker in MARKERS):
        return
    mine = [item for item in items if HERE in Path(str(item.path)).parents]
    if mine:
        config.hook.pytest_deselected(items=mine)
        items[:] = [item for item in items if item not in mine]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not TIMINGS and not FIGURES:
        return
    terminalreporter.section("container tests")
    for step, seconds in TIMINGS.items():
        terminalreporter.write_line(f"{step}: {seconds:.0f} s")
    for test, figures in FIGURES.items():
        terminalreporter.write_line(f"{test}: {json.dumps(figures, default=str)}")


@pytest.fixture(scope="session")
def images() -> dict[str, dict[str, str]]:
    """Every image the tests run, built (or found in podman's cache); the services' images, each
    with its build arguments (``podman_kit.service_images``)."""
    started = time.monotonic()
    for step, seconds in podman_kit.build_images().items():
        TIMINGS[f"build {step}"] = seconds
    TIMINGS["build, total"] = time.monotonic() - started
    return podman_kit.service_images()


@pytest.fixture
def deploy(
    images: dict[str, dict[str, str]], tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., observe.Deployment]]:
    """``deploy(*extra_compose_files)`` brings a fresh compose system up; it is removed, volumes
    and all, when the test ends. Times the start-up and the whole test."""
    project = f"hjtest{os.getpid()}"
    started = time.monotonic()
    with contextlib.ExitStack() as stack:

        def start(*extra_files: Path) -> observe.Deployment:
            begun = time.monotonic()
            system = stack.enter_context(podman_kit.running(project, extra_files))
            TIMINGS[f"{request.node.name}: compose up until healthy"] = time.monotonic() - begun
            return observe.Deployment(system, tmp_path)

        yield start
    TIMINGS[f"{request.node.name}: whole test, teardown included"] = time.monotonic() - started
