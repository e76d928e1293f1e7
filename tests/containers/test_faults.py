"""Outages no loopback test can make, with the whole system in containers
(``make test-container-faults``; not in CI: about 30 minutes on 2 cores beside the rest).

Each test submits the README example from the host, injects its fault while the pods run, keeps
it for ``OUTAGE`` seconds, heals it, and gives the system ``RECOVERY`` seconds to finish and
``SETTLE`` more to give back what a cut-off cluster still held. Then the invariants of
``observe.Figures`` must hold: the HyperJob Completed, no pod started twice, no two copies of a
pod running at once, no node booked above its allocatable, no dead letter, no child or booking
left behind.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.containers import observe, podman_kit
from tests.containers.observe import EXAMPLE, EXAMPLE_NAME, FIGURES, FINAL_PHASES, BookingSampler, Deployment

# A fault test waits through its outage and recovery: longer than the suite's 300 s per test.
pytestmark = [pytest.mark.container_faults, pytest.mark.timeout(900)]

OUTAGE = 45.0
RECOVERY = 180.0
# Once the HyperJob is final, what the fault's cluster still holds must be given back within this.
SETTLE = 60.0
EXPECTED = {EXAMPLE_NAME: "Completed"}


def run_through_outage(
    deployment: Deployment,
    test: str,
    inject: Callable[[], Any],
    heal: Callable[[Any], None],
    notes: dict[str, Any] | None = None,
) -> observe.Figures:
    """Apply the example; once it runs, ``inject()``, wait ``OUTAGE``, ``heal(what inject returned)``;
    wait for a final phase; the figures (also printed at the end of the run), with ``notes``."""
    cli, notes = deployment.cli, notes if notes is not None else {}
    with BookingSampler(cli) as sampler:
        cli.run("apply", "-f", str(EXAMPLE))
        assert cli.wait_for_phase(EXAMPLE_NAME, ("Running",), timeout=120) == "Running"
        injected = inject()
        notes["phase during outage"] = sorted({cli.phase(EXAMPLE_NAME) or "unanswered" for _ in range(2)})
        time.sleep(OUTAGE)
        heal(injected)
        healed = time.monotonic()
        final = cli.wait_for_phase(EXAMPLE_NAME, FINAL_PHASES, timeout=RECOVERY)
        notes["seconds from heal to final phase"] = round(time.monotonic() - healed) if final in FINAL_PHASES else None
        settled = final in FINAL_PHASES and observe.wait_until_settled(cli, timeout=SETTLE)
        notes["seconds from heal to nothing left behind"] = round(time.monotonic() - healed) if settled else None
    notes["container restarts"] = deployment.system.restarts()
    figures = observe.collect(cli, sampler, deployment.system.nats_url, EXPECTED, notes)
    FIGURES[test] = figures.summary()
    return figures


def test_a_cluster_partitioned_from_the_control_plane_for_45s(deploy: Callable[..., Deployment]) -> None:
    """cluster-a's node-agent and cluster-scheduler lose the network (NATS and Redis) and get it back."""
    deployment = deploy()
    cut = ("node-agent-a", "cluster-scheduler-a")
    figures = run_through_outage(
        deployment,
        "a: cluster-a partitioned 45 s",
        lambda: deployment.system.disconnect(*cut),
        deployment.system.connect,
    )
    assert figures.problems() == []


def test_a_clusters_control_plane_hung_for_45s_while_its_nodes_run(deploy: Callable[..., Deployment]) -> None:
    """cluster-a's cluster-scheduler and job-controller hang (paused), its node-agent runs on and
    reports: a hung control plane, not a lost cluster (issue 33). Nothing moves, no pod runs twice
    or in two copies at once."""
    deployment = deploy()
    hung = ("cluster-scheduler-a", "job-controller-a")
    figures = run_through_outage(
        deployment,
        "e: cluster-a's control plane hung 45 s",
        lambda: deployment.system.pause(*hung),
        deployment.system.unpause,
    )
    assert figures.problems() == []


def test_redis_partitioned_from_the_services_for_45s(deploy: Callable[..., Deployment]) -> None:
    deployment = deploy()
    figures = run_through_outage(
        deployment,
        "b: Redis partitioned 45 s",
        lambda: deployment.system.disconnect("redis"),
        deployment.system.connect,
    )
    assert figures.problems() == []


def test_nats_killed_and_restarted(deploy: Callable[..., Deployment]) -> None:
    """SIGKILL to the only NATS server; it is started again after the outage if podman's restart
    policy has not already done so (JetStream's files are on the nats-data volume)."""
    deployment = deploy()
    system, notes = deployment.system, {}

    def heal(_: object) -> None:
        notes["restarted by podman's restart policy"] = system.is_running("nats")
        if not notes["restarted by podman's restart policy"]:
            system.start("nats")

    figures = run_through_outage(deployment, "c: NATS killed, restarted", lambda: system.kill("nats"), heal, notes)
    assert figures.problems() == []


def test_nats_cluster_loses_a_node_with_replicated_streams(deploy: Callable[..., Deployment]) -> None:
    """Three NATS servers, every stream declared R3 by the operator's step (NATS_STREAM_REPLICAS);
    the seed server every service connected to is cut off for 45 s mid-run. Watched through the
    streams, from the other two servers."""
    deployment = deploy(podman_kit.HERE / "compose.nats-cluster.yml")
    system, cli, notes = deployment.system, deployment.cli, {}
    seed = system.url("nats")
    others = [seed.replace(f":{system.ports['NATS']}", f":{system.ports[p]}") for p in ("NATS_2", "NATS_3")]
    notes["replicas declared"] = observe.stream_replicas(others)
    cli.run("apply", "-f", str(EXAMPLE))
    assert observe.wait_for_status(others, EXAMPLE_NAME, ("Running",), timeout=120) == "Running"
    cut = system.disconnect("nats")
    time.sleep(OUTAGE)
    notes["replicas during outage"] = observe.stream_replicas(others)
    notes["phase at heal"] = observe.wait_for_status(others, EXAMPLE_NAME, FINAL_PHASES, timeout=1)
    system.connect(cut)
    healed = time.monotonic()
    final = observe.wait_for_status(others, EXAMPLE_NAME, FINAL_PHASES, timeout=RECOVERY)
    notes["seconds from heal to final phase"] = round(time.monotonic() - healed) if final in FINAL_PHASES else None
    notes["container restarts"] = system.restarts()
    sampler = BookingSampler(cli)  # one sample at the end: during the run the CLI would undo R3
    figures = observe.collect(cli, sampler, system.nats_url, EXPECTED, notes)
    FIGURES["d: NATS cluster, seed node partitioned 45 s"] = figures.summary()
    assert all(replicas == 3 for replicas in notes["replicas during outage"].values())
    assert figures.problems() == []
