"""Every plugin declares the hook Protocols it implements (``class GangPlugin(Plugin[NoArgs],
JobOrder, ...)``), so mypy checks its hooks' signatures; a hook-like method that no declared
Protocol names (a misspelt hook, silently never called) fails here."""

from __future__ import annotations

import difflib
import typing

import pytest

from hyperjob.schedcore import framework
from hyperjob.schedcore.framework import JobOrder, NoArgs, Plugin
from hyperjob.schedcore.registry import build_registry
from hyperjob.schedcore.state import JobState

HOOK_PROTOCOLS = frozenset(
    p
    for name, p in vars(framework).items()
    if isinstance(p, type) and getattr(p, "_is_runtime_protocol", False) and name != "SessionView"
)
PLUGIN_METHODS = frozenset(m for m in vars(Plugin) if not m.startswith("_"))


def hook_methods(protocol: type) -> set[str]:
    return {m for m in typing._get_protocol_attrs(protocol) if callable(getattr(protocol, m, None))}  # type: ignore[attr-defined]


HOOK_OF = {m: p for p in HOOK_PROTOCOLS for m in hook_methods(p)}


def defects(cls: type) -> list[str]:
    """What is wrong with ``cls``'s hooks: a declared Protocol it leaves to the Protocol's stub, a
    hook it defines without declaring it, a method that looks like a hook but is none it declares."""
    declared = {b for b in cls.__mro__ if b in HOOK_PROTOCOLS}
    own = [c for c in cls.__mro__ if c not in HOOK_PROTOCOLS and c is not object]
    found = [
        f"declares {p.__name__} but never defines {m}"
        for p in declared
        for m in sorted(hook_methods(p))
        if not any(m in vars(c) for c in own)
    ]
    declared_methods = {m for p in declared for m in hook_methods(p)}
    methods = {m for c in own for m, v in vars(c).items() if callable(v) and not m.startswith("_")}
    for m in sorted(methods - declared_methods - PLUGIN_METHODS):
        if m in HOOK_OF:
            found.append(f"defines {m} without declaring {HOOK_OF[m].__name__}")
        elif close := difflib.get_close_matches(m, [*HOOK_OF, *PLUGIN_METHODS], n=1, cutoff=0.8):
            found.append(f"{m} looks like the hook {close[0]} but matches no declared Protocol")
    return found


def test_every_hook_of_the_session_is_a_protocol_checked_here():
    assert {proto for proto, _ in framework.HOOKS.values()} <= HOOK_PROTOCOLS


@pytest.mark.parametrize("name", sorted(build_registry()))
def test_every_plugin_declares_the_protocols_of_its_hooks(name):
    assert defects(build_registry()[name]) == []


class _Misspelt(Plugin[NoArgs], JobOrder):
    def job_ordr(self, a: JobState, b: JobState) -> int:
        return 0


class _Undeclared(Plugin[NoArgs]):
    def job_valid(self, job: JobState) -> None:
        return None


class _LooksLikeAHook(Plugin[NoArgs]):
    def preemtable(self) -> None:
        return None


def test_a_misspelt_or_undeclared_hook_is_found():
    assert defects(_Misspelt) == [
        "declares JobOrder but never defines job_order",
        "job_ordr looks like the hook job_order but matches no declared Protocol",
    ]
    assert defects(_Undeclared) == ["defines job_valid without declaring JobValid"]
    assert defects(_LooksLikeAHook) == ["preemtable looks like the hook preemptable but matches no declared Protocol"]
