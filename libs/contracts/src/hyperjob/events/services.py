"""Every service of the system, declared once.

What ``hyperjob up`` starts, the simulator's fleet, the identities and their grants
(``events.access``), the deployment (``deploy/credentials.py``, ``docker-compose.yml``,
``deploy/prometheus``), the import contracts (``.importlinter``) and the workspace's members
(the root ``pyproject.toml``, ``deploy/Dockerfile``) are derived from ``SERVICES`` or checked
against it (``tests/unit/deploy/test_service_registry.py``).

Adding a service: its line here (and its name in ``ServiceName``, for mypy), its grant in
``events.access.GRANTS``, and its member ``services/<name>``; the tests name whatever else still
lacks it.
"""

from __future__ import annotations

from typing import Literal

import msgspec

# The deploy name of each service: its role (``events.access``), its NATS and Redis identity (with
# ``-<cluster>`` for one of a cluster), its compose service and its member ``services/<name>``.
ServiceName = Literal[
    "splitter", "global-scheduler", "status-aggregator", "workflow-controller",
    "cluster-scheduler", "job-controller", "node-agent", "apiserver",
]  # fmt: skip

METRICS_PORT = 9464  # /metrics, /healthz, /readyz of every service container (servicekit.health)


class Service(msgspec.Struct, frozen=True, kw_only=True):
    """One service: its name, whether it runs once per cluster or once for the fleet, its durable
    consumers and where its container serves its metrics."""

    name: ServiceName
    per_cluster: bool
    durables: tuple[str, ...]  # suffixes after the instance name ("" is the instance's own)
    metrics_port: int = METRICS_PORT
    # At the edge: it serves people (its own port, TLS), so ``up`` starts it on its own and the
    # simulator's fleet, which runs the services that decide, has none.
    edge: bool = False

    @property
    def package(self) -> str:
        """``global-scheduler`` -> ``global_scheduler``."""
        return self.name.replace("-", "_")

    @property
    def module(self) -> str:
        """What ``python -m`` runs."""
        return f"hyperjob.services.{self.package}"

    @property
    def member(self) -> str:
        """Its workspace member, relative to the repository."""
        return f"services/{self.name}"

    @property
    def distribution(self) -> str:
        return f"hyperjob-{self.name}"


SERVICES: tuple[Service, ...] = (
    Service(name="splitter", per_cluster=False, durables=("", "-admin", "-sched", "-children")),
    Service(name="global-scheduler", per_cluster=False, durables=("", "-admin", "-jobs", "-podgroups")),
    Service(name="status-aggregator", per_cluster=False, durables=("", "-admin", "-jobs", "-sched", "-podgroups")),
    Service(name="workflow-controller", per_cluster=False, durables=("", "-admin", "-jobs")),
    Service(name="cluster-scheduler", per_cluster=True, durables=("", "-admin")),
    Service(name="job-controller", per_cluster=True, durables=("", "-admin", "-nodes", "-frozen")),
    Service(name="node-agent", per_cluster=True, durables=("", "-admin", "-faults")),
    Service(name="apiserver", per_cluster=False, durables=(), metrics_port=6443, edge=True),
)

BY_NAME: dict[str, Service] = {s.name: s for s in SERVICES}
FLEET_SERVICES: tuple[Service, ...] = tuple(s for s in SERVICES if not s.per_cluster)
CLUSTER_SERVICES: tuple[Service, ...] = tuple(s for s in SERVICES if s.per_cluster)
