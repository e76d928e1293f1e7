"""The store contract, run against the real ``RedisStore`` and ``InMemoryStore`` alike.

``commit`` is the one write every service makes (ADR 0002, ADR 0004): dedup markers, version
checks, binds and unbinds (compare-and-set against each node's allocatable), the outputs recorded
for a redelivery and kept in the instance's outbox until published, and the sentinel that tells
an instance its store lost its state. ``restore`` puts back what a changelog recorded.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import msgspec
import pytest

from hyperjob.store import (
    Binding,
    Commit,
    Doc,
    InMemoryStore,
    Output,
    Unbind,
    VersionConflictError,
    Write,
    binding_kind,
    render_entry,
)
from hyperjob.store.redis_store import RedisStore
from hyperjob.testkit.isolation import new_namespace, open_redis_store

pytestmark = pytest.mark.service

AnyStore = InMemoryStore | RedisStore


@pytest.fixture(params=["memory", "redis"])
async def any_store(request: pytest.FixtureRequest) -> AsyncIterator[AnyStore]:
    if request.param == "memory":
        yield InMemoryStore()
    else:
        async with open_redis_store(request.getfixturevalue("redis_url"), new_namespace()) as s:
            yield s


class JobDoc(msgspec.Struct, frozen=True):
    name: str
    phase: str


def out(subject: str, msg_id: str, payload: bytes = b"{}", headers: dict[str, str] | None = None) -> Output:
    return Output(subject=subject, msg_id=msg_id, payload=payload, headers=headers)


async def used(store: AnyStore, cluster: str, node: str) -> dict[str, float]:
    usage = (await store.nodes(cluster))[node].used
    return {r: a for r, a in usage.items() if abs(a) > 1e-9}


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
    assert await any_store.put_if_version("job", "a", {}, 0) == 1  # a new document starts again at 1


# -- markers ----------------------------------------------------------------------------------


async def test_a_commit_writes_every_document_and_returns_their_versions(any_store) -> None:
    await any_store.put_if_version("job", "old", {}, None)
    result = await any_store.commit(
        Commit(
            consumer="c",
            event_ids=["e1"],
            writes=[
                Write.put("job", "a", JobDoc("a", "Pending"), 0),
                Write.put("job", "old", {"n": 2}, 1),
                Write.delete("job", "gone"),
            ],
        )
    )
    assert result.ok and result.versions == [1, 2, 0] and result.describe() == "committed"
    assert (await any_store.get("job", "old")).version == 2


async def test_the_same_event_committed_twice_has_one_effect(any_store) -> None:
    first = await any_store.commit(
        Commit(consumer="job-controller", event_ids=["evt-1"], writes=[Write.put("job", "a", {"n": 1})])
    )
    second = await any_store.commit(
        Commit(consumer="job-controller", event_ids=["evt-1"], writes=[Write.put("job", "a", {"n": 2})])
    )
    assert first.ok and not second.ok
    assert (second.refusal, second.event_id) == ("duplicate", "evt-1") and "evt-1" in second.describe()
    doc = await any_store.get("job", "a")
    assert doc.version == 1 and doc.data == b'{"n":1}'


async def test_one_seen_event_in_a_batch_refuses_the_whole_batch(any_store) -> None:
    assert (await any_store.commit(Commit(consumer="c", event_ids=["e2"]))).ok
    result = await any_store.commit(
        Commit(consumer="c", event_ids=["e1", "e2", "e3"], writes=[Write.put("job", "a", {})])
    )
    assert (result.refusal, result.event_id) == ("duplicate", "e2")
    assert await any_store.get("job", "a") is None
    assert set(await any_store.seen("c", ["e1", "e2", "e3"])) == {"e2"}  # e1, e3: no marker was set


async def test_markers_are_per_consumer(any_store) -> None:
    assert (await any_store.commit(Commit(consumer="a", event_ids=["e"], writes=[Write.put("k", "x", {})]))).ok
    assert (await any_store.commit(Commit(consumer="b", event_ids=["e"], writes=[Write.put("k", "x", {})]))).ok
    assert (await any_store.get("k", "x")).version == 2


async def test_seen_returns_what_each_event_recorded_to_publish_again(any_store) -> None:
    recorded = [out("job.phase.c1", "o1", b'{"a":1}', {"Hyperjob-Version": "3"}), out("hj.x", "o2")]
    await any_store.commit(Commit(consumer="c", event_ids=["e1", "e2"], outputs=recorded, outbox_key="o:i:e1"))
    await any_store.commit(Commit(consumer="c", event_ids=["quiet"]))  # handled, decided nothing to say
    seen = await any_store.seen("c", ["e1", "e2", "quiet", "never"])
    assert seen == {"e1": recorded, "e2": recorded, "quiet": []}
    assert await any_store.seen("other", ["e1"]) == {}
    assert await any_store.seen("c", []) == {}


async def test_concurrent_commits_of_one_event_have_one_effect(any_store) -> None:
    results = await asyncio.gather(
        *(
            any_store.commit(
                Commit(
                    consumer="c",
                    event_ids=["same"],
                    writes=[Write.put("n", "x", {"i": i})],
                    outputs=[out("s", f"m{i}")],
                    outbox_key=f"o:c:{i}",
                )
            )
            for i in range(20)
        )
    )
    assert sum(r.ok for r in results) == 1 and sum(r.refusal == "duplicate" for r in results) == 19
    winner = next(i for i, r in enumerate(results) if r.ok)
    assert (await any_store.get("n", "x")).data == msgspec.json.encode({"i": winner})
    assert await any_store.seen("c", ["same"]) == {"same": [out("s", f"m{winner}")]}


# -- versions ---------------------------------------------------------------------------------


async def test_a_version_conflict_writes_nothing_sets_no_marker_and_records_nothing(any_store) -> None:
    await any_store.put_if_version("job", "a", {"v": 1}, None)
    writes = [Write.put("job", "b", {"v": 1}, 0), Write.put("job", "a", {"v": 2}, 5)]
    result = await any_store.commit(
        Commit(
            consumer="c",
            event_ids=["e"],
            writes=writes,
            outputs=[out("s", "m")],
            outbox="i",
            outbox_key="o:i:e",
            sentinel="",
        )
    )
    assert result.refusal == "conflict"
    assert (result.kind, result.name, result.expected, result.actual) == ("job", "a", 5, 1)
    assert "job/a is at version 1, not 5" in result.describe()
    assert await any_store.get("job", "b") is None
    assert await any_store.seen("c", ["e"]) == {} and await any_store.outbox("i") == []
    retry = await any_store.commit(
        Commit(
            consumer="c",
            event_ids=["e"],
            writes=[Write.put("job", "b", {"v": 1}, 0), Write.put("job", "a", {"v": 2}, 1)],
        )
    )
    assert retry.ok and retry.versions == [1, 2]


async def test_creating_what_exists_and_deleting_at_a_stale_version_conflict(any_store) -> None:
    await any_store.put_if_version("job", "a", {}, None)
    exists = await any_store.commit(Commit(writes=[Write.put("job", "a", {}, 0)]))
    stale = await any_store.commit(Commit(writes=[Write.delete("job", "a", 2)]))
    assert (exists.refusal, exists.actual) == ("conflict", 1) and (stale.refusal, stale.expected) == ("conflict", 2)
    assert (await any_store.get("job", "a")).version == 1


async def test_two_replicas_deciding_on_the_same_version_one_wins(any_store) -> None:
    await any_store.put_if_version("owner", "h", {"admitted": False}, None)
    results = await asyncio.gather(
        *(
            any_store.commit(
                Commit(
                    consumer=f"replica-{i}", event_ids=[f"round-{i}"], writes=[Write.put("owner", "h", {"by": i}, 1)]
                )
            )
            for i in range(10)
        )
    )
    assert sum(r.ok for r in results) == 1 and all(r.refusal == "conflict" for r in results if not r.ok)
    assert (await any_store.get("owner", "h")).version == 2


# -- binds and unbinds -------------------------------------------------------------------------

GPU_NODE = {"cpu": 64.0, "memory": 512 * 2**30, "nvidia.com/gpu": 8.0}
POD = {"cpu": 8.0, "memory": 64 * 2**30, "nvidia.com/gpu": 2.0, "pods": 1.0}


def bind(pod: str, node: str, request: dict[str, float] = POD, uid: str = "", cluster: str = "c1") -> Binding:
    return Binding(cluster, pod, node, dict(request), uid)


async def test_a_gang_binds_all_or_nothing_across_nodes(any_store) -> None:
    await any_store.set_node_allocatable("c1", "n1", GPU_NODE)
    await any_store.set_node_allocatable("c1", "n2", {**GPU_NODE, "nvidia.com/gpu": 2.0})
    gang = [bind(f"j-w-{i}", "n1") for i in range(3)] + [bind("j-w-3", "n2"), bind("j-w-4", "n2")]
    refused = await any_store.commit(Commit(binds=gang, writes=[Write.put("pgphase", "j", {"phase": "Running"})]))
    assert (refused.refusal, refused.node, refused.missing) == ("no-room", "n2", {"nvidia.com/gpu": 2.0})
    assert "n2 lacks" in refused.describe()
    assert await any_store.allocations("c1") == {} and await used(any_store, "c1", "n1") == {}
    assert await any_store.get("pgphase", "j") is None  # the gang's other writes did not land either
    assert (await any_store.commit(Commit(binds=gang[:4]))).ok
    usage = (await any_store.nodes("c1"))["n1"]
    assert usage.free["nvidia.com/gpu"] == 2.0 and usage.free["pods"] == 107.0
    assert set(await any_store.allocations("c1")) == {"j-w-0", "j-w-1", "j-w-2", "j-w-3"}


async def test_binding_a_bound_pod_to_its_node_is_a_no_op_and_to_another_node_is_refused(any_store) -> None:
    await any_store.set_node_allocatable("c1", "n1", GPU_NODE)
    await any_store.set_node_allocatable("c1", "n2", GPU_NODE)
    gang = [bind("p0", "n1", uid="u0"), bind("p1", "n1", uid="u1")]
    assert (await any_store.commit(Commit(binds=gang))).ok
    assert (await any_store.commit(Commit(binds=gang))).ok
    assert (await used(any_store, "c1", "n1"))["nvidia.com/gpu"] == 4.0
    moved = await any_store.commit(Commit(binds=[bind("p2", "n2"), bind("p1", "n2")]))
    assert (moved.refusal, moved.pod, moved.node) == ("bound-elsewhere", "p1", "n1")
    assert "p2" not in await any_store.allocations("c1")
    assert (await any_store.allocations("c1"))["p1"] == Binding("c1", "p1", "n1", POD, "u1")


async def test_many_nodes_registered_at_once_are_each_registered_and_a_second_time_keeps_their_bindings(
    any_store,
) -> None:
    nodes = {f"n{i}": GPU_NODE for i in range(50)}
    await any_store.set_nodes_allocatable("c1", nodes)
    await any_store.set_nodes_allocatable("c1", {})
    usage = await any_store.nodes("c1")
    assert sorted(usage) == sorted(nodes) and usage["n7"].allocatable["pods"] == 110.0
    assert (await any_store.commit(Commit(binds=[bind("p", "n7")]))).ok
    await any_store.set_nodes_allocatable("c1", {"n7": GPU_NODE})
    assert (await used(any_store, "c1", "n7"))["nvidia.com/gpu"] == POD["nvidia.com/gpu"]


async def test_commits_naming_a_sentinel_count_its_epoch_and_one_made_on_an_older_epoch_is_refused(any_store) -> None:
    await any_store.mark_alive("splitter")
    start = await any_store.epoch("splitter")
    first = await any_store.commit(Commit(sentinel="splitter", epoch=start, writes=[Write.put("k", "a", {"v": 1})]))
    assert first.ok and first.epoch == start + 1 == await any_store.epoch("splitter")
    stale = await any_store.commit(Commit(sentinel="splitter", epoch=start, writes=[Write.put("k", "b", {"v": 1})]))
    assert (stale.refusal, stale.epoch) == ("stale", start + 1) and "another replica" in stale.describe()
    assert await any_store.get("k", "b") is None
    assert (await any_store.commit(Commit(sentinel="splitter", writes=[Write.put("k", "b", {"v": 1})]))).ok
    await any_store.mark_alive("splitter")  # marking a live instance alive keeps its epoch
    assert await any_store.epoch("splitter") == start + 2


async def test_an_instances_lease_has_one_holder_until_it_is_given_back_or_lapses(any_store) -> None:
    assert await any_store.take_lease("splitter", "replica-a", 0.3)
    assert not await any_store.take_lease("splitter", "replica-b", 0.3)  # held by a
    assert await any_store.take_lease("splitter", "replica-a", 0.3)  # renewed by its holder
    await any_store.release_lease("splitter", "replica-b")  # only the holder gives it back
    assert not await any_store.take_lease("splitter", "replica-b", 0.3)
    assert await any_store.take_lease("job-controller-c1", "replica-b", 0.3)  # one lease per instance
    await any_store.release_lease("splitter", "replica-a")
    assert await any_store.take_lease("splitter", "replica-b", 0.3)  # given back: taken at once
    await asyncio.sleep(0.5)  # b neither renews nor gives it back: it lapses
    assert await any_store.take_lease("splitter", "replica-a", 0.3)


async def test_a_node_nobody_registered_refuses_the_bind(any_store) -> None:
    result = await any_store.commit(Commit(binds=[bind("p", "ghost", {"cpu": 1.0})]))
    assert (result.refusal, result.node) == ("unknown-node", "ghost") and "ghost" in result.describe()
    await any_store.set_node_allocatable("c1", "n1", {"cpu": 1.0})
    await any_store.remove_node("c1", "n1")
    assert (await any_store.commit(Commit(binds=[bind("p", "n1", {"cpu": 1.0})]))).refusal == "unknown-node"
    assert "n1" not in await any_store.nodes("c1")


async def test_unbinds_give_the_request_back_and_are_idempotent(any_store) -> None:
    await any_store.set_node_allocatable("c1", "n1", {"cpu": 4.0})
    assert (await any_store.commit(Commit(binds=[bind("p", "n1", {"cpu": 4.0})]))).ok
    assert (await any_store.commit(Commit(binds=[bind("q", "n1", {"cpu": 1.0})]))).refusal == "no-room"
    assert (await any_store.commit(Commit(unbinds=[Unbind("c1", "p"), Unbind("c1", "never-bound")]))).ok
    assert (await any_store.commit(Commit(unbinds=[Unbind("c1", "p")]))).ok
    assert await used(any_store, "c1", "n1") == {}
    assert (await any_store.commit(Commit(binds=[bind("q", "n1", {"cpu": 1.0})]))).ok


async def test_an_unbind_and_a_bind_in_one_commit_make_room_first(any_store) -> None:
    # A pod recreated under the same name (new uid) takes the old incarnation's place at once.
    await any_store.set_node_allocatable("c1", "n1", {"cpu": 4.0})
    await any_store.set_node_allocatable("c1", "n2", {"cpu": 4.0})
    assert (await any_store.commit(Commit(binds=[bind("p", "n1", {"cpu": 4.0}, uid="u1")]))).ok
    swap = Commit(
        unbinds=[Unbind("c1", "p")], binds=[bind("p", "n2", {"cpu": 4.0}, uid="u2"), bind("q", "n1", {"cpu": 4.0})]
    )
    assert (await any_store.commit(swap)).ok
    bound = await any_store.allocations("c1")
    assert (bound["p"].node, bound["p"].uid, bound["q"].node) == ("n2", "u2", "n1")
    assert await used(any_store, "c1", "n1") == {"cpu": 4.0} and await used(any_store, "c1", "n2") == {"cpu": 4.0}


async def test_resources_a_node_does_not_declare_are_not_accounted(any_store) -> None:
    # Device-level shares (volcano's vgpu-cores) are the scheduler's to fit, device by device.
    await any_store.set_node_allocatable("c1", "n1", {"cpu": 2.0, "volcano.sh/vgpu-number": 4.0})
    shares = {"cpu": 1.0, "volcano.sh/vgpu-number": 1.0, "volcano.sh/vgpu-cores": 80.0}
    assert (await any_store.commit(Commit(binds=[bind("a", "n1", shares), bind("b", "n1", shares)]))).ok
    assert (await any_store.commit(Commit(binds=[bind("c", "n1", shares)]))).refusal == "no-room"
    usage = (await any_store.nodes("c1"))["n1"]
    assert usage.allocatable == {"cpu": 2.0, "volcano.sh/vgpu-number": 4.0, "pods": 110.0}
    assert usage.free["cpu"] == 0.0 and usage.free["volcano.sh/vgpu-number"] == 2.0


async def test_fractional_requests_fill_a_node_exactly(any_store) -> None:
    await any_store.set_node_allocatable("c1", "n1", {"cpu": 1.0})
    for i in range(10):
        assert (await any_store.commit(Commit(binds=[bind(f"p{i}", "n1", {"cpu": 0.1})]))).ok, i
    assert (await any_store.commit(Commit(binds=[bind("p10", "n1", {"cpu": 0.1})]))).refusal == "no-room"
    assert (await any_store.commit(Commit(unbinds=[Unbind("c1", f"p{i}") for i in range(10)]))).ok
    assert abs((await any_store.nodes("c1"))["n1"].used["cpu"]) < 1e-9


async def test_racing_committers_never_oversubscribe_a_node(any_store) -> None:
    await any_store.set_node_allocatable("c1", "n1", {"cpu": 10.0, "nvidia.com/gpu": 8.0})
    await any_store.set_node_allocatable("c1", "n2", {"cpu": 10.0, "nvidia.com/gpu": 8.0})
    one = {"cpu": 1.0, "nvidia.com/gpu": 1.0}

    async def gang(i: int) -> bool:
        pods = [bind(f"g{i}-0", "n1", one), bind(f"g{i}-1", "n2" if i % 2 else "n1", one)]
        return (await any_store.commit(Commit(consumer=f"scheduler-{i % 2}", binds=pods))).ok

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


async def test_nodes_lists_registered_nodes_per_cluster_and_pods_default(any_store) -> None:
    await any_store.set_node_allocatable("c1", "b", {"cpu": 2.0})
    await any_store.set_node_allocatable("c1", "a", {"cpu": 1.0, "pods": 4.0})
    await any_store.set_node_allocatable("c2", "x", {"cpu": 1.0})
    nodes = await any_store.nodes("c1")
    assert list(nodes) == ["a", "b"]
    assert nodes["a"].allocatable == {"cpu": 1.0, "pods": 4.0} and nodes["b"].allocatable["pods"] == 110.0
    await any_store.set_node_allocatable("c1", "b", {"cpu": 8.0})  # resized: replaced, not merged
    assert (await any_store.nodes("c1"))["b"].allocatable == {"cpu": 8.0, "pods": 110.0}
    await any_store.remove_node("c1", "a")
    assert list(await any_store.nodes("c1")) == ["b"] and list(await any_store.nodes("c2")) == ["x"]


# -- outbox -----------------------------------------------------------------------------------


async def test_outputs_stay_in_the_outbox_until_a_later_commit_says_they_went_out(any_store) -> None:
    first, second = [out("a", "1")], [out("b", "2"), out("b", "3")]
    await any_store.commit(Commit(consumer="c", event_ids=["e1"], outputs=first, outbox="inst", outbox_key="o:inst:e1"))
    await any_store.commit(
        Commit(event_ids=[], outputs=second, outbox="inst", outbox_key="o:inst:r1", writes=[Write.put("k", "x", {})])
    )
    assert await any_store.outbox("inst") == [("o:inst:e1", first), ("o:inst:r1", second)]
    assert await any_store.outbox("other") == []
    await any_store.commit(Commit(writes=[Write.put("k", "y", {})], outbox="inst", published=["o:inst:e1"]))
    assert await any_store.outbox("inst") == [("o:inst:r1", second)]
    # A redelivery still finds the message handled, but what it recorded went out and is forgotten:
    # sent again long after (beyond the bus's duplicate window) it would put old values back.
    assert await any_store.seen("c", ["e1"]) == {"e1": []}
    assert await any_store.seen("c", ["e9"]) == {}


async def test_a_refused_commit_leaves_the_outbox_as_it_was(any_store) -> None:
    await any_store.commit(Commit(outputs=[out("a", "1")], outbox="inst", outbox_key="o:inst:1"))
    refused = await any_store.commit(
        Commit(
            writes=[Write.put("k", "x", {}, 3)],
            outputs=[out("a", "2")],
            outbox="inst",
            outbox_key="o:inst:2",
            published=["o:inst:1"],
        )
    )
    assert refused.refusal == "conflict"
    assert await any_store.outbox("inst") == [("o:inst:1", [out("a", "1")])]


# -- sentinels, wipes and restore --------------------------------------------------------------


async def test_a_commit_naming_a_sentinel_is_refused_until_the_instance_is_marked_alive(any_store) -> None:
    refused = await any_store.commit(
        Commit(consumer="c", event_ids=["e"], writes=[Write.put("k", "x", {})], sentinel="splitter")
    )
    assert refused.refusal == "wiped" and await any_store.get("k", "x") is None
    assert not await any_store.alive("splitter")
    await any_store.mark_alive("splitter")
    assert await any_store.alive("splitter") and not await any_store.alive("global-scheduler")
    assert (
        await any_store.commit(
            Commit(consumer="c", event_ids=["e"], writes=[Write.put("k", "x", {})], sentinel="splitter")
        )
    ).ok


async def test_a_wiped_store_refuses_every_instance_until_each_restores(any_store) -> None:
    for instance in ("splitter", "job-controller-c1"):
        await any_store.mark_alive(instance)
    await any_store.commit(Commit(consumer="c", event_ids=["e"], writes=[Write.put("k", "x", {})], sentinel="splitter"))
    await any_store.set_node_allocatable("c1", "n1", {"cpu": 1.0})
    assert await any_store.clear() > 0  # FLUSHALL, or a new empty Redis behind the same address
    for instance in ("splitter", "job-controller-c1"):
        assert not await any_store.alive(instance)
        result = await any_store.commit(Commit(writes=[Write.put("k", instance, {})], sentinel=instance))
        assert result.refusal == "wiped"
    assert await any_store.list("k") == {} and await any_store.nodes("c1") == {}
    assert await any_store.seen("c", ["e"]) == {}  # the markers went too
    await any_store.mark_alive("splitter")
    assert (await any_store.commit(Commit(writes=[Write.put("k", "x", {})], sentinel="splitter"))).ok
    assert (
        await any_store.commit(Commit(writes=[Write.put("k", "y", {})], sentinel="job-controller-c1"))
    ).refusal == "wiped"


async def test_restore_puts_documents_back_at_their_recorded_versions(any_store) -> None:
    docs = [
        Doc(kind="hyperjob", name="h1", version=7, data=b'{"n":"h1"}'),
        Doc(kind="hyperjob", name="h2", version=1, data=b'{"n":"h2"}'),
        Doc(kind="queue", name="q", version=3, data=b'{"q":1}'),
    ]
    await any_store.restore(docs)
    assert await any_store.list("hyperjob") == {d.name: d for d in docs[:2]}
    assert await any_store.get("queue", "q") == docs[2]
    # The versions go on from there: a stale replica's commit is still refused.
    assert (await any_store.commit(Commit(writes=[Write.put("hyperjob", "h1", {}, 6)]))).refusal == "conflict"
    assert (await any_store.commit(Commit(writes=[Write.put("hyperjob", "h1", {}, 7)]))).versions == [8]


async def test_binding_documents_round_trip_through_restore_into_the_accounting(any_store) -> None:
    await any_store.set_node_allocatable("c1", "n1", GPU_NODE)
    await any_store.set_node_allocatable("c1", "n2", GPU_NODE)
    gang = [bind("p0", "n1", uid="u0"), bind("p1", "n1", uid="u1"), bind("p2", "n2", uid="u2")]
    assert (await any_store.commit(Commit(binds=gang))).ok
    saved = await any_store.binding_docs("c1")
    assert [(d.kind, d.name) for d in saved] == [(binding_kind("c1"), p) for p in ("p0", "p1", "p2")]
    assert saved[0].data == render_entry("n1", POD, "u0").encode()
    before = (await any_store.allocations("c1"), await used(any_store, "c1", "n1"), await used(any_store, "c1", "n2"))
    await any_store.clear()
    await any_store.restore(saved)
    await any_store.set_node_allocatable("c1", "n1", GPU_NODE)  # the scheduler registers its nodes again
    await any_store.set_node_allocatable("c1", "n2", GPU_NODE)
    after = (await any_store.allocations("c1"), await used(any_store, "c1", "n1"), await used(any_store, "c1", "n2"))
    assert after == before
    full = [bind(f"x{i}", "n1") for i in range(3)]  # n1 has 4 of its 8 GPUs taken: 2 more pods fit, not 3
    assert (await any_store.commit(Commit(binds=full))).refusal == "no-room"
    assert (await any_store.commit(Commit(unbinds=[Unbind("c1", "p0")], binds=full))).ok


async def test_restoring_a_binding_twice_books_its_request_once(any_store) -> None:
    # A restore interrupted before the sentinel was set runs again at the next start.
    await any_store.set_node_allocatable("c1", "n1", {"cpu": 4.0})
    saved = [Doc(kind=binding_kind("c1"), name="p", version=1, data=render_entry("n1", {"cpu": 3.0}, "u").encode())]
    await any_store.restore(saved)
    await any_store.restore(saved)
    assert await used(any_store, "c1", "n1") == {"cpu": 3.0}
    assert (await any_store.commit(Commit(binds=[bind("q", "n1", {"cpu": 1.0})]))).ok


async def test_binding_docs_of_a_cluster_without_bindings_are_none(any_store) -> None:
    assert await any_store.binding_docs("c9") == []
    assert await any_store.allocations("c9") == {}
