"""node-agent: the eyes and hands of the system on the nodes of one cluster.

Owns the pods running on its nodes, and reports its nodes: a heartbeat (``heartbeat.node.<c>.<n>``)
and telemetry (``telemetry.gpu|fabric.<c>.<n>``: GPUs, NVLink, InfiniBand), both latest-only.

- ``simulate`` mode (``hyperjob agent --simulate``): one process runs a whole fleet with a shape
  (GPU model and count, NVLink domains, leaf and spine switches) and topology labels, plausible
  telemetry and injected faults (a GPU Xid, an IB port down, a node that stops heartbeating); each
  pod "runs" for its ``hyperjob.io/sim-duration`` (or the configured default), then is reported
  Succeeded, or Failed with ``hyperjob.io/sim-exit-code``.
- ``exec`` mode: each pod's command runs as a local process with the pod's full environment, its
  output in a log ``hyperjob logs POD`` shows; telemetry comes from the real readers (NVML,
  sysfs), which report no devices where there are none. A GPU pod sees only the devices of its
  binding (``CUDA_VISIBLE_DEVICES``, from ``runners.gpu_assignment``).
- ``container`` mode (``hyperjob agent --runtime podman``, ``mode: container`` in ``up``'s config):
  each pod runs its image as an OCI container through podman (``containerpods``), its
  ``resources.limits`` as cgroup limits, its GPUs given by CDI device; an agent that restarts
  adopts the containers it left running. Exec and container modes are two ``runners.PodRunner``s.

Invariant: a pod is reported in the order Running → (Succeeded | Failed | Deleted), once per
incarnation (job version); in-place container restarts are Running again with more restarts.
And (``fencing``, issue 33): once the agent has been cut off from the bus longer than the fleet
lease, none of the pods it ran then makes progress (frozen) until its job-controller confirms the
fleet still holds it here; those it does not confirm are killed and reported Failed (``Fenced``).
"""
