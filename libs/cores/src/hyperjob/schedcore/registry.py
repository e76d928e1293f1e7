"""The plugin registry, built in one explicit function (nothing registers itself on import)."""

from __future__ import annotations

from typing import Any

from .framework import Plugin
from .plugins.binpack import BinpackPlugin
from .plugins.capacity import CapacityPlugin
from .plugins.conformance import ConformancePlugin
from .plugins.drf import DrfPlugin
from .plugins.fgd import FgdPlugin
from .plugins.gang import GangPlugin
from .plugins.gpubaselines import (
    GpuBestFitPlugin,
    GpuClusteringPlugin,
    GpuDotProdPlugin,
    GpuPackingPlugin,
    GpuRandomPlugin,
)
from .plugins.gpufrag import GpuFragPlugin
from .plugins.nodegroup import NodeGroupPlugin
from .plugins.nodeorder import NodeOrderPlugin
from .plugins.numaaware import NumaAwarePlugin
from .plugins.overcommit import OvercommitPlugin
from .plugins.predicates import PredicatesPlugin
from .plugins.priority import PriorityPlugin
from .plugins.proportion import ProportionPlugin
from .plugins.topology import NetworkTopologyPlugin

# Plugin[Any]: each plugin class is parameterised by its own Args struct.
_BUILTIN: tuple[type[Plugin[Any]], ...] = (
    PriorityPlugin,
    GangPlugin,
    ConformancePlugin,
    OvercommitPlugin,
    DrfPlugin,
    PredicatesPlugin,
    ProportionPlugin,
    CapacityPlugin,
    NodeOrderPlugin,
    NodeGroupPlugin,
    NumaAwarePlugin,
    BinpackPlugin,
    FgdPlugin,
    GpuRandomPlugin,
    GpuDotProdPlugin,
    GpuClusteringPlugin,
    GpuPackingPlugin,
    GpuBestFitPlugin,
    GpuFragPlugin,
    NetworkTopologyPlugin,
)


Registry = dict[str, type[Plugin[Any]]]


def build_registry() -> Registry:
    """Plugin name -> factory (the plugin class; ``cls(args)`` makes a per-session instance)."""
    registry: Registry = {}
    for cls in _BUILTIN:
        if cls.NAME in registry:
            raise ValueError(f"duplicate plugin name {cls.NAME!r}")
        registry[cls.NAME] = cls
    return registry
