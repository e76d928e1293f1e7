"""What the nodes do with pods (the node-agent's part): start, finish, fail, restart, disappear.

A bound pod starts at once. With ``hyperjob.io/sim-duration`` it finishes that long after it
started: it succeeds, or fails with ``hyperjob.io/sim-exit-code`` when that is present and not
"0". Kubernetes restart policy decides what a finished container means: ``Never`` ends the pod
(``PodSucceeded``/``PodFailed`` reach the job controller), ``OnFailure`` restarts a failed
container in place and ``Always`` restarts every finished container in place (the pod stays
Running, ``restarts`` grows, and the job controller hears ``PodRestarted``, which is what feeds
``TaskFailed``/maxRetry). Each start or restart bumps the pod's incarnation so a completion
scheduled for an earlier one is ignored.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import gang
from .world import Pod

if TYPE_CHECKING:
    from .engine import Engine


class PodFinish:
    """Agenda entry: a pod's container ends (``exit_code`` None means "as the annotations say")."""

    def __init__(self, pod: str, incarnation: int, exit_code: int | None = None) -> None:
        self.pod = pod
        self.incarnation = incarnation
        self.exit_code = exit_code


class Kubelet:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @property
    def world(self) -> Any:
        return self.engine.world

    def start(self, pod: Pod, node: str) -> None:
        """The scheduler bound ``pod`` to ``node``: it runs from now on."""
        w = self.world
        pod.node = node
        pod.phase = "Running"
        w.account(pod)
        pod.started_at = w.now
        pod.finished_at = None
        pod.incarnation += 1
        w.emit("PodBound", pod.name, cluster=pod.cluster, node=node)
        self._schedule_finish(pod)

    def _schedule_finish(self, pod: Pod) -> None:
        duration = self.engine.jobs.sim_duration(pod)
        if duration is not None:
            self.engine.agenda.push(self.world.now + duration, PodFinish(pod.name, pod.incarnation))

    def finish(self, entry: PodFinish) -> None:
        """A container ended (its sim-duration elapsed, or a ``podFail`` event)."""
        pod = self.world.pods.get(entry.pod)
        if pod is None or pod.phase != "Running":
            return
        if entry.exit_code is None and entry.incarnation != pod.incarnation:
            return  # a completion scheduled for an earlier incarnation
        code = self.engine.jobs.sim_exit_code(pod) if entry.exit_code is None else entry.exit_code
        policy = self.engine.jobs.restart_policy(pod)
        if policy == "Always" or (policy == "OnFailure" and code != 0):
            self._restart_in_place(pod, code)
            return
        w = self.world
        pod.phase = "Succeeded" if code == 0 else "Failed"
        w.account(pod)
        pod.finished_at = w.now
        pod.incarnation += 1
        if code == 0:
            w.emit("PodSucceeded", pod.name, cluster=pod.cluster, node=pod.node)
            self.engine.jobs.pod_succeeded(pod)
        else:
            w.emit("PodFailed", pod.name, cluster=pod.cluster, node=pod.node, reason=f"exitCode {code}")
            self.engine.jobs.pod_failed(pod, code)

    def _restart_in_place(self, pod: Pod, code: int) -> None:
        pod.restarts += 1
        pod.container_restarts += 1
        pod.incarnation += 1
        self._schedule_finish(pod)
        self.engine.jobs.pod_restarted(pod, code)

    def fail(self, pod_name: str, exit_code: int) -> None:
        """``podFail`` event: the pod's container exits now with ``exit_code``."""
        pod = self.world.pods.get(pod_name)
        if pod is not None:
            self.finish(PodFinish(pod_name, pod.incarnation, exit_code))

    def evict(self, pod: Pod, reason: str) -> None:
        """The pod is deleted from its node (reclaim, preempt, nodeDown); the job decides what next."""
        w = self.world
        w.emit("PodEvicted", pod.name, cluster=pod.cluster, node=pod.node, reason=reason)
        pod.incarnation += 1
        self.engine.jobs.pod_evicted(pod, reason)

    def node_down(self, cluster: str, node: str) -> None:
        w = self.world
        n = w.clusters[cluster].nodes[node]
        if not n.ready:
            return
        n.ready = False
        w.emit("NodeDown", node, cluster=cluster, node=node)
        here = sorted((p for p in w.pods.values() if p.cluster == cluster and p.node == node), key=lambda p: p.name)
        for pod in here:
            if pod.reserved:
                gang.lost(self.engine.fleet, w.jobs[pod.job], pod)
            elif pod.phase == "Running":
                self.evict(pod, "nodeDown")

    def node_up(self, cluster: str, node: str) -> None:
        w = self.world
        n = w.clusters[cluster].nodes[node]
        if n.ready:
            return
        n.ready = True
        w.emit("NodeUp", node, cluster=cluster, node=node)
