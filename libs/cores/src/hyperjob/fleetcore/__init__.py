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
``plan_split(hyperjob, clusters, *, current=None, now=None, check_fit=True, waited=None) -> SplitPlan | Waiting``
  Children are ``<hyperjob>-<replicatedJob>-<i>``. Without ``splitPolicy``: ``replicas`` identical
  children, each on an eligible cluster where its whole gang fits (clusters already used first,
  then most room, then name). With ``splitPolicy``: the template is the whole job and
  ``clusters`` (explicit counts, in their order) / ``mode: auto`` / ``weights`` / static even
  decide one child per cluster used; replicas are divided in units of ``granularity``; task
  replicas are contiguous slices of the template (task order), so ranks are contiguous. Child
  ``minAvailable`` = ceil(child replicas × template minAvailable / template replicas).
  ``maxDomains`` caps the clusters of one replicated job (the API reference's meaning).
  Eligible clusters: live, in ``clusterNames``, carrying the labels of the HyperJob annotation
  ``hyperjob.io/cluster-selector: "k=v,k2=v2"`` (deprecated), allowed by the replicated job's
  ``clusterAffinity`` (Karmada's: clusterNames, exclude, labelSelector; ``affinity_allows``;
  its ``preferred`` weighted terms order the clusters that fit, ``preference``; its
  ``spreadConstraints`` bound the label values a plan spans, ``spread_violation``),
  with a node that matches the main task's node selector / required affinity / taints (e.g. the
  GPU model) and is big enough for one pod. Among the clusters where a child fits, placement
  prefers (``placement_scores``) the preferred weights, then the HyperJob's ``dataSets`` a
  cluster holds (``ClusterCapacity.data_sets``; then its slowest ``data_links`` to the others),
  then room. ``splitPolicy.prefer: cost`` (auto)
  takes the plan whose whole job costs least by ``ClusterCapacity.prices`` (``cost``;
  ``plan_cost`` is a plan's price per hour). ``dispatch: Incremental`` narrows the eligible
  clusters to the best few, widening with ``waited`` (``dispatched``; Kueue MultiKueue's).
  ``Waiting.reason`` names the replicated job and which cluster lacks what.
``child_jobs(hyperjob, plan) -> list[ChildJob]``: full ``api.Job`` manifests with labels
  ``volcano.sh/hyperjob-name``, ``volcano.sh/replicatedjob-name``,
  ``volcano.sh/vcjob-template-spec-hash`` and annotations ``hyperjob.io/{child-index,rank-offset,
  world-size,cluster}``.
``plan_in_force(hyperjob, children, world_size, generation=0) -> SplitPlan``: the plan that the
  children as recorded (``events.ChildRef``: the splitter's document, a child's ``World``) stand for;
  ``child_ref(child, template_hash)`` records one.
``diff_children(existing, desired) -> ChildChanges(create, update, delete, unchanged)``: an update
  that changes nothing is empty; scale-down deletes; a changed task set or cluster recreates.

Plain jobs (global-scheduler)
-----------------------------
``place_job(spec, clusters, now=None, *, cluster_names=(), cluster_labels=None, wait_for_fit=False)
  -> str | Waiting``: where the whole gang fits now; else the live cluster with most room that could
  ever host it (its own Volcano preemption/reclaim decide), unless ``wait_for_fit``.

Global admission (global-scheduler; the simulator)
--------------------------------------------------
``fleet_queue(api.Queue, created) -> FleetQueue``; ``fleet_capacity(live clusters) -> ResourceList``;
``admit(queues, allocated, pending: [Candidate], capacity) -> Admission(admitted, waiting, queues)``.
  Queue order: priority, lowest fair-share first (proportion water-filling over the fleet,
  ``deserved_shares``), creation, name; job order: priority, creation, name; one admission per queue
  per round, first up to each queue's deserved share, then beyond it while the fleet has room; a
  candidate that does not fit is skipped (no head-of-line blocking) unless the queue carries
  ``hyperjob.io/queue-ordering: strict-fifo``. Checks: queue Open, fleet-wide ``capability``,
  fleet room not yet promised to admitted work. Build candidates with ``hyperjob_candidate(hj,
  created, priority_classes)`` / ``job_candidate(job, ...)`` (every task counted).

Cross-cluster gang (global-scheduler; the simulator)
----------------------------------------------------
``start_gang(hyperjob, {child: cluster}, required, now, *, attempt=1, timeout=60)`` and
``gang_step(gang, ReservationHeld | ReservationLost | GangTimer, now, retry_delay=0)`` →
``(HyperJobGang, [Reserve | Bind | Release | StartTimer | Retry])``; ``release_gang(gang)`` on
suspend/delete. Bind only once ``required`` (HyperJob minAvailable; default all) reservations
hold; at the deadline every reservation is released and ``Retry(at)`` asks for a new plan.

Coordinated preemption across clusters (``preemption``)
-------------------------------------------------------
``plan_preemption(Preemptor, clusters, [RunningJob], now) -> PreemptionPlan | str``: a gang that
free room cannot hold, placed child by child on the room lower-priority work would give back by
Volcano's rules (``victim_allowed``: priority, ``volcano.sh/preemptable``, reclaimable queues;
never a job below its ``minAvailable``), victims destroying the least GPU-seconds; a plan only
when every child is placed (all or nothing across clusters), else why not. ``explain()`` is the
line for Events and the decision log.

Failover, child failure, commands (global-scheduler / splitter; the simulator)
------------------------------------------------------------------------------
``failover(hj, plan, clusters, now, *, finished=(), working=None, may_move=..., nodes_heard=None) ->
(plan, [ChildMove | ChildWaits])``: a child moves only once its cluster's fleet lease surely lapsed
(``move_after(FLEET_LEASE, LEASE_MARGIN)``), never off a hung control plane (``control_plane_hung``:
silent, its nodes reporting); ``Hearing`` (silence counted only while the judge hears) and ``FailoverGate``
(failovers paused while most clusters look lost, rate-limited otherwise), in ``liveness``;
``child_failed(hj, plan, child, clusters, now, phases) -> (plan, [ChildMove | ChildUnplaced |
ChildCommand | SetLifecycle])`` under ``childFailurePolicy``;
``hyperjob_command(action, phases, lifecycle) -> (lifecycle, [SetLifecycle | ChildCommand])`` and
``settle_lifecycle(lifecycle, phases)``.

Training env (job-controller, when a Job carries ``volcano.sh/hyperjob-name``)
------------------------------------------------------------------------------
``training_env(hj, plan, child, task, index) -> dict[str, str]``: HYPERJOB_NAME,
HYPERJOB_CHILD_INDEX, HYPERJOB_CLUSTER, HYPERJOB_RANK, HYPERJOB_WORLD_SIZE; with the HyperJob
``pytorch`` plugin also MASTER_ADDR (first child's master pod), MASTER_PORT, WORLD_SIZE, RANK.
``world_of(hj, plan) -> api.World | None``: with the HyperJob ``mpi`` or ``tensorflow`` plugin, the
world every child carries (annotation ``hyperjob.io/world``, written by ``child_jobs``) from which
each child's jobcore gives its pods one hostfile / MPI_HOST / TF_CONFIG across all clusters.

Status (status-aggregator; the simulator)
-----------------------------------------
``aggregate_status(hyperjob, children: [ChildStatus], *, previous, admitted, lifecycle,
  waiting_reason, now) -> HyperJobStatus`` — upstream's conditions (only when every child is
  terminal; sticky), ``replicatedJobsStatus``, ``splitCount``, ``observedGeneration``, plus
  ``phase``, ``placement`` and ``waitingReason``. Encodes camelCase.

How a driver calls it (global-scheduler, splitter, status-aggregator; the simulator does all)
------------------------------------------------------------------------------------------
Keep per HyperJob: the manifest, ``created``, ``lifecycle`` (Active/Suspended/Restarting/
Terminating), ``admitted`` flag, the ``SplitPlan`` in force, the children (``ChildJob``), the
``HyperJobGang`` of the open attempt, the last ``HyperJobStatus``; per cluster its latest
``ClusterCapacity``; per queue its ``FleetQueue`` and what its admitted work requests.

1. Admission, whenever a candidate arrives or work finishes or capacity changes:
   ``admit(queues, allocated, [hyperjob_candidate(...), job_candidate(...)], fleet_capacity(live))``.
   Admitted → ``admitted=True``; add its request to its queue's ``allocated`` until it finishes.
   ``waiting[name]`` is the HyperJob's waitingReason while Pending.
2. Split, for an admitted HyperJob without a plan (or on a spec update, with ``current=plan``):
   ``plan_split(hj, capacities, current=plan, now=now)``. ``Waiting`` → waitingReason, try again on
   the next capacity summary. ``SplitPlan`` → ``child_jobs(hj, plan)`` → ``diff_children(existing,
   desired)``: delete, then create/update (unchanged children are left alone).
3. Gang, for the children just created: ``start_gang(hj name, {child: cluster}, hj.spec.min_available,
   now)``. ``Reserve`` → ask the cluster to hold the child's gang; ``StartTimer`` → deliver
   ``GangTimer(attempt)`` at ``at``; feed ``ReservationHeld``/``ReservationLost`` from clusters to
   ``gang_step``; ``Bind`` → the child's pods start; ``Release`` → drop that hold; ``Retry`` → drop
   the plan and go back to step 2 at ``at`` with ``attempt``. A cluster without reservations may
   treat ``Reserve`` as "enqueue" and report ``ReservationHeld`` once the podgroup is Inqueue.
4. Failover, on every capacity summary and a periodic tick: ``failover(hj, plan, capacities, now,
   finished=terminal children)``. ``ChildMove`` → delete the child on ``from_cluster`` (when it
   answers again) and create the same child (``child_jobs(hj, new plan)``) on ``to_cluster``;
   ``ChildWaits`` → nothing can hold it now: it stays on its cluster (show the reason) and
   ``failover`` moves it once room appears. One ``working`` capacity per round for every HyperJob.
5. A child's Volcano Job reached Failed: ``child_failed(hj, plan, child, capacities, now, phases)``;
   apply ``ChildCommand``s, ``ChildMove``/``ChildUnplaced`` as in 4, ``SetLifecycle``.
6. Commands: ``hyperjob_command(action, phases, lifecycle)``; on suspend also ``release_gang``.
   Each round ``settle_lifecycle(lifecycle, phases)``.
7. Pods of a child: the job-controller merges ``training_env(hj, plan, child, task, index)`` last.
8. Status, whenever a child's phase or pod counts change: ``aggregate_status(hj, [ChildStatus per
   planned child], previous=last, admitted=..., lifecycle=..., waiting_reason=..., now=now)``.
"""

from .admission import (
    STRICT_FIFO,
    STRICT_FIFO_ANNOTATION,
    Admission,
    Candidate,
    FleetQueue,
    QueueShare,
    admit,
    deserved_shares,
    fleet_capacity,
    fleet_queue,
    hyperjob_candidate,
    inadmissible,
    job_candidate,
    share,
)
from .affinity import affinity_allows, preference, spread_violation
from .capacity import (
    PodShape,
    could_ever_host,
    gang_pods,
    hyperjob_request,
    max_replicas,
    place_gang,
    spec_request,
    task_shape,
)
from .children import ChildChanges, child_jobs, child_spec, diff_children, template_hash
from .cost import cheapest_split, child_cost, plan_cost, pod_cost
from .env import local_rank, master_addr, training_env
from .failover import (
    ChildCommand,
    ChildMove,
    ChildUnplaced,
    ChildWaits,
    FleetDecision,
    SetLifecycle,
    child_failed,
    child_pods,
    failover,
    hung_reason,
    hyperjob_command,
    plain_failover,
    settle_lifecycle,
)
from .gang import (
    GANG_TIMEOUT,
    Bind,
    GangDecision,
    GangEvent,
    GangTimer,
    HyperJobGang,
    Release,
    ReservationHeld,
    ReservationLost,
    Reserve,
    Retry,
    StartTimer,
    gang_step,
    release_gang,
    start_gang,
)
from .liveness import (
    FLEET_LEASE,
    LEASE_CHECK_PERIOD,
    LEASE_MARGIN,
    BusWeather,
    FailoverGate,
    Hearing,
    forgive,
    move_after,
)
from .model import (
    CHILD_INDEX_ANNOTATION,
    CLUSTER_ANNOTATION,
    CLUSTER_SELECTOR_ANNOTATION,
    CLUSTER_SILENCE_TIMEOUT,
    HYPERJOB_NAME_LABEL,
    RANK_OFFSET_ANNOTATION,
    REPLICATED_JOB_LABEL,
    TEMPLATE_HASH_LABEL,
    WORLD_SIZE_ANNOTATION,
    ChildJob,
    ChildPlan,
    ClusterCapacity,
    NodeCapacity,
    SplitPlan,
    Waiting,
    child_ref,
    cluster_lost,
    control_plane_hung,
    link,
    live_clusters,
    plan_in_force,
)
from .placement import ROOM_RETRY, place_job
from .preemption import (
    GPU,
    Eviction,
    PreemptionPlan,
    Preemptor,
    RunningJob,
    RunningPod,
    given_back,
    plan_preemption,
    victim_allowed,
)
from .shares import apportion, main_shape
from .split import (
    INADMISSIBLE,
    child_name,
    choose_cluster,
    eligible_clusters,
    plan_split,
)
from .status import (
    COMPLETED_REASON,
    FAILED_REASON,
    TERMINAL_CHILD_PHASES,
    ChildStatus,
    Condition,
    HyperJobPhase,
    HyperJobStatus,
    JobState,
    Lifecycle,
    ReplicatedJobStatus,
    aggregate_status,
    finished_phase,
    placement,
)
from .world import WORLD_PLUGINS, world_of

__all__ = [
    "affinity_allows",
    "cheapest_split",
    "child_cost",
    "plan_cost",
    "pod_cost",
    "preference",
    "spread_violation",
    "Eviction",
    "PreemptionPlan",
    "Preemptor",
    "RunningJob",
    "RunningPod",
    "plan_preemption",
    "given_back",
    "GPU",
    "victim_allowed",
    "INADMISSIBLE",
    "ROOM_RETRY",
    "CHILD_INDEX_ANNOTATION",
    "CLUSTER_ANNOTATION",
    "CLUSTER_SELECTOR_ANNOTATION",
    "CLUSTER_SILENCE_TIMEOUT",
    "FLEET_LEASE",
    "LEASE_CHECK_PERIOD",
    "LEASE_MARGIN",
    "COMPLETED_REASON",
    "FAILED_REASON",
    "GANG_TIMEOUT",
    "HYPERJOB_NAME_LABEL",
    "RANK_OFFSET_ANNOTATION",
    "REPLICATED_JOB_LABEL",
    "STRICT_FIFO",
    "STRICT_FIFO_ANNOTATION",
    "TEMPLATE_HASH_LABEL",
    "TERMINAL_CHILD_PHASES",
    "WORLD_SIZE_ANNOTATION",
    "Admission",
    "Bind",
    "Candidate",
    "ChildChanges",
    "ChildCommand",
    "ChildJob",
    "ChildMove",
    "ChildPlan",
    "ChildStatus",
    "ChildUnplaced",
    "ChildWaits",
    "BusWeather",
    "FailoverGate",
    "Hearing",
    "ClusterCapacity",
    "Condition",
    "FleetDecision",
    "FleetQueue",
    "GangDecision",
    "GangEvent",
    "GangTimer",
    "HyperJobGang",
    "HyperJobPhase",
    "HyperJobStatus",
    "JobState",
    "Lifecycle",
    "NodeCapacity",
    "PodShape",
    "QueueShare",
    "Release",
    "ReplicatedJobStatus",
    "Reserve",
    "ReservationHeld",
    "ReservationLost",
    "Retry",
    "SetLifecycle",
    "SplitPlan",
    "StartTimer",
    "Waiting",
    "admit",
    "aggregate_status",
    "finished_phase",
    "apportion",
    "child_failed",
    "child_pods",
    "child_jobs",
    "child_name",
    "child_ref",
    "child_spec",
    "choose_cluster",
    "cluster_lost",
    "control_plane_hung",
    "hung_reason",
    "move_after",
    "could_ever_host",
    "deserved_shares",
    "diff_children",
    "eligible_clusters",
    "failover",
    "fleet_capacity",
    "forgive",
    "fleet_queue",
    "gang_pods",
    "gang_step",
    "hyperjob_candidate",
    "hyperjob_command",
    "hyperjob_request",
    "inadmissible",
    "job_candidate",
    "link",
    "live_clusters",
    "local_rank",
    "main_shape",
    "master_addr",
    "max_replicas",
    "place_gang",
    "place_job",
    "placement",
    "plain_failover",
    "plan_in_force",
    "plan_split",
    "release_gang",
    "settle_lifecycle",
    "share",
    "spec_request",
    "start_gang",
    "task_shape",
    "template_hash",
    "training_env",
    "WORLD_PLUGINS",
    "world_of",
]
