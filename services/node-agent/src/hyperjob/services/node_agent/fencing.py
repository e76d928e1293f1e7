"""Self-fencing (issue 33): a node-agent cut off from the bus longer than the fleet lease stops its
pods itself, and says so once it is back.

Why at the node: when a whole cluster (its job-controller and its node-agents) is cut off from
NATS, the job-controller cannot tell its agents to stop anything, and the fleet moves the cluster's
children after ``fleetcore.CLUSTER_SILENCE_TIMEOUT`` (lease + margin) of silence. Only the agent,
which runs the pods, can stop them in time.

"Cut off" is judged on the agent's own monotonic clock, from its *contact*: the moment it sent
the last heartbeat that JetStream acknowledged (the send time, not the ack's: the fleet may have
heard that beat as soon as it was sent, never before). A disconnected client, a partition, a
server that does not answer: all mean no acknowledged beat. Once ``cut_off`` (strictly longer
than the lease), every pod the agent runs is stopped (``FENCE_KILL_GRACE`` between SIGTERM and
SIGKILL) and recorded Failed with reason ``Fenced`` (exit ``FENCE_EXIT_CODE``), sent when the bus is
back, so the job's policy applies; the agent never starts a fenced pod again by itself (no restart
in place; only a new ``StartPods`` starts a pod).

The timing that makes it safe, with ``T`` the send time of the last acknowledged beat (the fleet
heard nothing of this cluster after it, so it moves children no sooner than ``T + lease + margin``):
the agent finds itself cut off by ``T + lease + FENCE_CHECK_PERIOD`` and its pods are gone by
``T + lease + FENCE_CHECK_PERIOD + FENCE_KILL_GRACE`` (lease + 3 s, inside the 10 s margin). An
agent that was itself stopped (SIGSTOP) longer than the lease fences before its next beat renews
the contact: the fleet may have moved its children meanwhile. Pure; the driver is
``handlers.NodeAgent`` (the ``fence`` round and the heartbeat).
"""

from __future__ import annotations

from collections.abc import Callable

FENCE_REASON = "Fenced"
FENCE_EXIT_CODE = 137  # killed, as the kubelet reports a container it stopped with SIGKILL
FENCE_CHECK_PERIOD = 1.0
"""How often the agent checks its contact (a round of its own: a beat stuck on the bus under the
runtime's lock must not delay the check)."""
FENCE_KILL_GRACE = 2.0
"""Seconds a fenced pod gets between SIGTERM and SIGKILL (less than its own grace when that is
longer: the margin, not the pod, bounds how long it may run on)."""


def cut_off(contact: float, now: float, lease: float) -> bool:
    """Whether an agent whose last acknowledged beat was sent at ``contact`` is, at ``now`` (the
    same monotonic clock), cut off from the bus longer than ``lease``: then it must fence."""
    return now - contact > lease


class Contact:
    """When the agent last surely reached the bus, on ``clock`` (monotonic live, virtual in the
    simulator), and whether this cut-off was fenced already. Starts at creation: an agent that has
    just connected has reached the bus.

    One fence per cut-off: the pods running when the lease ran out are stopped; a pod started after
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
        """Whether to fence now: cut off, and this cut-off not fenced yet (then it counts as fenced)."""
        if self.fenced or not self.lost(at):
            return False
        self.fenced = True
        return True
