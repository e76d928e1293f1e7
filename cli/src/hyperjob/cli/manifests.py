"""Reading ``-f`` arguments as kubectl does: several files, directories (their ``.yaml``, ``.yml``
and ``.json`` files, sorted; ``-R`` for subdirectories), ``-`` for stdin; every document checked
the way the system will check it before anything is sent.

Each document becomes an ``Object``: where it came from, its kind and name, the document (server
metadata dropped) and the first problem found, if any. A file too large to be a manifest is
refused before it is parsed (parsing megabytes of YAML takes minutes and gigabytes).
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass
from pathlib import Path

from hyperjob import api
from hyperjob.client import MAX_MANIFEST_BYTES, check_size

# A file may hold many objects, each at most MAX_MANIFEST_BYTES once sent.
MAX_FILE_BYTES = 8 * MAX_MANIFEST_BYTES
SUFFIXES = (".yaml", ".yml", ".json")
_NAMES = random.SystemRandom()


@dataclass
class Object:
    source: str
    kind: str
    name: str
    document: api.RawDocument
    error: str = ""

    @property
    def namespace(self) -> str:
        """The object's namespace (``default`` when it names none)."""
        metadata = self.document.get("metadata")
        written = metadata.get("namespace") if isinstance(metadata, dict) else None
        return written if isinstance(written, str) and written else api.DEFAULT_NAMESPACE

    @property
    def ref(self) -> str:
        """``kind/name`` as kubectl prints it (``hyperjob/llm-train``)."""
        return f"{self.kind.lower()}/{self.name}"


class SourceError(Exception):
    """A -f argument that cannot be read at all (missing, too large, not YAML)."""


def paths(filenames: tuple[str, ...], recursive: bool) -> list[str]:
    """The files named by -f, directories expanded."""
    found: list[str] = []
    for name in filenames:
        path = Path(name)
        if name == "-":
            found.append(name)
        elif path.is_dir():
            pattern = "**/*" if recursive else "*"
            found += sorted(str(p) for p in path.glob(pattern) if p.is_file() and p.suffix in SUFFIXES)
        elif path.is_file():
            found.append(name)
        else:
            raise SourceError(f'error: the path "{name}" does not exist')
    if not found:
        raise SourceError(f"error: no objects passed (no {', '.join(SUFFIXES)} files in {', '.join(filenames)})")
    return found


def read(source: str) -> str:
    if source == "-":
        data = sys.stdin.buffer.read(MAX_FILE_BYTES + 1)
    else:
        size = Path(source).stat().st_size
        if size > MAX_FILE_BYTES:
            raise SourceError(f"error: {source}: the file is {_mib(size)}; the limit is {_mib(MAX_FILE_BYTES)}")
        data = Path(source).read_bytes()
    if len(data) > MAX_FILE_BYTES:
        raise SourceError(f"error: {source}: more than {_mib(MAX_FILE_BYTES)}")
    return data.decode("utf-8", errors="replace")


def objects(source: str, namespace: str | None = None) -> list[Object]:
    """Every document of one source, each checked on its own (a bad one does not hide the others)."""
    try:
        documents = api.load_documents(read(source))
    except api.ManifestError as exc:
        raise SourceError(f"error: {source}: {exc}") from None
    return [_check(source, document, namespace) for document in documents]


def _check(source: str, document: api.RawDocument, namespace: str | None) -> Object:
    document = api.without_server_fields(document)
    try:
        document = api.with_generated_name(document, _NAMES)  # as the API server does (generateName)
    except api.ManifestError as exc:
        return Object(source, str(document.get("kind") or "object"), "?", document, str(exc))
    written_metadata = document.get("metadata")
    metadata: api.RawDocument = written_metadata if isinstance(written_metadata, dict) else {}
    kind = str(document.get("kind") or "object")
    name = str(metadata.get("name") or "?")
    found = Object(source, kind, name, document)
    if namespace is not None:
        written = metadata.get("namespace")
        if written not in (None, namespace):
            found.error = (
                f"the namespace from the provided object {written!r} does not match the namespace {namespace!r}"
            )
            return found
        if kind not in ("Queue", "PriorityClass"):  # cluster-scoped kinds have no namespace
            found.document = {**document, "metadata": {**metadata, "namespace": namespace}}
    try:
        check_size(found.document)
        api.decode(found.document)
    except api.ManifestError as exc:
        found.error = str(exc)
    return found


def _mib(size: int) -> str:
    return f"{size / 1024 / 1024:.1f} MiB"


__all__ = ["MAX_FILE_BYTES", "MAX_MANIFEST_BYTES", "Object", "SourceError", "objects", "paths"]
