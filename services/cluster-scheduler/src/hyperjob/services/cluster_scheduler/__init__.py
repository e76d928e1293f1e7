"""cluster-scheduler: Volcano's batch scheduling inside one cluster, on the state in the store.

Owns the cluster's node records and resource accounting (bindings, a compare-and-set per gang),
podgroup phases and the cluster's capacity summary. Each cycle (every schedule period, and soon
after new work) it takes a snapshot — nodes from their heartbeats, queues, podgroups and pods
from the job-controller's records, bindings — runs ``schedcore`` on it, and carries out the
decision: a gang is bound in one atomic script or not at all, so two instances (or a stale
snapshot) never oversubscribe a node; evictions and bindings are announced for the
job-controller. Resources of pods that finished or vanished are returned every cycle.
"""
