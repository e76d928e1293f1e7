"""docker-compose.yml and the Dockerfile agree with the code (no Docker engine is needed to check)."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

import msgspec
import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
COMPOSE = yaml.safe_load((REPO / "docker-compose.yml").read_text())
SERVICES = {name: spec for name, spec in COMPOSE["services"].items() if "build" in spec}
SHARED = {"NATS_URL", "REDIS_URL", "OTEL_EXPORTER_OTLP_ENDPOINT", "LOG_LEVEL"}


def test_every_service_of_the_architecture_runs_in_compose():
    modules = {spec["command"][-1] for spec in SERVICES.values()}
    assert modules == {"splitter", "global_scheduler", "cluster_scheduler", "job_controller", "status_aggregator",
                       "node_agent"}


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_service_entrypoint_exists_and_its_environment_names_settings(name):
    command = SERVICES[name]["command"]
    assert command[:2] == ["python", "-m"]
    module = command[2]
    assert importlib.util.find_spec(f"{module}.__main__") is not None
    settings = importlib.import_module(f"{module}.config").Settings
    prefix = module.upper() + "_"
    fields = {f.name.upper() for f in msgspec.structs.fields(settings)}
    for variable in SERVICES[name]["environment"]:
        if variable in SHARED:
            continue
        assert variable.startswith(prefix), f"{name}: {variable} is not a {prefix}* setting"
        assert variable[len(prefix):] in fields, f"{name}: {variable} names no field of {module}.config.Settings"


def test_services_reach_nats_and_redis_by_their_compose_names_and_ports():
    env = SERVICES["splitter"]["environment"]
    assert env["NATS_URL"] == "nats://nats:4222" and "4222:4222" in COMPOSE["services"]["nats"]["ports"]
    assert env["REDIS_URL"].startswith("redis://redis:6379") and "6379:6379" in COMPOSE["services"]["redis"]["ports"]
    assert "-js" in COMPOSE["services"]["nats"]["command"]
    assert "--appendonly" in COMPOSE["services"]["redis"]["command"]


def test_dockerfile_copies_paths_that_exist():
    lines = (REPO / "deploy" / "Dockerfile").read_text().splitlines()
    for line in lines:
        if line.startswith("COPY "):
            *sources, _ = line.split()[1:]
            for source in sources:
                assert (REPO / source).exists(), source
