"""Every place that names the services agrees with their one declaration, ``events.services``:
a service added there and forgotten in one of them (as the workflow-controller once was in the
import contracts) fails here, naming the place."""

from __future__ import annotations

import configparser
import re
import tomllib
import typing
from importlib.util import module_from_spec, spec_from_file_location
from pathlib import Path

import yaml

from hyperjob.events import access
from hyperjob.events.services import SERVICES, ServiceName
from hyperjob.simulator import fleet, scenario

REPO = Path(__file__).resolve().parents[3]
NAMES = {s.name for s in SERVICES}
COMPOSE_CLUSTERS = {"a": "cluster-a", "b": "cluster-b"}  # compose's suffix -> cluster


def compose_names() -> dict[str, str]:
    """compose service -> the module it runs, as the registry says it should be."""
    names = {s.name: s.module for s in SERVICES if not s.per_cluster}
    for suffix in COMPOSE_CLUSTERS:
        names |= {f"{s.name}-{suffix}": s.module for s in SERVICES if s.per_cluster}
    return names


def test_names_are_unique_and_the_literal_type_names_each():
    assert len(NAMES) == len(SERVICES)
    assert set(typing.get_args(ServiceName)) == NAMES


def test_every_service_is_a_role_with_a_grant_and_its_durables():
    assert set(access.SERVICE_ROLES) == NAMES
    assert set(access.GRANTS) == NAMES | {"user", "operator"}
    assert access.PER_CLUSTER == {s.name for s in SERVICES if s.per_cluster}
    for s in SERVICES:
        cluster = "c" if s.per_cluster else ""
        instance = f"{s.name}-c" if s.per_cluster else s.name
        assert access.durables_of(s.name, cluster=cluster) == tuple(instance + d for d in s.durables)


def test_the_simulated_fleet_builds_every_service_once_per_cluster_or_once():
    """Every service that decides; not those at the edge, which serve people (the apiserver)."""
    deciding = [s for s in SERVICES if not s.edge]
    assert set(fleet._BUILDS) == {s.name for s in deciding}
    clusters = [scenario.ClusterSpec(name=c, labels={}, nodes=[]) for c in ("c1", "c2")]
    plans = fleet.plan_instances(
        scenario.Scenario(
            name="s",
            scheduler_conf=None,
            period=1.0,
            clusters=clusters,
            queues=[],
            priority_classes=[],
            events=[],
            until=None,
        )
    )
    planned = sorted((p.service, p.cluster) for p in plans)
    expected = [(s.name, c) for s in deciding for c in (("c1", "c2") if s.per_cluster else ("",))]
    assert planned == sorted(expected)


def test_compose_runs_every_service_on_the_registry_metrics_port():
    compose = yaml.safe_load(re.sub(r"!(override|reset)\b", "", (REPO / "docker-compose.yml").read_text()))
    runs = {
        n: spec["command"][2] for n, spec in compose["services"].items() if spec.get("command", [])[:1] == ["python"]
    }
    assert {n: m for n, m in runs.items() if m.startswith("hyperjob.services.")} == compose_names()
    by_module = {s.module: s for s in SERVICES}
    for name, module in compose_names().items():
        spec, port = compose["services"][name], by_module[module].metrics_port
        assert spec["environment"]["METRICS_PORT"] == str(port), name
        assert spec["healthcheck"]["test"][-1] == f"http://127.0.0.1:{port}/healthz", name


def test_deploy_credentials_name_every_compose_service():
    spec = spec_from_file_location("credentials", REPO / "deploy" / "credentials.py")
    credentials = module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(credentials)  # type: ignore[union-attr]
    identities = credentials.compose_services(list(COMPOSE_CLUSTERS.values()))
    assert set(compose_names()) <= set(identities)
    assert {identities[n] for n in compose_names()} == {
        f"{s.name}-{c}" if s.per_cluster else s.name
        for s in SERVICES
        for c in (COMPOSE_CLUSTERS.values() if s.per_cluster else ("",))
    }


def test_prometheus_scrapes_every_service_on_its_metrics_port():
    """Targets carry no ``cluster`` label: a per-cluster service puts its own on every series
    (servicekit.metrics), and a target label would rename it ``exported_cluster``."""
    prometheus = yaml.safe_load((REPO / "deploy" / "prometheus" / "prometheus.yml").read_text())
    (job,) = [j for j in prometheus["scrape_configs"] if j["job_name"] == "hyperjob"]
    assert not [group for group in job["static_configs"] if "labels" in group]
    targets = {t for group in job["static_configs"] for t in group["targets"]}
    expected = {f"{s.name}:{s.metrics_port}" for s in SERVICES if not s.per_cluster}
    for suffix in COMPOSE_CLUSTERS:
        expected |= {f"{s.name}-{suffix}:{s.metrics_port}" for s in SERVICES if s.per_cluster}
    assert targets == expected


def test_the_import_contracts_keep_every_service_independent_of_the_others():
    contracts = configparser.ConfigParser()
    contracts.read(REPO / ".importlinter")
    modules = contracts["importlinter:contract:services-independent"]["modules"].split()
    assert sorted(modules) == sorted(s.module for s in SERVICES)


def test_every_service_is_a_member_of_the_workspace_and_of_the_image():
    assert {p.parent.relative_to(REPO).as_posix() for p in REPO.glob("services/*/pyproject.toml")} == {
        s.member for s in SERVICES
    }
    root = tomllib.loads((REPO / "pyproject.toml").read_text())
    for s in SERVICES:
        member = tomllib.loads((REPO / s.member / "pyproject.toml").read_text())
        assert member["project"]["name"] == s.distribution
        assert s.distribution in root["project"]["dependencies"], s.name
        assert s.distribution in root["tool"]["uv"]["sources"], s.name
        assert f"{s.member}/src" in root["tool"]["mypy"]["mypy_path"], s.name
        assert f"{s.member}/src" in root["tool"]["ruff"]["src"], s.name
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())["services"]
    members = {spec["build"]["args"]["MEMBER"] for spec in compose.values() if "build" in spec}
    assert {m for m in members if m.startswith("services/")} == {s.member for s in SERVICES}
