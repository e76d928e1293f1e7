"""Building capacity's queue attributes: flat (queues with jobs) or the whole hierarchy."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..framework import SessionView
from .quota import QueueAttr, assign, capability_vec, queue_sums

ROOT = "root"


@dataclass
class QueueTree:
    """What capacity builds at session open: each queue's attributes, its parent (hierarchy
    only), the resources its ``deserved`` names, and whether a job sits in a non-leaf queue."""

    attrs: dict[str, QueueAttr] = field(default_factory=dict)
    parent: dict[str, str] = field(default_factory=dict)
    defined: dict[str, np.ndarray] = field(default_factory=dict)
    broken: bool = False


def _defined(ssn: SessionView, deserved: dict[str, float]) -> np.ndarray:
    mask = np.zeros(ssn.space.size, dtype=bool)
    for name in deserved:
        if name in ssn.space.index:
            mask[ssn.space.index[name]] = True
    return mask


def build_flat(plugin: QueueTree, ssn: SessionView) -> None:
    space = ssn.space
    total_guarantee = sum((space.vec(q.info.guarantee) for q in ssn.queues.values()), np.zeros(space.size))
    jobs = [j for j in ssn.jobs.values() if j.queue in ssn.queues]
    for name, sums in queue_sums(ssn, jobs).items():
        q = ssn.queues[name]
        attr = plugin.attrs[name] = QueueAttr(name, space)
        attr.guarantee = space.vec(q.info.guarantee)
        attr.capability = capability_vec(space, q.info.capability)
        attr.real_cap = np.minimum(np.maximum(ssn.total - total_guarantee, 0.0) + attr.guarantee, attr.capability)
        attr.deserved = np.maximum(np.minimum(space.vec(q.info.deserved), attr.real_cap), attr.guarantee)
        plugin.defined[name] = _defined(ssn, q.info.deserved)
        assign(attr, sums)


def build_tree(plugin: QueueTree, ssn: SessionView) -> None:
    space = ssn.space
    for q in ssn.queues.values():
        attr = plugin.attrs[q.name] = QueueAttr(q.name, space)
        attr.guarantee = space.vec(q.info.guarantee)
        attr.capability = capability_vec(space, q.info.capability)
        attr.deserved = space.vec(q.info.deserved)
        plugin.defined[q.name] = _defined(ssn, q.info.deserved)
        if q.name != ROOT:
            # A parent that is not in the snapshot is treated as root rather than invented.
            parent = q.info.parent if q.info.parent in ssn.queues else ROOT
            plugin.parent[q.name] = parent if parent != q.name else ROOT
    if ROOT not in plugin.attrs:
        plugin.attrs[ROOT] = QueueAttr(ROOT, space)
        plugin.defined[ROOT] = np.zeros(space.size, dtype=bool)
    children: dict[str, list[str]] = {}
    for child, parent in sorted(plugin.parent.items()):
        children.setdefault(parent, []).append(child)
    jobs = [j for j in ssn.jobs.values() if j.queue in plugin.attrs]
    for leaf, sums in queue_sums(ssn, jobs).items():
        if children.get(leaf):
            plugin.broken = True  # a job in a non-leaf queue: Volcano refuses the whole session
        for name in _chain(plugin, leaf):
            assign(plugin.attrs[name], sums)
    root = plugin.attrs[ROOT]
    kids = [plugin.attrs[c] for c in children.get(ROOT, [])]
    root.deserved = sum((k.deserved for k in kids), np.zeros(space.size)) if kids else root.deserved
    root.guarantee = sum((k.guarantee for k in kids), np.zeros(space.size)) if kids else root.guarantee
    root.real_cap = np.minimum(root.capability, ssn.total)
    plugin.defined[ROOT] = plugin.defined[ROOT] | np.any(
        [plugin.defined[c] for c in children.get(ROOT, [])] or [plugin.defined[ROOT]], axis=0
    )
    _top_down(plugin, ROOT, children)


def _chain(plugin: QueueTree, name: str) -> list[str]:
    """``name`` and its ancestors up to root; a parent cycle is cut where it closes."""
    out = [name]
    while name != ROOT:
        name = plugin.parent.get(name, ROOT)
        if name in out:
            break
        out.append(name)
    return out


def _top_down(plugin: QueueTree, parent: str, children: dict[str, list[str]]) -> None:
    p = plugin.attrs[parent]
    kids = children.get(parent, [])
    siblings_guarantee = sum((plugin.attrs[c].guarantee for c in kids), np.zeros_like(p.guarantee))
    for name in kids:
        c = plugin.attrs[name]
        c.deserved = np.maximum(c.deserved, c.guarantee)
        c.capability = np.where(np.isinf(c.capability), p.capability, c.capability)
        c.real_cap = np.minimum(c.capability, np.maximum(p.real_cap - siblings_guarantee, 0.0) + c.guarantee)
        _top_down(plugin, name, children)
