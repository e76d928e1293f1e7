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
READ_BYTES = 64 * 1024  # what one ``LogReader.read`` takes at most

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
    with LogReader(path) as log:
        return log.tail(lines).decode(errors="replace")


class LogReader:
    """A pod's log read as it grows (``hyperjob logs -f``, the apiserver's ``pods/log``): its last
    lines (``tail``) or its start, then each ``read`` the output written since. A container log's
    record half-written is read once it is whole; ``read(final=True)`` takes it as it is."""

    def __init__(self, path: Path) -> None:
        self.container = is_container_log(path)  # podman's k8s-file log: one record a line
        self._handle = open(path, "rb")  # noqa: SIM115 - closed by close() or the with block

    def __enter__(self) -> LogReader:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._handle.close()

    def tail(self, lines: int) -> bytes:
        """The last ``lines`` lines written so far; the next ``read`` goes on from there."""
        size = self._handle.seek(0, os.SEEK_END)
        self._handle.seek(max(0, size - TAIL_BYTES))
        records = self._handle.read().splitlines(keepends=True)
        if size > TAIL_BYTES and records:
            records = records[1:]  # begins mid-line
        if self.container:
            records = b"".join(k8s_log_text(r) for r in records).splitlines(keepends=True)
        return b"".join(records[-lines:]) if lines > 0 else b""

    def read(self, final: bool = False) -> bytes:
        """Output written since the last read, up to about ``READ_BYTES`` (b"" when none)."""
        if not self.container:
            return self._handle.read(READ_BYTES)
        out: list[bytes] = []
        taken = 0
        while taken < READ_BYTES and (record := self._handle.readline()):
            if not record.endswith(b"\n") and not final:
                self._handle.seek(-len(record), os.SEEK_CUR)  # half-written: read it whole later
                break
            out.append(k8s_log_text(record))
            taken += len(record)
        return b"".join(out)
