"""Self-fencing (issue 33): a node-agent cut off from the bus longer than the fleet lease freezes
its pods itself, and once it is back resumes those the fleet still holds here and kills the others.

Why at the node: when a whole cluster (its job-controller and its node-agents) is cut off from
NATS, the job-controller cannot tell its agents to stop anything, and the fleet moves the cluster's
children after ``fleetcore.CLUSTER_SILENCE_TIMEOUT`` (lease + margin) of silence. Only the agent,
which runs the pods, can stop them in time. Why freeze rather than kill: a node cannot tell its own
partition from a whole-bus outage (NATS down, nothing moves), so it must not throw the pods' work
away before it knows which one it was.

"Cut off" is judged on the agent's own monotonic clock, from its *contact*: the moment it sent
the last heartbeat that JetStream acknowledged (the send time, not the ack's: the fleet may have
heard that beat as soon as it was sent, never before). A disconnected client, a partition, a
server that does not answer: all mean no acknowledged beat. Once ``cut_off`` (strictly longer
than the lease), every pod the agent runs is frozen (SIGSTOP to its process group, ``podman
pause``; a pod that cannot be frozen is killed): it makes no progress and writes nothing. Then
(``Frozen``): a ``StartPods`` of the same incarnation from its job-controller resumes it where it
stood (the job-controller sends it once it has read, in order, every removal the fleet made before
a lease that holds now: the fleet still holds the child here; the agent asks for that word with a
``PodsFrozen`` on its first acknowledged beat, since a job-controller that kept its lease all along
has no renewal to answer); a ``StopPods`` kills it (SIGKILL at
once: a stopped process cannot act on SIGTERM); and once the agent has been back on the bus longer
than the lease with neither, it is killed and recorded Failed with reason ``Fenced`` (exit
``FENCE_EXIT_CODE``), so the job's policy applies. The agent never resumes or restarts a pod by
itself.

The timing that makes it safe, with ``T`` the send time of the last acknowledged beat (the fleet
heard nothing of this cluster after it, so it moves children no sooner than ``T + lease + margin``):
the agent finds itself cut off by ``T + lease + FENCE_CHECK_PERIOD``, and SIGSTOP takes effect at
once. An agent that was itself stopped (SIGSTOP) longer than the lease freezes before its next
beat renews the contact: the fleet may have moved its children meanwhile. Pure; the driver is
``handlers.NodeAgent`` (the ``fence`` round, the heartbeat and ``StartPods``).
"""

from __future__ import annotations

from collections.abc import Callable

FENCE_REASON = "Fenced"
FENCE_EXIT_CODE = 137  # killed, as the kubelet reports a container it stopped with SIGKILL
FENCE_CHECK_PERIOD = 1.0
"""How often the agent checks its contact (a round of its own: a beat stuck on the bus under the
runtime's lock must not delay the check)."""


def cut_off(contact: float, now: float, lease: float) -> bool:
    """Whether an agent whose last acknowledged beat was sent at ``contact`` is, at ``now`` (the
    same monotonic clock), cut off from the bus longer than ``lease``: then it must freeze its pods."""
    return now - contact > lease


class Contact:
    """When the agent last surely reached the bus, on ``clock`` (monotonic live, virtual in the
    simulator), and whether this cut-off was fenced already. Starts at creation: an agent that has
    just connected has reached the bus.

    One freeze per cut-off: the pods running when the lease ran out stand still; a pod started after
    that was started by a control plane that reached the agent (the bus delivers again before the
    agent's next beat is acknowledged), so it is left to run. An acknowledged beat ends the cut-off."""

    def __init__(self, clock: Callable[[], float], lease: float) -> None:
        self.clock = clock
        self.lease = lease
        self.last = clock()
        self.fenced = False

    def now(self) -> float:
        return self.clock()

    def restart(self) -> None:
        """The agent becomes active (a start, a standby taking over): it has just reached the bus,
        and whatever time it waited as a standby was not a cut-off (it ran no pod meanwhile)."""
        self.last = self.clock()
        self.fenced = False

    def reached(self, sent_at: float) -> None:
        """A beat sent at ``sent_at`` was acknowledged."""
        self.last = max(self.last, sent_at)
        self.fenced = False

    def lost(self, at: float | None = None) -> bool:
        """Whether the agent is cut off at ``at`` (now by default)."""
        return cut_off(self.last, self.clock() if at is None else at, self.lease)

    def must_fence(self, at: float | None = None) -> bool:
        """Whether to freeze now: cut off, and this cut-off not frozen yet (then it counts as frozen)."""
        if self.fenced or not self.lost(at):
            return False
        self.fenced = True
        return True


FREEZE_REASON = "Frozen"
"""Why a pod stood still (the agent's log): cut off longer than the lease, waiting for the fleet's word."""


def expired(back: float | None, now: float, wait: float) -> bool:
    """Whether pods frozen since a cut-off wait no more: the agent has been back on the bus since
    ``back`` (the sending of its first acknowledged beat after the freeze; None: not back yet)
    longer than ``wait`` with no word from its job-controller that the fleet still holds them here."""
    return back is not None and now - back > wait


class Frozen:
    """The pods the agent froze at the end of its lease (pod -> uid), waiting for the fleet's word.

    Each leaves in one of three ways: its job-controller starts it again, the same incarnation, by
    a ``StartPods`` it sent once it had read, in order, every removal the fleet made before a lease
    that holds now (``confirm``: the agent resumes it where it stood); it is stopped (a
    ``StopPods``: the fleet or the cluster moved it); or the agent has been back on the bus longer
    than ``wait`` without either (``expire``: it is killed and reported ``Fenced``, as a fence
    did before freezing). Until then it makes no progress, so a copy started elsewhere meanwhile is
    the only one that runs. Pure; the driver is ``handlers.NodeAgent``."""

    def __init__(self, wait: float) -> None:
        self.wait = wait
        self.pods: dict[str, str] = {}
        self.back: float | None = None
        self.asked = False  # whether the job-controller was asked about them since the freeze
        # Every pod frozen in this cut-off, resumed or stopped since or not: what the agent tells
        # once back (a stop read before its first beat leaves the freeze itself unsaid otherwise).
        self.cut: dict[str, str] = {}
        self.returned = False  # a beat went through since the freeze

    def holds(self, pod: str, uid: str) -> bool:
        return self.pods.get(pod) == uid

    def freeze(self, pods: dict[str, str]) -> None:
        """A cut-off reached the lease: ``pods`` stand still too, and the wait starts when the bus
        is back (a new cut-off restarts it: the fleet had no word from us again)."""
        self.pods.update(pods)
        self.cut.update(self.pods)  # those still frozen from an earlier cut-off are told again
        self.back = None
        self.asked = False
        self.returned = False

    def reached(self, sent_at: float) -> None:
        """A beat sent at ``sent_at`` was acknowledged: the first after a freeze starts the wait."""
        if self.pods and self.back is None:
            self.back = sent_at
        self.returned = bool(self.cut)

    def unasked(self) -> dict[str, str]:
        """The pods frozen in this cut-off to tell the job-controller of (``PodsFrozen``: it
        confirms those still frozen and its own): once per cut-off, as soon as the agent is back
        on the bus; none before or after. A pod stopped meanwhile is told too: when it froze is
        when it stopped making progress."""
        return dict(self.cut) if self.returned and not self.asked else {}

    def told(self) -> None:
        self.asked, self.cut = True, {}

    def confirm(self, pod: str, uid: str) -> bool:
        """The job-controller started ``pod``'s incarnation ``uid`` again: resume it (True) if frozen."""
        if not self.holds(pod, uid):
            return False
        self._drop(pod)
        return True

    def release(self, pod: str) -> bool:
        """``pod`` leaves otherwise (stopped, ended): whether it was frozen (then kill it at once:
        a stopped process cannot act on SIGTERM)."""
        if pod not in self.pods:
            return False
        self._drop(pod)
        return True

    def expire(self, now: float) -> dict[str, str]:
        """The frozen pods that waited too long (all of them, then none is frozen any more)."""
        if not expired(self.back, now, self.wait):
            return {}
        pods, self.pods, self.back = self.pods, {}, None
        return pods

    def _drop(self, pod: str) -> None:
        del self.pods[pod]
        if not self.pods:
            self.back = None
