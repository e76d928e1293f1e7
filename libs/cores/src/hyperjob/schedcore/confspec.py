"""The parsed shape of ``volcano-scheduler.conf``: the actions, the switches Volcano knows, and
one ``PluginConf`` per plugin line. Plain values, importable by the framework and the plugins
without the parser (``conf.parse_conf``), which needs the plugin registry.
"""

from __future__ import annotations

from typing import Any

import msgspec

# A plugin line's ``arguments`` as the YAML gave them; each plugin's ``Args`` decodes them strictly.
Arguments = dict[str, Any]

ACTIONS = ("enqueue", "allocate", "preempt", "reclaim", "backfill")
# Every switch of Volcano's PluginOption, with its exact spelling. Those without a hook here
# (best node, target job, sub-jobs, hypernode gradients...) are accepted and have no effect.
SWITCHES = frozenset(
    {
        "enableJobOrder",
        "enableHierarchy",
        "enableJobReady",
        "enableJobPipelined",
        "enableTaskOrder",
        "enablePreemptable",
        "enableReclaimable",
        "enablePreemptive",
        "enableQueueOrder",
        "enabledClusterOrder",
        "EnabledClusterOrder",
        "enablePredicate",
        "enableBestNode",
        "enableNodeOrder",
        "enableTargetJob",
        "enableReservedNodes",
        "enableJobEnqueued",
        "enabledVictim",
        "enableJobStarving",
        "enabledOverused",
        "enabledAllocatable",
        "enabledHyperNodeOrder",
        "enabledSubJobReady",
        "enabledSubJobPipelined",
        "enabledSubJobOrder",
        "enabledHyperNodeGradient",
    }
)


class PluginConf(msgspec.Struct, frozen=True, kw_only=True):
    """One plugin line of a tier: explicit switches only (absent means enabled) and decoded args."""

    name: str
    switches: dict[str, bool] = {}
    arguments: Arguments = {}
    args: msgspec.Struct | None = None  # decoded to the plugin's Args

    def enabled(self, switch: str | None) -> bool:
        return switch is None or self.switches.get(switch, True)


class SchedulerConf(msgspec.Struct, frozen=True, kw_only=True):
    actions: tuple[str, ...]
    tiers: tuple[tuple[PluginConf, ...], ...]

    def plugin(self, name: str) -> PluginConf | None:
        for tier in self.tiers:
            for p in tier:
                if p.name == name:
                    return p
        return None
