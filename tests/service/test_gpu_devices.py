"""GPU devices travel with bindings (ADR 0005): the store keeps the device indexes the scheduler
chose beside each binding (both stores alike, through a changelog restore too, without counting
them as resources), and the cluster-scheduler gives them back to its scheduling core when it
rebuilds its view — so a scheduler that restarted never hands a GPU that is taken to a new pod."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from hyperjob import events
from hyperjob.events import subjects
from hyperjob.services.cluster_scheduler.app import build
from hyperjob.store import Binding, Commit, InMemoryStore
from hyperjob.store.redis_store import RedisStore
from hyperjob.testkit.isolation import new_namespace, open_redis_store
from tests.service import service_helpers as sh
from tests.service import test_cluster_scheduler as cs  # its Job: a job as the job-controller describes it

pytestmark = pytest.mark.service

NODE = {"cpu": 64.0, "memory": float(1 << 39), "nvidia.com/gpu": 8.0, "pods": 110.0}
POD = {"cpu": 8.0, "memory": float(1 << 34), "nvidia.com/gpu": 2.0, "pods": 1.0}


@pytest.fixture(params=["memory", "redis"])
async def any_store(request: pytest.FixtureRequest) -> AsyncIterator[InMemoryStore | RedisStore]:
    if request.param == "memory":
        yield InMemoryStore()
    else:
        async with open_redis_store(request.getfixturevalue("redis_url"), new_namespace()) as s:
            yield s


async def test_a_binding_keeps_its_devices_through_commit_and_restore(any_store) -> None:
    await any_store.set_node_allocatable("c1", "n1", NODE)
    binding = Binding("c1", "p0", "n1", dict(POD), "u0", (3, 5))
    assert (await any_store.commit(Commit(binds=[binding]))).ok
    assert (await any_store.allocations("c1"))["p0"] == binding
    assert (await any_store.nodes("c1"))["n1"].used["nvidia.com/gpu"] == 2.0  # devices are not a resource

    docs = await any_store.binding_docs("c1")
    await any_store.clear()
    await any_store.set_node_allocatable("c1", "n1", NODE)
    await any_store.restore(docs)
    assert (await any_store.allocations("c1"))["p0"].devices == (3, 5)


async def test_a_restarted_scheduler_gives_new_pods_other_gpus_than_the_running_ones(bus, store, probe) -> None:
    # "first" takes GPUs 0-1 and "second" 2-3; "first" ends. A scheduler that forgot which GPUs
    # "second" holds would, after a restart, put it on the free 0-1 in its view and hand 2-3 again.
    await cs.nodes_report(bus, "n1", allocatable={**NODE, "nvidia.com/gpu": 4.0})
    first, second = cs.Job("first", replicas=1, gpu="2").admit(), cs.Job("second", replicas=1, gpu="2").admit()
    async with sh.running("cluster-scheduler", build, cs.settings(), bus, store):
        await first.send(bus)
        await cs.allocations(store, 1)
        await second.send(bus)
        bindings = await cs.allocations(store, 2)
        await first.run_to_end(bindings).send(bus)
        [held] = (await cs.allocations(store, 1)).values()
    assert held.pod.startswith("second") and held.devices == (2, 3)

    third = cs.Job("third", replicas=1, gpu="2").admit()
    async with sh.running("cluster-scheduler", build, cs.settings(), bus, store):  # its view rebuilt
        await third.send(bus)
        found = await cs.allocations(store, 2)
    [new] = [b for b in found.values() if b.pod != held.pod]
    assert len(new.devices) == 2 and not set(new.devices) & set(held.devices)
    await cs.within_allocatable(store)


async def test_the_devices_of_a_binding_travel_with_the_bound_pods(bus, store, probe) -> None:
    # The node-agent gives a pod exactly these GPUs (issue 27): they reach it on PodsBound.
    await cs.nodes_report(bus, "n1", allocatable={**NODE, "nvidia.com/gpu": 4.0})
    job = cs.Job("gpus", replicas=2, gpu="2").admit()
    async with sh.running("cluster-scheduler", build, cs.settings(), bus, store):
        await job.send(bus)
        bindings = await cs.allocations(store, 2)
        refs = await probe.wait(subjects.pods_bound(cs.C), events.PodsBound)
    sent = {ref.pod: ref.devices for message in refs for ref in message.pods}
    assert sent == {b.pod: b.devices for b in bindings.values()}
    assert sorted(d for devices in sent.values() for d in devices) == [0, 1, 2, 3]
