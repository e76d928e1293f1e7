"""``hyperjob up``'s liveness judgement (``cli.liveness.Progress``): a service is stalled only when one
of its durable consumers has work waiting and acknowledges nothing for the whole timeout, judged
on observations — a round without one (NATS or Redis not answering) starts the clocks again."""

from __future__ import annotations

from hyperjob.cli.liveness import ConsumerProgress, Progress, owners
from hyperjob.testkit.auth import Auth, system_identities


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def progress(clock: Clock) -> Progress:
    return Progress(10.0, {"job-controller-a": "job-controller-a", "splitter-admin": "splitter"}, now=clock)


def consumer(durable: str, acked: int, waiting: int) -> ConsumerProgress:
    return ConsumerProgress(stream="JOB", durable=durable, acked=acked, waiting=waiting)


def test_work_waiting_and_nothing_acknowledged_for_the_timeout_is_a_stall() -> None:
    clock = Clock()
    p = progress(clock)
    for t in (0.0, 5.0, 9.9):
        clock.t = t
        p.observe([consumer("job-controller-a", 7, 3)])
        assert p.stalled() == {}
    clock.t = 10.0
    p.observe([consumer("job-controller-a", 7, 3)])
    assert p.stalled() == {"job-controller-a": {"job-controller-a"}}
    p.forget({"job-controller-a"})
    assert p.stalled() == {}


def test_acknowledging_or_having_nothing_to_do_is_progress() -> None:
    clock = Clock()
    p = progress(clock)
    p.observe([consumer("job-controller-a", 7, 3), consumer("splitter-admin", 1, 0)])
    clock.t = 8.0
    p.observe([consumer("job-controller-a", 9, 3), consumer("splitter-admin", 1, 0)])  # it acked two
    clock.t = 15.0
    p.observe([consumer("job-controller-a", 9, 3), consumer("splitter-admin", 1, 0)])
    assert p.stalled() == {}  # 7 s since its last ack; the idle one is never stalled
    clock.t = 18.0
    p.observe([consumer("job-controller-a", 9, 3)])
    assert p.stalled() == {"job-controller-a": {"job-controller-a"}}


def test_an_outage_of_the_servers_stalls_nobody() -> None:
    clock = Clock()
    p = progress(clock)
    p.observe([consumer("job-controller-a", 7, 3)])
    clock.t = 30.0
    p.observe(None)  # NATS or Redis did not answer
    p.observe([consumer("job-controller-a", 7, 3)])
    assert p.stalled() == {}


def test_every_durable_belongs_to_its_instance() -> None:
    durables = owners(["splitter", "job-controller-cluster-a", "dashboard"])
    assert durables["splitter-admin"] == "splitter"
    assert durables["job-controller-cluster-a-nodes"] == "job-controller-cluster-a"
    assert set(durables.values()) == {"splitter", "job-controller-cluster-a"}


def test_credentials_render_for_both_servers_without_plain_passwords_in_the_acl() -> None:
    auth = Auth.generate(system_identities(["cluster-a"]))
    users = {u["user"]: u for u in auth.nats_authorization()["users"]}
    assert set(users) == {i.name for i in auth.identities}
    deny = users["node-agent-cluster-a"]["permissions"]["publish"]["deny"]
    assert "$JS.API.CONSUMER.DELETE.*.job-controller-cluster-a" in deny
    acl = auth.redis_acl_file()
    assert acl.splitlines()[0].startswith("user default off")
    assert not any(password in acl for password in auth.passwords.values())
    assert auth.add(system_identities(["cluster-a"])[0]) is False  # known: nothing changes
    before = dict(auth.passwords)
    auth.add(system_identities(["cluster-b"])[3])
    assert {k: v for k, v in auth.passwords.items() if k in before} == before  # passwords are kept
