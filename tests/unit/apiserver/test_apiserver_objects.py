"""Resource versions (the apiserver's changelog on the STATE stream) and the changes watches
replay, also after a restart; tokens and what each identity may do."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os

import pytest

from hyperjob.bus import InMemoryBus
from hyperjob.events.access import Identity
from hyperjob.events.subjects import STREAMS
from hyperjob.services.apiserver.identity import Tokens, bearer, may_publish
from hyperjob.services.apiserver.objects import Objects, TooOld
from hyperjob.services.apiserver.resources import find
from hyperjob.testkit.auth import Auth, system_identities

QUEUES = find("scheduling.volcano.sh", "v1beta1", "queues")


def queue(name: str, weight: int) -> dict:
    return {
        "name": name, "state": "Open", "spec": {"weight": weight}, "created": 1.0, "usage": {}, "allocated": {},
        "deserved": {}, "podgroups": {"inqueue": 0, "pending": 0, "running": 0},
        "manifest": {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
                     "spec": {"weight": weight}},
    }  # fmt: skip


class Fleet:
    """What the read model returns, changed by the test between reads."""

    def __init__(self) -> None:
        self.queues: list[dict] = []

    async def load(self, client: object, name: str | None) -> list[dict]:
        return list(self.queues)


@pytest.fixture
def fleet_objects() -> tuple[Fleet, Objects, object]:
    assert QUEUES is not None
    fleet = Fleet()
    resource = dataclasses.replace(QUEUES, load=fleet.load)
    return fleet, Objects(client=None, bus=InMemoryBus(STREAMS)), resource  # type: ignore[arg-type]


def changes(objects: Objects, resource: object, since: int) -> list[tuple[int, str, str]]:
    return [(c.version, c.type, c.entry.key[1]) for c in objects.changes_since(resource, since)]  # type: ignore[arg-type]


async def test_each_change_is_versioned_by_its_changelog_entry_and_an_unchanged_object_keeps_its_own(fleet_objects):
    fleet, objects, resource = fleet_objects
    fleet.queues = [queue("a", 1), queue("b", 1)]
    first = {e.key[1]: e.version for e in await objects.read(resource)}
    assert first == {"a": 1, "b": 2}  # the STATE stream's sequences
    fleet.queues = [queue("a", 2), queue("b", 1)]
    second = {e.key[1]: e.obj["metadata"]["resourceVersion"] for e in await objects.read(resource)}
    assert second == {"a": "3", "b": "2"}
    fleet.queues = [queue("b", 1)]
    await objects.read(resource)
    assert changes(objects, resource, 2) == [(3, "MODIFIED", "a"), (4, "DELETED", "a")]
    assert objects.changes_since(resource, 4) == []


async def test_a_restarted_apiserver_keeps_the_versions_and_replays_what_changed_while_it_was_away(fleet_objects):
    """Versions are the changelog's: an apiserver started again (a new ``Objects`` on the same
    stream) gives an unchanged object the version it had, and a watch resuming from a version
    of the one before gets each object changed, added or deleted since (no 410 Gone)."""
    fleet, objects, resource = fleet_objects
    fleet.queues = [queue("a", 1), queue("b", 1), queue("c", 1)]
    before = {e.key[1]: e.version for e in await objects.read(resource)}
    listed = objects.version
    fleet.queues = [queue("a", 1), queue("b", 2), queue("d", 1)]  # while no apiserver runs
    restarted = Objects(client=None, bus=objects.bus)  # type: ignore[arg-type]
    after = {e.key[1]: e.version for e in await restarted.read(resource)}
    assert after["a"] == before["a"] and after["b"] > listed and after["d"] > listed
    assert {(t, n) for _, t, n in changes(restarted, resource, listed)} == {
        ("MODIFIED", "b"),
        ("DELETED", "c"),
        ("ADDED", "d"),
    }
    assert changes(restarted, resource, after["b"]) == [c for c in changes(restarted, resource, listed)
                                                        if c[0] > after["b"]]  # fmt: skip
    again = Objects(client=None, bus=objects.bus)  # type: ignore[arg-type]
    await again.read(resource)  # nothing changed: nothing recorded, the tombstone kept
    assert again.version == restarted.version
    assert {(t, n) for _, t, n in changes(again, resource, listed)} == {
        ("MODIFIED", "b"),
        ("DELETED", "c"),
        ("ADDED", "d"),
    }


async def test_a_version_the_changelog_never_reached_is_too_old(fleet_objects):
    fleet, objects, resource = fleet_objects
    fleet.queues = [queue("a", 1)]
    await objects.read(resource)
    with pytest.raises(TooOld):
        objects.changes_since(resource, 1_765_000_000_000)  # an apiserver's of before the changelog: relist


async def test_a_recent_read_is_reused_within_max_age(fleet_objects):
    fleet, objects, resource = fleet_objects
    fleet.queues = [queue("a", 1)]
    await objects.read(resource)
    fleet.queues = []
    assert [e.key[1] for e in await objects.read(resource, max_age=60)] == ["a"]
    assert await objects.read(resource) == []


# -- identity ----------------------------------------------------------------------------------------


def test_a_token_is_an_identitys_password_and_a_new_person_is_known_without_restart(tmp_path):
    path = tmp_path / "credentials.json"
    auth = Auth.generate(system_identities(["cluster-a"]))
    auth.save(path)
    tokens = Tokens(path)
    assert tokens.identity(auth.password("cli")).name == "cli"
    assert tokens.identity("not-a-token") is None
    alice = Identity(name="alice", role="user", verbs=("apply",), namespaces=("team-a",))
    auth.add(alice)
    auth.save(path)
    stat = path.stat()  # a later modification time, whatever the file system's resolution
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10_000_000))
    assert tokens.identity(auth.password("alice")) == alice
    assert Tokens(tmp_path / "none.json").identity(auth.password("cli")) is None


def test_an_identity_may_publish_what_nats_would_let_it():
    alice = Identity(name="alice", role="user", verbs=("apply",), namespaces=("team-a",))
    assert may_publish(alice, "hj.manifest.apply.team-a")
    assert not may_publish(alice, "hj.manifest.apply.team-b")
    assert not may_publish(alice, "hj.object.delete.team-a")
    assert not may_publish(alice, "hj.manifest.apply")  # cluster-scoped kinds: every namespace only
    reader = Identity(name="dashboard", role="user", verbs=())
    assert not may_publish(reader, "hj.manifest.apply.default")
    everyone = Identity(name="cli", role="user")
    assert may_publish(everyone, "hj.manifest.apply") and may_publish(everyone, "hj.object.delete.team-b")
    assert not may_publish(Identity(name="splitter", role="splitter"), "hj.manifest.apply.default")


def test_bearer_reads_only_bearer_tokens():
    assert bearer("Bearer abc") == "abc"
    assert bearer("bearer  abc ") == "abc"
    assert bearer("Basic abc") is None and bearer("") is None and bearer("Bearer ") is None


async def test_requests_arriving_during_a_read_share_the_next_and_see_what_came_before_them(fleet_objects):
    """A read serves every request that arrived before it began (a create then finds an object
    created before it was sent), never one that arrived after it began: eight concurrent reads
    cost two reads of the store, not eight."""
    fleet, objects, resource = fleet_objects
    reads = 0
    release = asyncio.Event()

    async def slow(client: object, name: str | None) -> list[dict]:
        nonlocal reads
        reads += 1
        await release.wait()
        return list(fleet.queues)

    resource = dataclasses.replace(resource, load=slow)
    fleet.queues = [queue("a", 1)]
    first = asyncio.create_task(objects.read(resource))
    await asyncio.sleep(0)  # the first read is under way
    fleet.queues = [queue("a", 1), queue("b", 1)]  # created while it runs: the first may miss it
    later = [asyncio.create_task(objects.read(resource)) for _ in range(7)]
    await asyncio.sleep(0)
    release.set()
    await first
    seen = await asyncio.gather(*later)
    assert reads == 2
    assert all(sorted(e.key[1] for e in entries) == ["a", "b"] for entries in seen)


async def test_a_failed_read_serves_nobody_who_waited_for_it(fleet_objects):
    fleet, objects, resource = fleet_objects
    calls = 0

    async def flaky(client: object, name: str | None) -> list[dict]:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0)
        if calls == 1:
            raise RuntimeError("store away")
        return list(fleet.queues)

    resource = dataclasses.replace(resource, load=flaky)
    fleet.queues = [queue("a", 1)]
    failing, waiting = objects.read(resource), objects.read(resource)
    results = await asyncio.gather(failing, waiting, return_exceptions=True)
    assert isinstance(results[0], RuntimeError)
    assert [e.key[1] for e in results[1]] == ["a"] and calls == 2  # read again, not the failed one's nothing


# -- watches --------------------------------------------------------------------------------------


async def test_watches_opened_together_share_one_read_of_their_resource(fleet_objects, tmp_path):
    """Opening a watch reads its resource; a hundred informers opened at once over 10,000 objects
    each paid a full read, one after another (``hyperjob bench api``: the last opened after two
    minutes). Opened together, they share the read a poll would share, and each still starts with
    every object and sees the changes after it."""
    from starlette.requests import Request  # noqa: PLC0415

    from hyperjob.services.apiserver import app  # noqa: PLC0415

    fleet, objects, resource = fleet_objects
    reads = 0

    async def counted(client: object, name: str | None) -> list[dict]:
        nonlocal reads
        reads += 1
        await asyncio.sleep(0.01)  # a read takes time: the other watches open meanwhile
        return list(fleet.queues)

    resource = dataclasses.replace(resource, load=counted)
    fleet.queues = [queue("a", 1), queue("b", 1)]
    reader = dataclasses.make_dataclass("Reader", [("bus", object)])(objects.bus)
    state = app.State(client=reader, tokens=Tokens(tmp_path / "none.json"), version="test")  # type: ignore[arg-type]
    state.objects = objects
    request = Request({"type": "http", "method": "GET", "query_string": b"watch=1", "headers": []})
    opened = await asyncio.gather(*(app._watch(request, state, resource, lambda e: True) for _ in range(20)))
    assert reads == 1
    for response in opened:
        first = [await response.body_iterator.__anext__() for _ in range(2)]  # type: ignore[attr-defined]
        assert sorted(json.loads(line)["object"]["metadata"]["name"] for line in first) == ["a", "b"]
        await response.body_iterator.aclose()  # type: ignore[attr-defined]


async def test_an_object_deleted_while_no_apiserver_ran_is_a_table_row_with_its_name(fleet_objects):
    """``kubectl get -w`` resuming after a restart: the changelog keeps a deleted object's name,
    not its cells, so its row has the name and blank cells (it had failed on the missing cells)."""
    from hyperjob.services.apiserver import app  # noqa: PLC0415

    fleet, objects, resource = fleet_objects
    fleet.queues = [queue("a", 1), queue("c", 1)]
    await objects.read(resource)
    listed = objects.version
    restarted = Objects(client=None, bus=objects.bus)  # type: ignore[arg-type]
    fleet.queues = [queue("a", 1)]
    await restarted.read(resource)
    (deleted,) = restarted.changes_since(resource, listed)
    event = app._event(resource, deleted.type, deleted.entry, table=True)
    (row,) = event["object"]["rows"]
    assert event["type"] == "DELETED" and row["cells"][0] == "c" and set(row["cells"][1:]) == {""}
    assert row["object"]["metadata"]["name"] == "c" and row["object"]["metadata"]["resourceVersion"] == str(
        deleted.version
    )


async def test_field_managers_are_shown_kept_across_a_restart_and_not_given_to_a_later_object_of_the_name(
    fleet_objects,
):
    fleet, objects, resource = fleet_objects
    fleet.queues = [queue("a", 1)]
    (before,) = await objects.read(resource)
    entries = [{"manager": "alice", "operation": "Apply", "apiVersion": "scheduling.volcano.sh/v1beta1",
                "time": "2026-12-07T10:00:00Z", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:spec": {"f:weight": {}}}}]  # fmt: skip
    await objects.record_managers(resource, ("", "a"), before.obj["metadata"]["uid"], entries)
    (after,) = await objects.read(resource)
    assert after.obj["metadata"]["managedFields"] == entries
    assert after.version > before.version  # an ownership change is a change of the object, as in Kubernetes

    restarted = Objects(client=None, bus=objects.bus)  # type: ignore[arg-type]
    (again,) = await restarted.read(resource)
    assert again.obj["metadata"]["managedFields"] == entries and again.version == after.version

    fleet.queues = [{**queue("a", 1), "created": 2.0}]  # deleted and created again: another uid
    (later,) = await restarted.read(resource)
    assert "managedFields" not in later.obj["metadata"]
