"""Kubernetes' ``metadata.generateName``: a name made by the API server when none is given.

Without ``name``, the object is named ``generateName`` (cut to 58 characters) followed by five
random characters from Kubernetes' alphabet (``utilrand.String``: no vowels and no digits that read
as letters, so no word comes out); with ``name``, ``generateName`` is ignored. Either way the field
is then dropped: the object is stored and shown under its name. ``hyperjob apply`` draws the
characters from the system's randomness; ``hyperjob simulate`` from a source seeded by the
scenario, so that a scenario always names its objects the same.
"""

from __future__ import annotations

import random

from .base import DNS_LABEL_MAX, RawDocument
from .errors import ManifestError

SUFFIX_LENGTH = 5
ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
PREFIX_MAX = DNS_LABEL_MAX - SUFFIX_LENGTH


def with_generated_name(document: RawDocument, source: random.Random) -> RawDocument:
    """``document`` with its name made from ``metadata.generateName`` (and that field dropped)."""
    metadata = document.get("metadata")
    if not isinstance(metadata, dict) or "generateName" not in metadata:
        return document
    prefix = metadata["generateName"]
    kept = {k: v for k, v in metadata.items() if k != "generateName"}
    if kept.get("name"):
        return {**document, "metadata": kept}
    if not isinstance(prefix, str) or not prefix:
        raise ManifestError("$.metadata.generateName", "a non-empty prefix is needed when no name is given")
    suffix = "".join(source.choice(ALPHABET) for _ in range(SUFFIX_LENGTH))
    return {**document, "metadata": {**kept, "name": prefix[:PREFIX_MAX] + suffix}}
