"""The store contract, run against the real ``RedisStore`` and ``InMemoryStore``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import msgspec
import pytest

from store import (Binding, InMemoryStore, Output, RedisStore, Repository, UnknownNodeError, VersionConflictError,
                   Write)
from testkit.isolation import new_namespace, open_redis_store

pytestmark = pytest.mark.service


@pytest.fixture(params=["memory", "redis"])
async def any_store(request: pytest.FixtureRequest) -> AsyncIterator[InMemoryStore | RedisStore]:
    if request.param == "memory":
        yield InMemoryStore()
    else:
        async with open_redis_store(request.getfixturevalue("redis_url"), new_namespace()) as s:
            yield s


class JobDoc(msgspec.Struct, frozen=True):
    name: str
    phase: str


# -- documents ---------------------------------------------------------------------------------

async def test_put_creates_version_one_and_each_write_increments(any_store) -> None:
    assert await any_store.put_if_version("job", "a", JobDoc("a", "Pending"), 0) == 1
    assert await any_store.put_if_version("job", "a", JobDoc("a", "Running"), 1) == 2
    doc = await any_store.get("job", "a")
    assert doc is not None and doc.version == 2 and doc.decode(JobDoc) == JobDoc("a", "Running")


async def test_put_with_stale_version_raises_conflict_with_fields(any_store) -> None:
    await any_store.put_if_version("job", "a", b'{"x":1}', None)
    with pytest.raises(VersionConflictError) as err:
        await any_store.put_if_version("job", "a", b'{"x":2}', 0)
    assert (err.value.kind, err.value.name, err.value.expected, err.value.actual) == ("job", "a", 0, 1)
    assert (await any_store.get("job", "a")).data == b'{"x":1}'


async def test_get_many_and_list(any_store) -> None:
    for name in ["b", "a", "c"]:
        await any_store.put_if_version("queue", name, {"n": name}, None)
    await any_store.put_if_version("other", "z", {"n": "z"}, None)
    many = await any_store.get_many("queue", ["a", "missing", "c"])
    assert many["missing"] is None and many["a"].data == b'{"n":"a"}' and many["c"].version == 1
    assert list(await any_store.list("queue")) == ["a", "b", "c"]
    assert await any_store.get_many("queue", []) == {}
    assert await any_store.list("empty") == {}


async def test_delete_is_idempotent_and_version_checked(any_store) -> None:
    await any_store.put_if_version("job", "a", {}, None)
    with pytest.raises(VersionConflictError):
        await any_store.delete("job", "a", expected_version=7)
    await any_store.delete("job", "a", expected_version=1)
    await any_store.delete("job", "a")
    assert await any_store.get("job", "a") is None


async def test_repository_decodes_and_builds_writes(any_store) -> None:
    jobs = Repository(any_store, "job", JobDoc)
    await jobs.save("a", JobDoc("a", "Pending"), 0)
    got = await jobs.get("a")
    assert got is not None and got.value == JobDoc("a", "Pending") and got.version == 1
    result = await any_store.apply("c", "e1", [jobs.put("a", JobDoc("a", "Running"), got.version)])
    assert result.ok and result.versions == [2]
    assert {n: v.value.phase for n, v in (await jobs.list()).items()} == {"a": "Running"}


# -- apply -------------------------------------------------------------------------------------

async def test_apply_same_event_twice_has_one_effect_and_returns_recorded_outputs(any_store) -> None:
    outputs = [Output(subject="job.phase.c1", msg_id="out-1", payload=b"{}"), ("job.pod.start.c1", "out-2", b"[]")]
    first = await any_store.apply("job-controller", "evt-1", [Write.put("job", "a", {"n": 1})], outputs)
    second = await any_store.apply("job-controller", "evt-1", [Write.put("job", "a", {"n": 2})], [])
    assert first.ok and not first.duplicate and first.versions == [1]
    assert second.duplicate and not second.ok
    assert second.outputs == first.outputs == [outputs[0], Output(subject="job.pod.start.c1", msg_id="out-2",
                                                                 payload=b"[]")]
    doc = await any_store.get("job", "a")
    assert doc.version == 1 and doc.data == b'{"n":1}'


async def test_apply_markers_are_per_consumer(any_store) -> None:
    assert (await any_store.apply("a", "e", [Write.put("k", "x", {})])).ok
    assert (await any_store.apply("b", "e", [Write.put("k", "x", {})])).ok
    assert (await any_store.get("k", "x")).version == 2


async def test_apply_conflict_writes_nothing_and_sets_no_marker(any_store) -> None:
    await any_store.put_if_version("job", "a", {"v": 1}, None)
    writes = [Write.put("job", "b", {"v": 1}, 0), Write.put("job", "a", {"v": 2}, 5)]
    result = await any_store.apply("c", "e", writes, [("s", "m", b"")])
    assert result.conflict is not None and (result.conflict.name, result.conflict.actual) == ("a", 1)
    assert not result.ok and result.outputs == []
    assert await any_store.get("job", "b") is None
    retry = await any_store.apply("c", "e", [Write.put("job", "b", {"v": 1}, 0), Write.put("job", "a", {"v": 2}, 1)])
    assert retry.ok and retry.versions == [1, 2]


async def test_apply_deletes_and_bytes_outputs(any_store) -> None:
    await any_store.put_if_version("pod", "p", {}, None)
    result = await any_store.apply("c", "e", [Write.delete("pod", "p", 1)], [b"opaque"])
    assert result.ok and result.versions == [0] and result.outputs == [b"opaque"]
    assert await any_store.get("pod", "p") is None
    assert (await any_store.apply("c", "e", [])).outputs == [b"opaque"]


async def test_concurrent_applies_of_one_event_have_one_effect(any_store) -> None:
    results = await asyncio.gather(*(any_store.apply("c", "same", [Write.put("n", "x", {"i": i})],
                                                     [("s", f"m{i}", b"")]) for i in range(20)))
    assert sum(r.ok for r in results) == 1 and sum(r.duplicate for r in results) == 19
    winner = next(r for r in results if r.ok)
    assert all(r.outputs == winner.outputs for r in results)
    assert (await any_store.get("n", "x")).version == 1


# -- node accounting ---------------------------------------------------------------------------

GPU_NODE = {"cpu": 64.0, "memory": 512 * 2**30, "nvidia.com/gpu": 8.0}
POD = {"cpu": 8.0, "memory": 64 * 2**30, "nvidia.com/gpu": 2.0, "pods": 1.0}


async def test_gang_binds_all_or_nothing_across_nodes(any_store) -> None:
    await any_store.set_node_allocatable("c1", "n1", GPU_NODE)
    await any_store.set_node_allocatable("c1", "n2", {**GPU_NODE, "nvidia.com/gpu": 2.0})
    gang = [Binding(f"j-w-{i}", "n1", POD) for i in range(3)]
    gang += [Binding("j-w-3", "n2", POD), Binding("j-w-4", "n2", POD)]
    result = await any_store.bind_gang("c1", gang)
    assert not result.ok and result.failed_node == "n2" and result.missing == {"nvidia.com/gpu": 2.0}
    assert await any_store.allocations("c1") == {}
    assert (await any_store.node_usage("c1", "n1")).used.get("cpu", 0.0) == 0.0
    ok = await any_store.bind_gang("c1", gang[:4])
    assert ok.ok
    usage = await any_store.node_usage("c1", "n1")
    assert usage.free["nvidia.com/gpu"] == 2.0 and usage.free["pods"] == 107.0
    assert set(await any_store.allocations("c1")) == {"j-w-0", "j-w-1", "j-w-2", "j-w-3"}


async def test_rebinding_the_same_gang_is_a_no_op_and_moving_a_pod_fails(any_store) -> None:
    await any_store.set_node_allocatable("c1", "n1", GPU_NODE)
    await any_store.set_node_allocatable("c1", "n2", GPU_NODE)
    gang = [("p0", "n1", POD), ("p1", "n1", POD)]
    assert (await any_store.bind_gang("c1", gang)).ok
    assert (await any_store.bind_gang("c1", gang)).ok
    assert (await any_store.node_usage("c1", "n1")).used["nvidia.com/gpu"] == 4.0
    moved = await any_store.bind_gang("c1", [("p1", "n2", POD)])
    assert not moved.ok and (moved.failed_pod, moved.bound_node) == ("p1", "n1")


async def test_unknown_node_fails_the_bind(any_store) -> None:
    result = await any_store.bind_gang("c1", [("p", "ghost", {"cpu": 1.0})])
    assert not result.ok and result.failed_node == "ghost" and result.missing == {}
    with pytest.raises(UnknownNodeError):
        await any_store.node_usage("c1", "ghost")


async def test_release_is_idempotent_and_frees_the_request(any_store) -> None:
    await any_store.set_node_allocatable("c1", "n1", {"cpu": 4.0})
    assert (await any_store.bind_gang("c1", [("p", "n1", {"cpu": 4.0})])).ok
    assert not (await any_store.bind_gang("c1", [("q", "n1", {"cpu": 1.0})])).ok
    assert await any_store.release("c1", "p") is True
    assert await any_store.release("c1", "p") is False
    assert (await any_store.node_usage("c1", "n1")).free["cpu"] == 4.0
    assert (await any_store.bind_gang("c1", [("q", "n1", {"cpu": 1.0})])).ok
    assert await any_store.release_many("c1", ["q", "nope"]) == 1


async def test_fractional_requests_fill_a_node_exactly(any_store) -> None:
    await any_store.set_node_allocatable("c1", "n1", {"cpu": 1.0})
    for i in range(10):
        assert (await any_store.bind_gang("c1", [(f"p{i}", "n1", {"cpu": 0.1})])).ok, i
    assert not (await any_store.bind_gang("c1", [("p10", "n1", {"cpu": 0.1})])).ok
    assert await any_store.release_many("c1", [f"p{i}" for i in range(10)]) == 10
    assert abs((await any_store.node_usage("c1", "n1")).used["cpu"]) < 1e-9


async def test_racing_gangs_never_oversubscribe_a_node(any_store) -> None:
    await any_store.set_node_allocatable("c1", "n1", {"cpu": 10.0, "nvidia.com/gpu": 8.0})
    await any_store.set_node_allocatable("c1", "n2", {"cpu": 10.0, "nvidia.com/gpu": 8.0})

    async def gang(i: int) -> bool:
        pods = [(f"g{i}-0", "n1", {"cpu": 1.0, "nvidia.com/gpu": 1.0}),
                (f"g{i}-1", "n2" if i % 2 else "n1", {"cpu": 1.0, "nvidia.com/gpu": 1.0})]
        return (await any_store.bind_gang("c1", pods)).ok

    results = await asyncio.gather(*(gang(i) for i in range(40)))
    nodes = await any_store.nodes("c1")
    for usage in nodes.values():
        assert all(usage.used.get(r, 0.0) <= a for r, a in usage.allocatable.items())
    assert nodes["n1"].used["nvidia.com/gpu"] == 8.0
    bound = await any_store.allocations("c1")
    assert len(bound) == 2 * sum(results)
    per_node: dict[str, float] = {}
    for b in bound.values():
        per_node[b.node] = per_node.get(b.node, 0.0) + b.request["nvidia.com/gpu"]
    assert per_node == {n: u.used["nvidia.com/gpu"] for n, u in nodes.items() if u.used.get("nvidia.com/gpu")}


async def test_nodes_lists_registered_nodes_and_pods_default(any_store) -> None:
    await any_store.set_node_allocatable("c1", "b", {"cpu": 2.0})
    await any_store.set_node_allocatable("c1", "a", {"cpu": 1.0, "pods": 4.0})
    await any_store.set_node_allocatable("c2", "x", {"cpu": 1.0})
    nodes = await any_store.nodes("c1")
    assert list(nodes) == ["a", "b"]
    assert nodes["a"].allocatable == {"cpu": 1.0, "pods": 4.0} and nodes["b"].allocatable["pods"] == 110.0
    await any_store.remove_node("c1", "a")
    assert list(await any_store.nodes("c1")) == ["b"]


async def test_apply_many_applies_each_item_atomically_in_order(any_store) -> None:
    from store import ApplyItem  # noqa: PLC0415

    await any_store.apply("c", "seen-before", [Write.put("pod", "old", {})], [("s", "old-out", b"")])
    items = [
        ApplyItem(event_id="e1", writes=[Write.put("pod", "a", {"n": 1}, 0)], outputs=[("s", "o1", b"1")]),
        ApplyItem(event_id="e2", writes=[Write.put("pod", "a", {"n": 2}, 1)], outputs=[("s", "o2", b"2")]),
        ApplyItem(event_id="e3", writes=[Write.put("pod", "a", {"n": 3}, 1)], outputs=[("s", "o3", b"3")]),
        ApplyItem(event_id="seen-before", writes=[Write.put("pod", "old", {"again": True})]),
    ]
    results = await any_store.apply_many("c", items)
    assert [r.ok for r in results] == [True, True, False, False]
    assert results[1].versions == [2] and results[2].conflict.actual == 2
    assert results[3].duplicate and results[3].outputs == [Output(subject="s", msg_id="old-out", payload=b"")]
    assert (await any_store.get("pod", "a")).data == b'{"n":2}'
    assert (await any_store.get("pod", "old")).data == b"{}"
    assert await any_store.apply_many("c", []) == []


async def test_clear_forgets_everything_under_the_prefix(any_store) -> None:
    await any_store.apply("c", "e", [Write.put("job", "a", {})])
    await any_store.set_node_allocatable("c1", "n1", {"cpu": 1.0})
    assert await any_store.clear() > 0
    assert await any_store.list("job") == {} and await any_store.nodes("c1") == {}
    assert (await any_store.apply("c", "e", [Write.put("job", "a", {})])).ok


async def test_malformed_gangs_are_rejected_before_touching_anything(any_store) -> None:
    await any_store.set_node_allocatable("c1", "n1", {"cpu": 4.0})
    with pytest.raises(ValueError, match="twice"):
        await any_store.bind_gang("c1", [("p", "n1", {"cpu": 1.0}), ("p", "n1", {"cpu": 1.0})])
    with pytest.raises(ValueError, match="negative"):
        await any_store.bind_gang("c1", [("p", "n1", {"cpu": -1.0})])
    assert await any_store.allocations("c1") == {} and (await any_store.bind_gang("c1", [])).ok
