"""parse_conf: Volcano's conf syntax, switches, arguments, and errors that name the bad key."""

from __future__ import annotations

import pytest

from hyperjob.schedcore import DEFAULT_CONF, ConfError, parse_conf
from hyperjob.schedcore.hooks import hook_enabled


def test_default_conf_is_volcanos_with_network_topology():
    assert DEFAULT_CONF.actions == ("enqueue", "allocate", "backfill")
    assert [[p.name for p in tier] for tier in DEFAULT_CONF.tiers] == [
        ["priority", "gang", "conformance"],
        ["overcommit", "drf", "predicates", "proportion", "nodeorder", "network-topology-aware"],
    ]


def test_switches_are_read_with_volcano_spellings():
    conf = parse_conf("""
actions: "allocate"
tiers:
- plugins:
  - name: gang
    enablePreemptable: false
    enableJobOrder: false
  - name: capacity
    enableHierarchy: true
""")
    gang = conf.plugin("gang")
    assert gang is not None
    assert not hook_enabled(gang, "preemptable") and not hook_enabled(gang, "job_order")
    assert hook_enabled(gang, "job_ready")
    assert conf.plugin("capacity").switches == {"enableHierarchy": True}  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("plugin", "arguments", "field", "expected"),
    [
        ("binpack", "{binpack.weight: 10, binpack.cpu: 2}", "weight", 10),
        (
            "binpack",
            "{binpack.resources: 'nvidia.com/gpu', binpack.resources.nvidia.com/gpu: 5}",
            "extra",
            {"nvidia.com/gpu": 5.0},
        ),
        (
            "binpack",
            "{binpack.resources: 'nvidia.com/gpu', binpack.resources.nvidia.com/gpu: -3}",
            "extra",
            {"nvidia.com/gpu": 1.0},
        ),
        ("overcommit", "{overcommit-factor: 2.0}", "factor", 2.0),
        ("overcommit", "{overcommit-factor: '1.5'}", "factor", 1.5),
        ("nodeorder", "{leastrequested.weight: 0, mostrequested.weight: 2}", "most", 2),
    ],
    ids=[
        "binpack-weight",
        "binpack-resource-weight",
        "binpack-negative-weight-is-1",
        "overcommit-factor",
        "overcommit-factor-string",
        "nodeorder-weights",
    ],
)
def test_arguments_decode(plugin, arguments, field, expected):
    conf = parse_conf(f'actions: "allocate"\ntiers:\n- plugins:\n  - name: {plugin}\n    arguments: {arguments}\n')
    assert getattr(conf.plugin(plugin).args, field) == expected  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ('actions: "enqueue, shuffle"\ntiers: []', "shuffle"),
        ('actions: "allocate"\ntiers:\n- plugins: [{name: tdm}]', "tdm"),
        ('actions: "allocate"\ntiers:\n- plugins: [{name: binpack, arguments: {binpack.weigth: 1}}]', "binpack.weigth"),
        ('actions: "allocate"\ntiers:\n- plugins: [{name: overcommit, arguments: {factor: 1}}]', "factor"),
        ('actions: "allocate"\ntiers:\n- plugins: [{name: gang, enableJobOrdering: false}]', "enableJobOrdering"),
        ('actions: "allocate"\ntiers:\n- plugins: [{name: gang, enableJobOrder: "no"}]', "enableJobOrder"),
        ('actions: "allocate"\ntiers:\n- plugins: [{name: binpack, arguments: {binpack.weight: heavy}}]', "binpack"),
        (
            'actions: "allocate"\ntiers:\n- plugins: [{name: binpack, arguments: {binpack.resources.foo/bar: 2}}]',
            "binpack.resources.foo/bar",
        ),
        ('actions: "allocate"\npolicies: []', "policies"),
        ("actions: [allocate", "YAML"),
        ('actions: "allocate"\ntiers:\n- plugins: [{name: drf, enableHierarchy: true}]', "hierarchical DRF"),
    ],
    ids=[
        "unknown-action",
        "unknown-plugin",
        "unknown-argument",
        "unknown-overcommit-argument",
        "unknown-switch",
        "switch-not-bool",
        "argument-not-number",
        "binpack-resource-not-listed",
        "unknown-top-level-key",
        "bad-yaml",
        "hierarchical-drf",
    ],
)
def test_conf_errors_name_the_bad_key(text, names):
    with pytest.raises(ConfError, match=names.replace(".", r"\.").replace("/", "/")):
        parse_conf(text)
