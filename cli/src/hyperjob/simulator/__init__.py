"""simulator — the engine of ``hyperjob simulate``: the services themselves, in virtual time.

Role: runs every service of a scenario's fleet — the same ``build`` and handlers that run live
— over the in-process bus and store (``InMemoryBus``, ``InMemoryStore``) and a virtual clock,
with no NATS, no Redis and no wall clock, and reports what happened as
docs/scenario-format.md says: the Scenario file (validated up front; a bad file is a
``ScenarioError`` and exit status 2, never a partial result) and the result object. It decides
nothing itself; what it shows is what the services do (ADR 0004).

Owns: the scenario schema and its validation (``schema``, ``scenario``), the fleet of service
instances a scenario describes (``fleet``), virtual time (``timing``) and the event loop
(``engine``), what is shown (``observe``: the timeline from the messages, the result from the
documents; ``output``, ``table``), and deterministic fault injection (``chaos``).

Invariants: the same scenario text (and chaos seed) always gives the same result, byte for byte:
no wall clock, no unseeded randomness, deliveries in publish order (or the seed's order).

Public API (the CLI uses exactly this)::

    simulator.run(text) -> dict                    # the result object; raises ScenarioError
    simulator.run_chaos(text, seeds) -> iterator   # chaos.ChaosRun per seed; raises Violation
    simulator.to_json(result) -> str               # deterministic JSON
    simulator.render_table(result) -> str          # ``-o table``
    simulator.ScenarioError(path, message)         # str() is "<path>: <message>"
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Iterator

import structlog

from . import chaos, output
from .chaos import Violation
from .engine import Engine
from .errors import ScenarioError
from .output import to_json
from .scenario import load
from .table import render_table

__all__ = ["ScenarioError", "Violation", "render_table", "run", "run_chaos", "to_json"]


def run(text: str) -> output.Result:
    """Run a scenario given as YAML text; the result object of scenario-format.md ("Output").

    Raises ``ScenarioError`` (exit 2) when the file itself is wrong; everything that happens to
    the objects it creates (including rejected manifests) is part of the result.
    """
    scenario = load(text)
    with _quiet():
        return asyncio.run(Engine(scenario).run())


def run_chaos(text: str, seeds: Iterable[int], rates: chaos.Rates | None = None) -> Iterator[chaos.ChaosRun]:
    """Run a scenario once without chaos, then under each chaos seed, checking every invariant
    after every step and comparing how each run ends with the first. Yields each run that held;
    raises ``chaos.Violation`` at the first invariant broken (``ScenarioError`` for a bad file)."""
    scenario = load(text)
    with _quiet():
        baseline = asyncio.run(Engine(scenario).run())
    for seed in seeds:
        with _quiet():
            outcome = chaos.run(scenario, seed, baseline, rates or chaos.Rates())
        yield outcome


class _quiet:
    """The services log as they go; a simulation prints only its result."""

    def __enter__(self) -> None:
        self._config = structlog.get_config()
        self._level = logging.root.level
        structlog.configure(
            logger_factory=structlog.ReturnLoggerFactory(),
            wrapper_class=structlog.make_filtering_bound_logger(logging.CRITICAL),
        )
        logging.root.setLevel(logging.CRITICAL)

    def __exit__(self, *exc: object) -> None:
        structlog.configure(**self._config)
        logging.root.setLevel(self._level)
