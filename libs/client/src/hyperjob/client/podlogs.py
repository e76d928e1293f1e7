"""A pod's output, as the exec- and container-mode node-agents keep it on their machine:
``<work dir>/<cluster>/<pod>/log`` (``hyperjob logs`` and the dashboard read it).

An exec pod's log is its processes' stdout and stderr as written; a container pod's (a file
``container`` beside it) is podman's ``k8s-file``, one record a line, whose text ``k8s_log_text``
takes out. A simulated agent runs no process, so its pods have no log anywhere.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

# How much of a log's end ``tail`` reads: enough for its last lines, never the whole file.
TAIL_BYTES = 64 * 1024

_K8S_RECORD = re.compile(rb"^\S+ (stdout|stderr) ([FP]) ?(.*?)\n?$", re.DOTALL)


def log_paths(root: Path, pod: str, cluster: str = "") -> list[Path]:
    """The logs of pods named ``pod`` under ``root`` (in ``cluster``, or in any), by cluster."""
    return sorted(root.glob(f"{cluster or '*'}/{pod}/log"))


def is_container_log(path: Path) -> bool:
    """Whether the log at ``path`` is podman's ``k8s-file`` (a container pod's)."""
    return (path.parent / "container").is_file()


def k8s_log_text(record: bytes) -> bytes:
    """The container's output in one ``k8s-file`` record (``<time> <stream> <F|P> <text>``): the
    text, with its newline unless the record is a partial line (``P``). Anything else is as is."""
    match = _K8S_RECORD.match(record)
    if match is None:
        return record
    return match.group(3) + (b"\n" if match.group(2) == b"F" else b"")


def tail(path: Path, lines: int) -> str:
    """The last ``lines`` lines of the pod output logged at ``path`` (at most ``TAIL_BYTES`` of
    the file's end read; a line cut by that start is left out)."""
    with open(path, "rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        handle.seek(max(0, size - TAIL_BYTES))
        data = handle.read()
    records = data.splitlines(keepends=True)
    if size > TAIL_BYTES and records:
        records = records[1:]  # begins mid-line
    if is_container_log(path):
        records = b"".join(k8s_log_text(r) for r in records).splitlines(keepends=True)
    return b"".join(records[-lines:]).decode(errors="replace") if lines > 0 else ""
