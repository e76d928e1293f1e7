"""``volcano-scheduler.conf``: actions, tiers of plugins, per-plugin hook switches and arguments.

``parse_conf`` validates everything up front: an unknown action, plugin, switch or argument is a
``ConfError`` whose message names it, so a bad conf never reaches a cycle.
"""

from __future__ import annotations

from typing import Any

import yaml

from .confspec import ACTIONS, SWITCHES, PluginConf, SchedulerConf
from .errors import ConfError
from .registry import build_registry

DEFAULT_CONF_TEXT = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: network-topology-aware
"""
"""Volcano's default conf, plus ``network-topology-aware``: gangs land within one HyperNode of the
``topology.hyperjob.io/tierN`` labels (nodes without them see no difference). A conf that leaves
it out places gangs node by node, and a job whose networkTopology is ``hard`` then waits."""


def parse_conf(text: str) -> SchedulerConf:
    """Parse and validate Volcano's scheduler conf YAML; raise ``ConfError`` naming the bad key."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfError(f"scheduler conf is not valid YAML: {exc}") from None
    if not isinstance(raw, dict):
        raise ConfError("scheduler conf must be a mapping with 'actions' and 'tiers'")
    unknown = sorted(set(raw) - {"actions", "tiers", "configurations", "metrics"})
    if unknown:
        raise ConfError(f"unknown scheduler conf key {unknown[0]!r}")
    actions = _actions(raw.get("actions", ""))
    tiers_raw = raw.get("tiers") or []
    if not isinstance(tiers_raw, list):
        raise ConfError("tiers: must be a list")
    tiers = tuple(_tier(i, t) for i, t in enumerate(tiers_raw))
    seen: set[str] = set()
    for i, tier in enumerate(tiers):
        for p in tier:
            if p.name in seen:
                raise ConfError(f"tiers[{i}]: plugin {p.name!r} is listed more than once")
            seen.add(p.name)
    _configurations(raw.get("configurations"))
    return SchedulerConf(actions=actions, tiers=tiers)


# The helpers below take YAML as parsed (Any), and check its shape before using it.
def _actions(text: Any) -> tuple[str, ...]:
    if not isinstance(text, str):
        raise ConfError("actions: must be a comma-separated string")
    names = tuple(a.strip() for a in text.split(",") if a.strip())
    for name in names:
        if name not in ACTIONS:
            raise ConfError(f"actions: unknown action {name!r} (known: {', '.join(ACTIONS)})")
    return names


def _configurations(raw: Any) -> None:
    for i, entry in enumerate(raw or []):
        name = entry.get("name") if isinstance(entry, dict) else None
        if name not in ACTIONS:
            raise ConfError(f"configurations[{i}].name: unknown action {name!r}")


def _tier(i: int, raw: Any) -> tuple[PluginConf, ...]:
    if not isinstance(raw, dict) or set(raw) - {"plugins"}:
        raise ConfError(f"tiers[{i}]: a tier is a mapping with only 'plugins'")
    return tuple(_plugin(f"tiers[{i}].plugins[{j}]", p) for j, p in enumerate(raw.get("plugins") or []))


def _plugin(path: str, raw: Any) -> PluginConf:
    if not isinstance(raw, dict) or "name" not in raw:
        raise ConfError(f"{path}: a plugin needs a 'name'")
    name = raw["name"]
    registry = build_registry()
    if name not in registry:
        raise ConfError(f"{path}.name: unknown plugin {name!r} (known: {', '.join(sorted(registry))})")
    switches: dict[str, bool] = {}
    for key, value in raw.items():
        if key in ("name", "arguments"):
            continue
        if key not in SWITCHES:
            raise ConfError(f"{path}: unknown plugin option {key!r} for plugin {name!r}")
        if not isinstance(value, bool):
            raise ConfError(f"{path}.{key}: must be true or false")
        switches[key] = value
    arguments = raw.get("arguments") or {}
    if not isinstance(arguments, dict):
        raise ConfError(f"{path}.arguments: must be a mapping")
    if name == "drf" and switches.get("enableHierarchy"):
        # Volcano's hierarchical DRF reads the queues' volcano.sh/hierarchy annotations; refused
        # rather than run as flat drf, which would quietly drop the tree the user asked for.
        raise ConfError(
            f"{path}.enableHierarchy: hierarchical DRF (queue annotations volcano.sh/hierarchy) is not "
            "supported; declare queue trees with spec.parent and enable the capacity plugin's enableHierarchy"
        )
    args = registry[name].decode_args(arguments, f"{path}.arguments")
    return PluginConf(name=name, switches=switches, arguments=arguments, args=args)


DEFAULT_CONF = parse_conf(DEFAULT_CONF_TEXT)

LIVE_DEFAULT_CONF_TEXT = DEFAULT_CONF_TEXT + "  - name: gpufrag\n"
"""The conf the live cluster-scheduler uses when none is configured: Volcano's default plus
``gpufrag``, the fragmentation-aware GPU scorer. ``gpufrag`` scores every node 0 in a session
without GPU devices or without GPU pods in its mix, so CPU-only clusters get exactly the
decisions of ``DEFAULT_CONF``; on GPU nodes its score outweighs ``nodeorder``'s, which then only
breaks its ties. ``hyperjob simulate`` keeps ``DEFAULT_CONF`` (scenario-format.md)."""

LIVE_DEFAULT_CONF = parse_conf(LIVE_DEFAULT_CONF_TEXT)
