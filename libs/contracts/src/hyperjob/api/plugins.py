"""Job plugin arguments: the flags each Volcano job plugin declares, parsed as Go's ``flag`` package does.

Volcano's plugins parse their ``[]string`` arguments with ``flag.NewFlagSet(name, ContinueOnError)``
and, on a parse error, log it and keep the flags parsed so far: a typo silently drops everything
after it. Here a plugin's arguments are parsed strictly once, at admission, and an unknown flag, a
bad value or a positional argument is rejected with the field path
(``$.spec.plugins.mpi[1]: unknown flag --slot``).

Syntax (Go ``flag``): ``-name=value`` or ``--name=value``; ``-name value`` for non-boolean flags;
``-name`` alone sets a boolean flag to true. Flag names and defaults are Volcano's
(``pkg/controllers/job/plugins``), plus three project extensions of ``mpi`` (``hostfile``,
``slots-per-worker``, ``mpi-implementation``) that write an MPI hostfile with slots, which is what
Kubeflow's MPIJob users rely on, and one of ``pytorch`` (``nproc-per-node``, a PyTorchJob's
processes per pod); without them each behaves exactly as Volcano's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from .errors import ManifestError

FlagKind = Literal["str", "int", "bool"]
Flags = Mapping[str, tuple[FlagKind, str]]

MPI_IMPLEMENTATIONS = ("OpenMPI", "MPICH", "Intel")

JOB_PLUGIN_FLAGS: dict[str, Flags] = {
    "env": {},
    "svc": {
        "publish-not-ready-addresses": ("bool", "false"),
        "disable-network-policy": ("bool", "false"),
        "inject-hosts-env": ("bool", "true"),
    },
    "ssh": {
        "ssh-key-file-path": ("str", "/root/.ssh"),
        "ssh-private-key": ("str", ""),
        "ssh-public-key": ("str", ""),
        "ssh-port": ("int", "22"),
    },
    "pytorch": {
        "master": ("str", "master"),
        "worker": ("str", "worker"),
        "port": ("int", "23456"),
        "wait-master-enabled": ("bool", "false"),
        "wait-master-timeout": ("int", "300"),
        "wait-master-image": ("str", "busybox:1.36.1"),
        # Extension (Kubeflow's PyTorchJob nprocPerNode): processes per pod; WORLD_SIZE = pods x a
        # number given here, and PET_NODE_RANK = RANK. Empty: Volcano's plugin exactly.
        "nproc-per-node": ("str", ""),
    },
    "mpi": {
        "master": ("str", "master"),
        "worker": ("str", "worker"),
        "port": ("int", "22"),
        "hostfile": ("str", ""),
        "slots-per-worker": ("int", "1"),
        "mpi-implementation": ("str", "OpenMPI"),
    },
    "tensorflow": {
        "ps": ("str", "ps"),
        "worker": ("str", "worker"),
        "chief": ("str", "chief"),
        "evaluator": ("str", "evaluator"),
        "port": ("int", "2222"),
    },
    "ray": {
        "head": ("str", "head"),
        "headContainer": ("str", "head"),
        "worker": ("str", "worker"),
        "workerContainer": ("str", "worker"),
        "port": ("int", "6379"),
        "dashboardPort": ("int", "8265"),
        "clientPort": ("int", "10001"),
    },
}
"""Every job plugin Volcano knows, with its flags: name → (kind, default)."""

HYPERJOB_PLUGIN_FLAGS: dict[str, Flags] = {
    "env": JOB_PLUGIN_FLAGS["env"],
    "svc": JOB_PLUGIN_FLAGS["svc"],
    "pytorch": {"master": ("str", "master"), "port": ("int", "23456")},
    "mpi": JOB_PLUGIN_FLAGS["mpi"],
    "tensorflow": JOB_PLUGIN_FLAGS["tensorflow"],
}
"""HyperJob-level plugins (one world across every child): same flags as the job plugins of the same name."""


def plugin_flags(
    plugin: str, args: list[str], path: str, known: Mapping[str, Flags] = JOB_PLUGIN_FLAGS
) -> dict[str, str]:
    """Every flag of ``plugin`` (defaults filled in) from its ``args``; ``ManifestError`` names the bad one.

    ``path`` is the plugin's field (``$.spec.plugins.mpi``); an error names the argument's index.
    Values are returned as text (``"22"``, ``"true"``); the kind has been checked.
    """
    if plugin not in known:
        raise ManifestError(path, f"unknown plugin (known: {', '.join(sorted(known))})")
    spec = known[plugin]
    values = {name: default for name, (_, default) in spec.items()}
    i = 0
    while i < len(args):
        name, value, used = _one_flag(spec, args, i, f"{path}[{i}]")
        values[name] = value
        i += used
    return values


def _one_flag(spec: Flags, args: list[str], i: int, path: str) -> tuple[str, str, int]:
    arg = args[i]
    if not arg.startswith("-") or arg in ("-", "--"):
        raise ManifestError(path, f"{arg!r} is not a flag (expected --name=value)")
    name, has_value, value = arg.lstrip("-").partition("=")
    if name not in spec:
        known = ", ".join(f"--{n}" for n in spec) or "none"
        raise ManifestError(path, f"unknown flag --{name} (known: {known})")
    kind = spec[name][0]
    used = 1
    if not has_value:
        if kind == "bool":
            value = "true"
        elif i + 1 < len(args):
            value, used = args[i + 1], 2
        else:
            raise ManifestError(path, f"flag --{name} needs a value")
    return name, _checked(name, kind, value, path), used


def _checked(name: str, kind: FlagKind, value: str, path: str) -> str:
    if kind == "int" and not value.lstrip("-").isdigit():
        raise ManifestError(path, f"--{name}={value}: not an integer")
    if kind == "bool":
        lowered = value.lower()
        if lowered not in ("true", "false", "1", "0", "t", "f"):
            raise ManifestError(path, f"--{name}={value}: not a boolean")
        return "true" if lowered in ("true", "1", "t") else "false"
    return value
