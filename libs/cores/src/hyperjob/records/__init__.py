"""The documents each service keeps in the store: its own projection (ADR 0004), one writer per kind.

| kind                       | writer             | what                                             |
|----------------------------|--------------------|--------------------------------------------------|
| ``hyperjob``               | splitter           | HyperJobDoc: a HyperJob (or plain Job), its plan and lifecycle |
| ``queue``, ``priorityclass`` | splitter         | the objects as applied                           |
| ``owner``                  | global-scheduler   | OwnerDoc: an admission candidate, admitted or not |
| ``placement``              | global-scheduler   | PlacementDoc: where one child runs, or why it waits |
| ``gang``                   | global-scheduler   | fleetcore.HyperJobGang: one reservation attempt  |
| ``job@<cluster>``          | job-controller     | jobcore.JobRecord                                |
| ``child@<cluster>``        | job-controller     | ChildInfo: what came with the dispatch           |
| ``podgroup@<cluster>``     | job-controller     | BarePodGroupDoc: a PodGroup applied on its own   |
| ``lease@<cluster>``        | job-controller     | LeaseDoc: the fleet lease and the fenced children|
| ``pgphase@<cluster>``      | cluster-scheduler  | PodGroupPhaseDoc                                 |
| ``reservation@<cluster>``  | cluster-scheduler  | ReservationDoc: a gang member's hold             |
| ``queueusage@<cluster>``   | cluster-scheduler  | QueueUsageDoc: the last session's share per queue |
| ``preempt@<cluster>``      | cluster-scheduler  | PreemptOrderDoc: the fleet's eviction order for a gang child |
| ``binding@<cluster>``      | cluster-scheduler  | the store's resource accounting (not a document) |
| ``hjspec``, ``hjstatus``   | status-aggregator  | what it knows of each HyperJob, and the status   |
| ``hjearly``                | status-aggregator  | children's news that came before their HyperJob's spec |
| ``agentpod@<agent>``       | node-agent         | the pods it runs                                 |
| ``agentdown@<agent>``      | node-agent         | the nodes an injected fault took down            |
| ``cronjob``, ``jobflow``, ``jobtemplate`` | workflow-controller | the objects as applied, and the Jobs each made |

A service reads only its own kinds (from memory; the store only to start). The simulator reads
any of them to show the system's state; a client (the CLI, the dashboard, the apiserver) only
those of the read model, a contract that changes only compatibly (``hyperjob.client.readmodel``,
ADR 0012). Pure: no I/O.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from hyperjob import events

# A manifest or a status as a JSON object: stored as its writer encoded it and decoded into the
# typed structs (``api.decode``, ``msgspec.convert``) where it is read, so its values stay Any here.
JSONObject = dict[str, Any]

QUEUE = "queue"
PRIORITY_CLASS = "priorityclass"
HYPERJOB = "hyperjob"
OWNER = "owner"
PLACEMENT = "placement"
GANG = "gang"
HYPERJOB_SPEC = "hjspec"
HYPERJOB_STATUS = "hjstatus"
HYPERJOB_EARLY_NEWS = "hjearly"
CRONJOB = "cronjob"
JOBFLOW = "jobflow"
JOBTEMPLATE = "jobtemplate"


def job_kind(cluster: str) -> str:
    return f"job@{cluster}"


def child_kind(cluster: str) -> str:
    return f"child@{cluster}"


def bare_podgroup_kind(cluster: str) -> str:
    return f"podgroup@{cluster}"


def pgphase_kind(cluster: str) -> str:
    return f"pgphase@{cluster}"


def reservation_kind(cluster: str) -> str:
    return f"reservation@{cluster}"


def queue_usage_kind(cluster: str) -> str:
    return f"queueusage@{cluster}"


def preempt_kind(cluster: str) -> str:
    return f"preempt@{cluster}"


# -- splitter -------------------------------------------------------------------------------------


class QueueDoc(msgspec.Struct, frozen=True, kw_only=True):
    manifest: JSONObject
    state: str = "Open"
    created: float = 0.0


class PriorityClassDoc(msgspec.Struct, frozen=True, kw_only=True):
    manifest: JSONObject
    value: int
    global_default: bool = False


Lifecycle = Literal["Active", "Suspended", "Resuming", "Restarting"]


class HyperJobDoc(msgspec.Struct, frozen=True, kw_only=True):
    """A submitted HyperJob (or a plain Job: ``plain``, one child of the same name).

    ``children`` is the plan in force (empty until admitted and planned); ``attempt`` counts the
    plans a timed-out gang asked for; ``child_phases`` is the latest Job phase of each child.
    ``applied`` is a Kubeflow job as the user applied it (``manifest`` is the Volcano Job that runs
    it), so ``get pytorchjob x -o yaml`` prints what was applied; empty for every other kind.
    """

    name: str
    manifest: JSONObject
    generation: int = 1
    created: float = 0.0
    plain: bool = False
    admitted: bool = False
    attempt: int = 1
    children: list[events.ChildRef] = []
    world_size: int = 0
    deleting: bool = False
    waiting_reason: str = ""
    lifecycle: Lifecycle = "Active"
    restarts: int = 0
    child_phases: dict[str, str] = {}
    applied: JSONObject = {}


# -- global-scheduler -----------------------------------------------------------------------------


class OwnerDoc(msgspec.Struct, frozen=True, kw_only=True):
    """An admission candidate (``events.OwnerSubmitted``) and whether its queue admitted it.
    While admitted, its ``request`` counts against its queue until every child is done."""

    name: str
    plain: bool = False
    queue: str
    priority: int = 0
    request: dict[str, float]
    created: float
    generation: int = 1
    admitted: bool = False
    withdrawn: bool = False  # deleted: forgotten once its last child is gone
    reason: str = ""  # why its queue does not admit it (yet)
    gang: int = 0  # children that must hold their reservations before any starts (0: no gang)
    attempt: int = 1  # the plan (re-planned after a gang attempt timed out)
    world: events.World | None = None


PlacementState = Literal["Waiting", "Dispatched", "Unplaced", "Removing", "Replacing"]


class PlacementDoc(msgspec.Struct, frozen=True, kw_only=True):
    """Where a child job runs (``cluster``), or why it waits (``reason``), and what was asked for
    it. See ``fleetcore.placement_step`` for the states and their transitions."""

    child: str
    owner: str
    plain: bool = False
    replicated_job: str = ""
    clusters: list[str] = []
    job: JSONObject = {}
    template_hash: str = ""
    state: PlacementState = "Waiting"
    cluster: str = ""
    reason: str = ""
    requested_at: float = 0.0
    attempt: int = 0  # the owner's plan attempt that asked for it
    finished: bool = False  # the child's Job reached a terminal phase
    enqueued: bool = False  # its cluster's Volcano admitted the podgroup (a plain Job counts against its queue then)
    moves: int = 0  # how often failover moved it (its pods' earlier incarnations elsewhere)
    dispatched_at: float = 0.0  # when it was last sent to ``cluster``
    running: bool = False  # its Job left Pending there: the cluster's summary counts its pods
    next: PlacementDoc | None = None  # Replacing: the request placed once the predecessor is gone


# -- job-controller -------------------------------------------------------------------------------


class ChildInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What the job-controller keeps of a dispatch besides the job record: the HyperJob it belongs
    to, its cross-cluster gang, the world for the training env, and whether it is being removed."""

    hyperjob: str = ""
    replicated_job: str = ""
    gang: str = ""
    gang_attempt: int = 0
    attempt: int = 0
    world: events.World | None = None
    removing: bool = False


class BarePodGroupDoc(msgspec.Struct, frozen=True, kw_only=True):
    """A PodGroup applied on its own (no Job): scheduled like any, with no pods."""

    manifest: JSONObject
    uid: str
    created: float = 0.0


# -- cluster-scheduler ----------------------------------------------------------------------------


class PodGroupPhaseDoc(msgspec.Struct, frozen=True, kw_only=True):
    """A podgroup's phase, for one incarnation of it (``<job uid>/<job version>``): a phase left
    by an earlier job of the same name, or by the podgroup before a restart, is not this one's."""

    phase: str
    reason: str = ""
    incarnation: str = ""


ReservationState = Literal["Reserving", "Held", "Released", "Started"]


class ReservationDoc(msgspec.Struct, frozen=True, kw_only=True):
    """The hold of one incarnation (``uid``) of a gang member, for one gang ``attempt``."""

    state: ReservationState = "Reserving"
    attempt: int = 1
    uid: str = ""


class PreemptOrderDoc(msgspec.Struct, frozen=True, kw_only=True):
    """The fleet's order to evict pods for a gang child here (``events.PreemptForGang``), kept
    until carried out (``evicted_at``: when), then while the victims wait for the child to hold."""

    order: events.PreemptForGang
    evicted_at: float = 0.0


class QueueUsageDoc(msgspec.Struct, frozen=True, kw_only=True):
    """A queue's allocated and deserved resources in one cluster, as the last session saw them."""

    allocated: dict[str, float] = {}
    deserved: dict[str, float] = {}


# -- status-aggregator ----------------------------------------------------------------------------


class HyperJobStatusDoc(msgspec.Struct, frozen=True, kw_only=True):
    """The aggregated status; ``children`` is the latest news of each child."""

    name: str
    phase: str
    status: JSONObject
    updated_at: float = 0.0
    children: dict[str, JSONObject] = {}


# -- workflow-controller --------------------------------------------------------------------------


class MadeJob(msgspec.Struct, frozen=True, kw_only=True):
    """A Volcano Job a CronJob or JobFlow asked the splitter to create, as far as it has heard:
    ``phase`` is empty until the job-controller first reports it (the job counts as Pending)."""

    request: str  # the apply's event id: the splitter's answer names it
    created: float
    phase: str = ""
    scheduled_at: float | None = None  # a CronJob's run: the schedule time it is for
    kind: str = "Job"  # or HyperJob: a JobFlow's step made from a HyperJobTemplate


class CronJobDoc(msgspec.Struct, frozen=True, kw_only=True):
    """A CronJob as applied, and what ``jobcore.cronjob`` remembers (Kubernetes' status fields)."""

    manifest: JSONObject
    created: float
    last_schedule_time: float | None = None
    last_successful_time: float | None = None
    active: list[str] = []
    jobs: dict[str, MadeJob] = {}
    next_sync: float | None = None  # when the schedule next asks for a look (the timer)
    message: str = ""  # the last job the splitter refused, and why


class JobFlowDoc(msgspec.Struct, frozen=True, kw_only=True):
    """A JobFlow as applied, its phase and status (``jobcore.jobflow``) and the Jobs it made."""

    manifest: JSONObject
    created: float
    phase: str = "Pending"
    status: JSONObject = {}
    jobs: dict[str, MadeJob] = {}
    refused: dict[str, str] = {}  # job → why the splitter refused it; not asked again until re-applied
    message: str = ""


class JobTemplateDoc(msgspec.Struct, frozen=True, kw_only=True):
    manifest: JSONObject
    created: float
