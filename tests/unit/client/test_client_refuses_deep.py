"""The client refuses to publish a manifest nested beyond the API's depth, naming where (issue 33,
item 4): nothing is sent, so no such message reaches the log the operators' tools read."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from hyperjob import api
from hyperjob.client import Client


class NoBus:
    """A bus that fails the test if anything is published."""

    async def publish(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("a refused manifest was published")


def nested(levels: int) -> dict[str, Any]:
    inner: dict[str, Any] = {}
    value = inner
    for _ in range(levels):
        value["x"] = {}
        value = value["x"]
    return {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "deep"}, "spec": inner}


@pytest.mark.parametrize("levels", [api.manifest.MAX_DEPTH + 1, 100_000])
def test_a_manifest_nested_too_deep_is_refused_before_it_is_sent(levels: int) -> None:
    client = Client(NoBus(), None)  # type: ignore[arg-type]
    with pytest.raises(api.ManifestError) as refused:
        asyncio.run(client.apply(nested(levels)))
    assert f"nested more than {api.manifest.MAX_DEPTH} levels deep" in str(refused.value)
    assert "$.spec.x.x" in str(refused.value)  # where
