"""node-agent: the eyes and hands of the system on the nodes of one cluster.

Owns the pods running on its nodes. In ``simulate`` mode one process runs a whole fleet: it
heartbeats every node and "runs" each pod for its ``hyperjob.io/sim-duration`` (or the configured
default), then reports it Succeeded, or Failed with ``hyperjob.io/sim-exit-code``. Invariant: a pod
is reported in the order Running → (Succeeded | Failed | Deleted), once per incarnation (job version).
"""
