"""Extension points: one small runtime-checkable Protocol per Volcano hook, and how they combine.

A plugin implements only the hooks it needs and declares each as a base class
(``class GangPlugin(Plugin[NoArgs], JobOrder, JobValid, ...)``), so that mypy checks its methods'
signatures and ``tests/unit/schedcore/test_schedcore_plugin_protocols.py`` fails on a hook-like method that
no declared Protocol names (a misspelt hook). The session finds them with ``isinstance`` at open
and consults a hook only when the conf leaves it enabled (every hook defaults to on). The tier
combination rules are Volcano's (``framework/session_plugins.go``), documented per dispatcher.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

import msgspec
import numpy as np

from .cyclestate import CycleState
from .errors import ConfError
from .status import NodeRejection, Status

if TYPE_CHECKING:
    from .confspec import Arguments, PluginConf
    from .nodes import NodeTable
    from .resources import ResourceSpace
    from .state import JobState, QueueState, TaskState


class NoArgs(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Arguments of a plugin that takes none."""


class SessionView(Protocol):
    """What a plugin sees of its session: the cycle's world, not the session's machinery.

    Read: ``nodes`` (the node table; its rows are the node order every mask and score uses),
    ``space`` (resource names and vectors), ``jobs`` and ``queues`` (their per-cycle states),
    ``total`` (the cluster's allocatable), ``share_dims`` (the resources shares are taken over),
    ``plugin_conf`` (each plugin's conf line), ``cycle_state`` (per-cycle data under keys
    their modules own), ``static_mask`` (the enabled predicates' mask for
    a pod). Written by the plugins that own them: ``deserved`` (queue -> deserved vector, by
    the queue-sharing plugin) and ``unschedulable`` (job -> the reason users read, by gang).
    Plugins change placements only through the hooks, never through this view.
    """

    nodes: NodeTable
    space: ResourceSpace
    jobs: dict[str, JobState]
    queues: dict[str, QueueState]
    total: np.ndarray
    share_dims: np.ndarray
    plugin_conf: dict[str, PluginConf]
    cycle_state: CycleState
    deserved: dict[str, np.ndarray]
    unschedulable: dict[str, str]

    def static_mask(self, task: TaskState) -> np.ndarray: ...


ArgsT = TypeVar("ArgsT", bound=msgspec.Struct)


class Plugin(Generic[ArgsT]):
    """Base class: ``NAME``, a strict ``Args`` struct, and optional session open/close hooks.

    ``Plugin[XArgs]`` with ``Args = XArgs``: the conf's arguments decode to ``Args`` and reach the
    instance as ``self.args``, typed. A plugin instance lives for one session;
    ``on_session_open`` runs in tier order before any action, ``on_session_close`` after the
    last one.
    """

    NAME: ClassVar[str] = ""
    Args: ClassVar[type[msgspec.Struct]] = NoArgs
    # Placement cache scope of a filter or scorer: by the task's queue too (``per_queue``), or
    # never cached, added afresh for each pod (``per_task``: a scorer that draws per pod).
    per_queue: ClassVar[bool] = False
    per_task: ClassVar[bool] = False

    def __init__(self, args: ArgsT) -> None:
        self.args = args
        self.ssn: SessionView

    @classmethod
    def decode_args(cls, arguments: Arguments, path: str) -> msgspec.Struct:
        """Decode the conf's ``arguments`` strictly; unknown keys and bad values name the argument."""
        try:
            return msgspec.convert(arguments, cls.Args, strict=False)
        except msgspec.ValidationError as exc:
            msg = str(exc)
            if "unknown field" in msg:
                field = msg.split("`")[1] if "`" in msg else msg
                raise ConfError(f"{path}: unknown argument {field!r} for plugin {cls.NAME!r}") from None
            raise ConfError(f"{path}: bad argument for plugin {cls.NAME!r}: {msg}") from None

    def on_session_open(self, ssn: SessionView) -> None:
        self.ssn = ssn

    def on_session_close(self, ssn: SessionView) -> None:
        """Default: nothing to write back."""


@runtime_checkable
class JobOrder(Protocol):
    """Which of two jobs of one queue allocate, preempt and reclaim serve first.

    <0: ``a`` first; >0: ``b`` first; 0: no preference, the next plugin (conf order) decides,
    and after the last one the job's (creation, namespace, name). Must be a consistent order:
    the queues are heaps. Pure: no state changes.
    """

    def job_order(self, a: JobState, b: JobState) -> int: ...


@runtime_checkable
class QueueOrder(Protocol):
    """Which of two queues allocate, enqueue, preempt and reclaim serve next.

    <0: ``a`` first; >0: ``b`` first; 0: the next plugin (conf order) decides, and after the
    last one the queues' (creation, name). Asked again each time a queue is pushed back, so
    the order follows shares as they change during the cycle.
    """

    def queue_order(self, a: QueueState, b: QueueState) -> int: ...


@runtime_checkable
class VictimQueueOrder(Protocol):
    """Between victims of two queues, whose go first when ``preemptor`` (a queue) reclaims.

    <0: ``a``'s victims are evicted first; >0: ``b``'s; 0: the next plugin decides, and after
    the last one the reverse of ``QueueOrder`` (the queue served last loses first).
    """

    def victim_queue_order(self, a: QueueState, b: QueueState, preemptor: QueueState) -> int: ...


@runtime_checkable
class TaskOrder(Protocol):
    """Which of two tasks of one job is placed first (and, reversed, evicted first).

    <0: ``a`` first; >0: ``b`` first; 0: the next plugin decides, and after the last one the
    tasks' declared order (``order_index``), then their key.
    """

    def task_order(self, a: TaskState, b: TaskState) -> int: ...


@runtime_checkable
class Preemptable(Protocol):
    """Which of ``candidates`` (Running/Bound pods of ``preemptor``'s queue, on one node) this
    plugin lets ``preemptor`` evict.

    A list (possibly empty) is this plugin's answer; None abstains. Within a tier the answers
    intersect; the first tier whose intersection is non-empty decides, and once a tier has
    answered, an empty answer later leaves no victims (Volcano's rule: gang's protection holds).
    """

    def preemptable(self, preemptor: TaskState, candidates: list[TaskState]) -> list[TaskState] | None: ...


@runtime_checkable
class Reclaimable(Protocol):
    """Which of ``candidates`` (Running pods of other, reclaimable queues, on one node) this
    plugin lets ``reclaimer`` evict: a list (possibly empty) answers, None abstains; answers
    combine as ``Preemptable``'s do."""

    def reclaimable(self, reclaimer: TaskState, candidates: list[TaskState]) -> list[TaskState] | None: ...


@runtime_checkable
class Preemptive(Protocol):
    """Reclaimer side of reclaim: may ``queue`` take back room for ``tasks`` from other queues
    (it is below what it deserves). True: yes. False from any plugin: the task reclaims nothing."""

    def preemptive(self, queue: QueueState, tasks: list[TaskState]) -> bool: ...


@runtime_checkable
class Overused(Protocol):
    """Has ``queue`` all it deserves. True from any plugin drops the queue from allocate and
    reclaim each time it is popped, for the rest of that action; False lets it be served."""

    def overused(self, queue: QueueState) -> bool: ...


@runtime_checkable
class Allocatable(Protocol):
    """May ``task`` be placed given its queue's quota right now. Asked by allocate before it
    looks for a node for each pending task, and by preempt for each candidate node.

    ``SUCCESS``: the quota admits it. ``UNSCHEDULABLE`` (the queue is at its deserved or
    capability on a resource the task asks for, or is not Open): the task is skipped this turn;
    the first rejecting plugin's reason is what the job's users read. Every enabled implementer
    must answer ``SUCCESS`` (Volcano's logical AND; none enabled admits).
    """

    def allocatable(self, queue: QueueState, task: TaskState) -> Status: ...


@runtime_checkable
class JobReady(Protocol):
    """May the job's statement be committed: True when what it has allocated (plus what it
    already runs) is enough to start it (gang: ``minAvailable`` pods, and each role's minimum).
    Every implementer must agree; allocate commits on True, else asks ``JobPipelined``."""

    def job_ready(self, job: JobState) -> bool: ...


@runtime_checkable
class JobPipelined(Protocol):
    """A vote on keeping a job's not-yet-ready statement for the rest of the cycle (its pods
    wait on releasing ones). Asked by allocate, preempt and reclaim after ``JobReady`` said no.

    Votes combine as ``JobEnqueueable``'s: ``SUCCESS`` permits, ``SKIP`` abstains, any other
    code rejects (``UNSCHEDULABLE``: not enough pods placed or pipelined for the gang) and
    discards the statement. Its reason is for logs and tests: users read the job's placement
    failures instead, which say why the pods found no node.
    """

    def job_pipelined(self, job: JobState) -> Status: ...


@runtime_checkable
class JobStarving(Protocol):
    """Does the job still want pods it has not got: preempt and reclaim look for victims only
    for starving jobs, and stop once the job is no longer starving. Within the first tier that
    answers, every implementer must say True."""

    def job_starving(self, job: JobState) -> bool: ...


@runtime_checkable
class JobValid(Protocol):
    """May the job be scheduled at all this cycle. Asked by every action before it works on a
    job, whatever the conf's switches say.

    ``SUCCESS``: valid. Any other code (``UNRESOLVABLE`` for a job that cannot run as declared,
    such as a gang with fewer valid pods than ``minAvailable``) skips the job for the cycle; the
    first rejecting plugin's reasons are what its users read.
    """

    def job_valid(self, job: JobState) -> Status: ...


@runtime_checkable
class JobEnqueueable(Protocol):
    """A vote on admitting a Pending podgroup (phase Pending -> Inqueue; its pods get created).
    Asked by enqueue for each Pending job with ``minResources``, its queue being Open.

    ``job_enqueueable`` answers Volcano's vote as a status:

    - ``SUCCESS`` = permit: a tier with a permit and no reject admits the job; later tiers are
      not asked.
    - ``SKIP`` = abstain: no opinion; a tier where every plugin abstains passes to the next
      tier, and a job no tier decides is admitted.
    - ``UNSCHEDULABLE`` (or any other code) = reject: the job stays Pending this cycle, whatever
      the other plugins say; the first rejecting plugin's reason (the quota or capacity its
      ``minResources`` exceed) becomes the podgroup's Unschedulable message.

    ``job_enqueued`` is told of every admitted job (reserve its minResources); it is called
    only once every plugin has let the job in.
    """

    def job_enqueueable(self, job: JobState) -> Status: ...

    def job_enqueued(self, job: JobState) -> None: ...


@runtime_checkable
class Predicate(Protocol):
    """Static node filter for a task (kube-scheduler's Filter, vectorised over the node table).

    Returns the node rows this plugin rules out, one ``NodeRejection`` per reason (its ``rows``
    a boolean mask over the session's node rows, its ``code`` ``UNRESOLVABLE``: no eviction
    makes a node match); an empty sequence passes every node. A node passes when no rejection
    of any enabled predicate covers it. The reasons feed the "0/N nodes are available" message
    of a pod no node takes, where a node is counted under the first rejection (in conf order,
    then in the order returned) that covers it.

    Must depend only on the task's selector fields (and its queue, for a ``per_queue``
    plugin) and on node attributes (labels, taints, unschedulable), never on node usage: the
    session caches the answer per distinct selector.
    """

    per_queue: ClassVar[bool]  # as ``Plugin`` declares it: a plugin says it once, for every instance

    def filter_nodes(self, task: TaskState) -> Sequence[NodeRejection]: ...


@runtime_checkable
class DynamicFit(Protocol):
    """Usage-dependent node filter for a task, on top of the resource fit: which of ``rows`` can
    take ``task`` now (True: fits; None: no opinion on this task). Must depend only on the
    task's placement fields and on state that changes only when a node row changes (the
    placement refreshes a row's fit when the node is marked dirty). ``misfit_reason`` is how a
    user reads a False (``UNSCHEDULABLE``: the node may fit once pods leave it)."""

    misfit_reason: str

    def fits_rows(self, task: TaskState, rows: np.ndarray) -> np.ndarray | None: ...


@dataclass(frozen=True, slots=True)
class Domain:
    """A set of nodes a gang is tried within as a whole (a HyperNode): ``rows`` is a boolean
    mask over the node table, ``key`` names it for the placement caches (unique per mask) and
    ``name`` for users ("HyperNode s1 (tier 1)")."""

    name: str
    rows: np.ndarray
    key: object


@dataclass(frozen=True, slots=True)
class DomainPlan:
    """Where allocate tries a job's gang: each of ``domains`` in turn (produced lazily, so a
    domain is judged on the nodes as the failed tries before it left them), then, with
    ``fallback``, every node; without it the job waits with ``unplaced`` as its reason."""

    domains: Iterable[Domain]
    fallback: bool
    unplaced: Status


@runtime_checkable
class GangDomains(Protocol):
    """Network-topology placement (Volcano's HyperNodes): the node sets a job's gang must, or
    should, land within as a whole.

    ``wants_domains``: True when this plugin places the job (allocate then drains the job's
    pending tasks in task order and asks ``job_domains`` for them); False leaves the job to
    plain node-by-node allocation. The first plugin that wants the job decides. Each domain
    is one statement: kept when the job becomes ready or pipelined within it, rolled back
    otherwise. A job with a ``hard`` network-topology request that no plugin wants waits
    (``UNRESOLVABLE``), never lands outside the topology it asked for.
    """

    def wants_domains(self, job: JobState) -> bool: ...

    def job_domains(self, job: JobState, todo: Sequence[TaskState]) -> DomainPlan: ...


@runtime_checkable
class NodeScore(Protocol):
    """Scores of ``task`` on node ``rows`` (higher is better; the enabled scorers' sum ranks the
    nodes, ties broken by node name). Must depend only on the task's shape (plus its queue when
    ``per_queue``) and on those rows' state: the placement caches a shape's scores and
    refreshes a row only when it changes. ``per_task`` scorers (a per-pod draw) are never
    cached: they are added over every node whenever a pod picks one."""

    per_queue: ClassVar[bool]
    per_task: ClassVar[bool]

    def score(self, task: TaskState, rows: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class ScalarScore(Protocol):
    """Optional beside ``NodeScore``: the same score for one row as a plain float. When every
    shape scorer has it, refreshing a single changed row skips numpy."""

    def score_one(self, task: TaskState, row: int) -> float: ...


@runtime_checkable
class JobOrderKey(Protocol):
    """Optional beside ``JobOrder``: a sort key ordering jobs exactly as ``job_order`` does. When
    every job-order plugin has one, job queues compare tuples instead of calling the chain."""

    def job_order_key(self, job: JobState) -> float | int | bool: ...


@runtime_checkable
class DeviceChoice(Protocol):
    """The GPU devices of node ``row`` to give a GPU pod just placed there.

    Called once per allocation of a pod with a device request (``task.vgpu``: count, cores per
    device). Return ``task.vgpu[0]`` distinct device indexes that each have the cores free, or
    an empty tuple to abstain; an answer that does not hold the request is ignored, and with no
    answer the node table takes the best-fit devices (least free cores first, then by index).
    """

    def choose_devices(self, task: TaskState, row: int) -> tuple[int, ...]: ...


@runtime_checkable
class EventHandler(Protocol):
    """Told of every change to a task's placement, so plugins keep their accounting (shares,
    quota, NUMA room) current: ``on_allocate`` after an allocate, a pipeline or an undone
    evict; ``on_deallocate`` after an evict or an undone allocate/pipeline. Called inside the
    change, in conf order; must not change placements itself."""

    def on_allocate(self, task: TaskState) -> None: ...

    def on_deallocate(self, task: TaskState) -> None: ...


_IMPLEMENTS: dict[tuple[type, type], bool] = {}


def implements(plugin: object, protocol: type) -> bool:
    """``isinstance(plugin, protocol)``, decided once per plugin class: a runtime-checkable
    Protocol's check looks every member up by name, and a session, built every cycle, asks it of
    every plugin for each of ``HOOKS`` (7 % of a simulation's time). A plugin's hooks are its class's
    methods, which its class declares (``Plugin``)."""
    key = (type(plugin), protocol)
    known = _IMPLEMENTS.get(key)
    if known is None:
        known = _IMPLEMENTS[key] = isinstance(plugin, protocol)
    return known


# hook -> (protocol, conf switch); a switch absent from the conf means enabled.
HOOKS: dict[str, tuple[type, str | None]] = {
    "job_order": (JobOrder, "enableJobOrder"),
    "queue_order": (QueueOrder, "enableQueueOrder"),
    "victim_queue_order": (VictimQueueOrder, "enableQueueOrder"),
    "task_order": (TaskOrder, "enableTaskOrder"),
    "preemptable": (Preemptable, "enablePreemptable"),
    "reclaimable": (Reclaimable, "enableReclaimable"),
    "preemptive": (Preemptive, "enablePreemptive"),
    "overused": (Overused, "enabledOverused"),
    "allocatable": (Allocatable, "enabledAllocatable"),
    "job_ready": (JobReady, "enableJobReady"),
    "job_pipelined": (JobPipelined, "enableJobPipelined"),
    "job_starving": (JobStarving, "enableJobStarving"),
    "job_valid": (JobValid, None),
    "job_enqueueable": (JobEnqueueable, "enableJobEnqueued"),
    "predicate": (Predicate, "enablePredicate"),
    "dynamic_fit": (DynamicFit, "enablePredicate"),
    "gang_domains": (GangDomains, "enabledHyperNodeOrder"),
    "node_score": (NodeScore, "enableNodeOrder"),
    "device_choice": (DeviceChoice, "enableNodeOrder"),
    "event": (EventHandler, None),
}
