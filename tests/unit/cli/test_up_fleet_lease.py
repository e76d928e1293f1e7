"""``hyperjob up``'s ``fleetLease`` (issue 33): the lease the fleet grants its clusters, refused where
the fleet's 30 s silence could not cover it with the margin that stopping the pods takes."""

from __future__ import annotations

from pathlib import Path

import pytest

from hyperjob import fleetcore
from hyperjob.cli.config import load_config
from hyperjob.cli.up import _agent_lease_env
from hyperjob.client import ClientError
from hyperjob.servicekit.config import load_settings
from hyperjob.services.global_scheduler.config import Settings
from hyperjob.services.node_agent.config import Settings as AgentSettings


def test_the_default_lease_is_the_fleets() -> None:
    assert load_config(None).fleet_lease == fleetcore.FLEET_LEASE


def test_a_shorter_lease_is_taken_and_reaches_the_global_scheduler(tmp_path: Path) -> None:
    path = tmp_path / "up.yaml"
    path.write_text("fleetLease: 12\n")
    assert load_config(str(path)).fleet_lease == 12.0
    settings = load_settings(Settings, "GLOBAL_SCHEDULER", environ={"GLOBAL_SCHEDULER_FLEET_LEASE": "12.0"})
    assert settings.fleet_lease == 12.0


@pytest.mark.parametrize("lease", [25, 0, -1])
def test_a_lease_the_margin_cannot_cover_is_refused_naming_the_field(tmp_path: Path, lease: int) -> None:
    path = tmp_path / "up.yaml"
    path.write_text(f"fleetLease: {lease}\n")
    with pytest.raises(ClientError, match="fleetLease must be more than 0 and at most 20 s"):
        load_config(str(path))


@pytest.mark.parametrize(("lease", "beat"), [(20.0, 2.0), (12.0, 2.0), (4.0, 1.0)], ids=["default", "shorter", "short"])
def test_the_lease_reaches_the_node_agents_which_beat_often_enough_to_keep_it(lease: float, beat: float) -> None:
    """Cut off longer than the lease, a node-agent freezes its pods itself (issue 33): `up` gives it
    the lease, and a heartbeat period that a healthy agent keeps it with (its settings accept both)."""
    env = _agent_lease_env(lease, True)
    settings = load_settings(AgentSettings, "NODE_AGENT", environ={**env, "NODE_AGENT_CLUSTER": "c1"})
    assert (settings.fleet_lease, settings.heartbeat_period, settings.self_fence) == (lease, beat, True)


def test_self_fencing_is_on_unless_the_up_config_turns_it_off(tmp_path) -> None:
    """At most one copy of a child runs (issue 33): a cluster cut off whole freezes its pods itself
    unless an operator whose pods cannot be frozen turns it off (``selfFence: false``)."""
    path = tmp_path / "up.yaml"
    path.write_text("selfFence: false\n")
    assert (load_config(None).self_fence, load_config(str(path)).self_fence) == (True, False)
    default = load_settings(AgentSettings, "NODE_AGENT", environ={"NODE_AGENT_CLUSTER": "c1"})
    assert default.self_fence is True
