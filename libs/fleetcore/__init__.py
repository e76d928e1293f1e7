"""fleetcore — the pure multi-cluster HyperJob logic shared by the services and the simulator.

Owns: splitting a HyperJob into child Volcano Jobs, global queue admission and fair share over
the fleet, cluster choice, the cross-cluster gang (reservations), failover, the cross-cluster
training environment and status aggregation. Everything here is a pure function of its inputs
(time is the float ``now`` the driver passes in); expected refusals are values (``Waiting``, a
reason string), never exceptions. No I/O, no wall clock, no randomness; ties break by name.

Inputs the drivers keep
-----------------------
* ``ClusterCapacity`` per cluster (the cluster-scheduler's capacity summary): ``free`` and
  ``allocatable`` sums, optional per-node ``NodeCapacity`` (free, allocatable, labels, taints),
  ``labels``, ``last_report`` (driver time of the latest summary) and ``ready``.
* The normalized ``api.HyperJob`` (``api.normalize``), its current ``SplitPlan`` and children.

Splitting (splitter; the simulator)
-----------------------------------
``plan_split(hyperjob, clusters, *, current=None, now=None, check_fit=True) -> SplitPlan | Waiting``
  Children are ``<hyperjob>-<replicatedJob>-<i>``. Without ``splitPolicy``: ``replicas`` identical
  children, each on an eligible cluster where its whole gang fits (clusters already used first,
  then most room, then name). With ``splitPolicy``: the template is the whole job and
  ``clusters`` (explicit counts, in their order) / ``mode: auto`` / ``weights`` / static even
  decide one child per cluster used; replicas are divided in units of ``granularity``; task
  replicas are contiguous slices of the template (task order), so ranks are contiguous. Child
  ``minAvailable`` = ceil(child replicas × template minAvailable / template replicas).
  ``maxDomains`` caps the clusters of one replicated job (the API reference's meaning).
  Eligible clusters: live, in ``clusterNames``, carrying the labels of the HyperJob annotation
  ``hyperjob.io/cluster-selector: "k=v,k2=v2"``, with a node that matches the main task's node
  selector / required affinity / taints (e.g. the GPU model) and is big enough for one pod.
  ``Waiting.reason`` names the replicated job and which cluster lacks what.
``child_jobs(hyperjob, plan) -> list[ChildJob]``: full ``api.Job`` manifests with labels
  ``volcano.sh/hyperjob-name``, ``volcano.sh/replicatedjob-name``,
  ``volcano.sh/vcjob-template-spec-hash`` and annotations ``hyperjob.io/{child-index,rank-offset,
  world-size,cluster}``.
``diff_children(existing, desired) -> ChildChanges(create, update, delete, unchanged)``: an update
  that changes nothing is empty; scale-down deletes; a changed task set or cluster recreates.

Status (status-aggregator; the simulator)
-----------------------------------------
``aggregate_status(hyperjob, children: [ChildStatus], *, previous, admitted, lifecycle,
  waiting_reason, now) -> HyperJobStatus`` — upstream's conditions (only when every child is
  terminal; sticky), ``replicatedJobsStatus``, ``splitCount``, ``observedGeneration``, plus
  ``phase``, ``placement`` and ``waitingReason``. Encodes camelCase.
"""

from .capacity import PodShape, gang_pods, hyperjob_request, max_replicas, place_gang, spec_request, task_shape
from .children import ChildChanges, child_jobs, child_spec, diff_children, template_hash
from .model import (CHILD_INDEX_ANNOTATION, CLUSTER_ANNOTATION, CLUSTER_SELECTOR_ANNOTATION,
                    CLUSTER_SILENCE_TIMEOUT, HYPERJOB_NAME_LABEL, RANK_OFFSET_ANNOTATION, REPLICATED_JOB_LABEL,
                    TEMPLATE_HASH_LABEL, WORLD_SIZE_ANNOTATION, ChildJob, ChildPlan, ClusterCapacity,
                    NodeCapacity, SplitPlan, Waiting, cluster_lost, live_clusters)
from .split import apportion, child_name, choose_cluster, eligible_clusters, plan_split
from .status import (COMPLETED_REASON, FAILED_REASON, ChildStatus, Condition, HyperJobPhase, HyperJobStatus,
                     JobState, Lifecycle, ReplicatedJobStatus, aggregate_status, placement)

__all__ = [
    "CHILD_INDEX_ANNOTATION", "CLUSTER_ANNOTATION", "CLUSTER_SELECTOR_ANNOTATION", "CLUSTER_SILENCE_TIMEOUT",
    "COMPLETED_REASON", "FAILED_REASON", "HYPERJOB_NAME_LABEL", "RANK_OFFSET_ANNOTATION", "REPLICATED_JOB_LABEL",
    "TEMPLATE_HASH_LABEL", "WORLD_SIZE_ANNOTATION",
    "ChildChanges", "ChildJob", "ChildPlan", "ChildStatus", "ClusterCapacity", "Condition", "HyperJobPhase",
    "HyperJobStatus", "JobState", "Lifecycle", "NodeCapacity", "PodShape", "ReplicatedJobStatus", "SplitPlan",
    "Waiting",
    "aggregate_status", "apportion", "child_jobs", "child_name", "child_spec", "choose_cluster", "cluster_lost",
    "diff_children", "eligible_clusters", "gang_pods", "hyperjob_request", "live_clusters", "max_replicas",
    "place_gang", "placement", "plan_split", "spec_request", "task_shape", "template_hash",
]
