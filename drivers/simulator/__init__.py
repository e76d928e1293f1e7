"""simulator — the engine of ``hyperjob simulate``: the live system's decisions in virtual time.

Role: a deterministic discrete-event driver of the same pure cores the services use — schedcore
(one Volcano scheduler session per cluster and round), jobcore (Volcano Job lifecycle), fleetcore
(HyperJob split, placement, status) — with no NATS, no Redis and no wall clock. It implements
shared/spec/scenario-format.md: the Scenario file (validated up front; a bad file is a
``ScenarioError`` and exit status 2, never a partial result) and the result object.

Owns: the scenario schema and its validation, the world model (clusters, nodes, the implicit
``default`` and ``root`` queues, priority classes, pods and their incarnations), the agenda and
virtual clock, what nodes do with pods (start, finish after ``hyperjob.io/sim-duration``, fail,
restart in place, disappear with their node), and the output (JSON and tables).

Invariants: the same scenario text always gives the same result, byte for byte (no set or hash
order, no randomness, times rounded on the schedule grid); the simulator decides nothing a core
decides — where a core lacks an entry point, a small adapter marked ``GAP`` composes its
published functions: held binds for the cross-cluster gang's reservations (``gang``), a plain
job landing on the only cluster and plain-job failover (``fleet``), the conceptual template
Job's sim annotations (``events``).

Modules: ``schema``/``scenario`` (the file and its validation), ``world`` (state), ``agenda`` and
``engine`` (virtual time), ``events`` (scenario events, admission, ``Rejected``), ``kubelet``
(pods on nodes), ``controller`` (jobcore), ``cluster`` (schedcore), ``fleet`` and ``gang``
(fleetcore), ``output``/``table`` (the result).

Public API (the CLI uses exactly this)::

    simulator.run(text) -> dict                 # the result object; raises ScenarioError
    simulator.to_json(result) -> str            # deterministic JSON
    simulator.render_table(result) -> str       # ``-o table``
    simulator.ScenarioError(path, message)      # str() is "<path>: <message>"
"""

from __future__ import annotations

from typing import Any

from .errors import ScenarioError
from .output import to_json
from .table import render_table

__all__ = ["ScenarioError", "render_table", "run", "to_json"]


def run(text: str) -> dict[str, Any]:
    """Run a scenario given as YAML text; the result object of scenario-format.md ("Output").

    Raises ``ScenarioError`` (exit 2) when the file itself is wrong; everything that happens to
    the objects it creates (including rejected manifests) is part of the result.
    """
    from .engine import prepare

    return prepare(text).run()
