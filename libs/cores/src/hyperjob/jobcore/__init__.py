"""jobcore — the pure lifecycle of one Volcano Job (``batch.volcano.sh/v1alpha1``).

Owns: admission defaults and rejections, PodGroup derivation, pod records (names, annotations,
requests, job-plugin env/files/command/ports: env, svc, ssh, pytorch, mpi, tensorflow, ray, and the
HyperJob world of a child, ``jobcore.world``), the ten-phase state machine, lifecycle policies with timeouts,
retries and the job version, and commands; task start dependencies (``dependsOn``: a task's pods are
created once the tasks it names run) and partition policies (``RestartPartition``). Beside the Job:
``jobcore.cronjob`` (a CronJob's runs) and ``jobcore.jobflow`` (a JobFlow's DAG), pure steps not
yet driven by a service. Shared by the job-controller service and
``hyperjob simulate``; both call ``admit`` once and ``decide`` for every event. Pure: no I/O, no
clock (``now`` is passed in), no unseeded randomness; the same inputs always give the same outputs.

Use::

    record = admit(job, queues, now)                  # api.ManifestError on rejection
    effects = initial_effects(record)                 # JobPhaseChanged("", Pending) + CreatePodGroup
    record, effects = decide(record, event, now)      # for every event about this job

Invariants: pods exist only after the podgroup is admitted (``PodGroupAdmitted``); pod names are
``<job>-<task>-<index>``; counters are derived from ``record.pods``; a pod event whose
``job_version`` (or ``uid``) does not match the pod's current incarnation changes nothing; so does
any event that repeats an observation already applied (``decide`` is idempotent).

State machine (Volcano ``pkg/controllers/job/state``). Actions come from the policy the event
matched (task policies first, then the job's; default ``SyncJob``), from a command, or from a
delayed action whose timer fired::

    phase        action                         effect on pods                   next phase
    Pending      RestartJob                     KillJob(none), retry+1           Restarting
    Running      RestartTask/Pod/Partition      KillTarget, retry+1              Restarting
                 AbortJob                       KillJob(soft)                    Aborting
                 CompleteJob                    KillJob(soft)                    Completing
                 TerminateJob                   KillJob(soft)                    Terminating
                 SyncJob (default)              create podgroup / missing pods   Pending: Running iff minAvailable ≤
                                                                                 running+succeeded+failed;
                                                                                 Running: see "Running check"
    Restarting   SyncJob                        sync                             Failed if retry ≥ maxRetry, else
                 RestartTask/Pod/Partition      KillTarget                       Pending iff replicas − terminating
                 anything else                  KillJob(none)                    ≥ minAvailable, else Restarting
    Aborting     ResumeJob                      KillJob(soft), retry+1           Restarting
                 anything else                  KillJob(soft)                    Aborted once nothing pending/running/terminating
    Aborted      ResumeJob                      —, retry+1                       Restarting
                 anything else                  KillJob(soft)                    Aborted
    Completing   any                            KillJob(soft)                    Completed once nothing pending/running/terminating
    Terminating  any                            KillJob(soft)                    Terminated once nothing pending/running/terminating
    Completed, Terminated, Failed: any          KillJob(soft)                    unchanged

Running check (SyncJob in Running): no replicas → unchanged; succeeded ≥ minSuccess → Completed;
all pods finished → Failed if (minAvailable ≥ Σ task minAvailable and some task has fewer
succeeded than its minAvailable) or succeeded < minSuccess, else Completed iff succeeded ≥
minAvailable, else Failed; otherwise Pending if pending > replicas − minAvailable, else Running.

KillJob(retain): pods not in retain (soft = Succeeded/Failed kept; none = nothing kept; soft is
forced on the last retry, retryCount ≥ maxRetry−1) become Terminating (``DeletePods``) until the
driver reports ``PodDeleted`` (or the pod's own ``PodSucceeded``/``PodFailed``: it ended before the
delete reached its node); the podgroup is deleted and the job version bumped. After any phase
change the new phase is synced once more, as Volcano's job-update event does (so a job that
became Completed by minSuccess kills its remaining pods at once).

Events → policy events: PodFailed → PodFailed (with exitCode); PodEvicted → PodEvicted;
PodSucceeded → TaskCompleted when every replica of the task succeeded, else OutOfSync;
PodRestarted → TaskFailed when the task's live pods restarted ≥ task maxRetry times; PodRunning,
PodBound, PodDeleted, PodGroupAdmitted → internal (SyncJob); PodGroupUnknown → Unknown. A pod
created Pending arms a ``PodPending`` policy only if it has a timeout. The default reaction to an
eviction (SyncJob) recreates the pod Pending under the same name with ``incarnation + 1``.

Driver contract (simulator and job-controller service alike):

* Feed ``PodGroupAdmitted(job_version=podgroup.job_version)`` when the podgroup reaches Inqueue,
  ``PodBound``/``PodRunning``/``PodSucceeded``/``PodFailed`` as the pod goes, ``PodRestarted``
  (total in-place restarts) for OnFailure/Always containers, ``PodEvicted`` when the system removed
  a pod (preempt, reclaim, nodeDown), ``PodDeleted`` once a pod named in ``DeletePods`` is gone,
  ``CommandIssued`` for commands, ``TimerFired`` when a ``StartTimer`` comes due. Pod events carry
  the pod record's ``version`` as ``job_version`` and, ideally, its ``uid``.
* Carry out effects in order: ``CreatePodGroup``/``DeletePodGroup`` (the podgroup of the job's
  name; a new one starts Pending), ``CreatePods`` (each ``PodRecord`` has what the scheduler and
  node need), ``DeletePods`` (stop the pods, then report each ``PodDeleted``), ``StartTimer`` /
  ``CancelTimer`` (keys are unique per arming; firing a cancelled key is harmless),
  ``JobPhaseChanged`` (publish / put on the timeline).
"""

from __future__ import annotations

from hyperjob.events import PodCounts  # the counters ``counts`` returns (one declaration)

from .admission import DEFAULT_MAX_RETRY, KeyGen, admit, apply_defaults
from .decide import COMMAND_VERBS, decide
from .model import (
    PHASES,
    CancelTimer,
    CommandIssued,
    CreatePodGroup,
    CreatePods,
    DelayedAction,
    DeletePodGroup,
    DeletePods,
    Effect,
    JobEvent,
    JobPhaseChanged,
    JobRecord,
    PodBound,
    PodDeleted,
    PodEvicted,
    PodFailed,
    PodGroupAdmitted,
    PodGroupInfo,
    PodGroupUnknown,
    PodRecord,
    PodRestarted,
    PodRun,
    PodRunning,
    PodScheduling,
    PodStatus,
    PodSucceeded,
    RankOverride,
    SshKeyPair,
    StartTimer,
    TimerFired,
)
from .naming import PodPatch, parse_pod_name
from .plugins import pod_environment, pod_patch, svc_data
from .podgroup import derive_podgroup, minimum_pods, shown_phase
from .pods import SIM_DURATION, SIM_EXIT_CODE, build_pod, pod_request
from .policy import Resolution, resolve
from .sshkeys import deterministic_keygen, generate_rsa_keypair
from .status import JobStatus, counts, job_status, task_counts, total_replicas


def initial_effects(record: JobRecord) -> list[Effect]:
    """What a driver does right after ``admit``: announce the Pending phase and create the podgroup."""
    return [
        JobPhaseChanged(old="", new=record.phase, reason="Created"),
        CreatePodGroup(podgroup=derive_podgroup(record)),
    ]


__all__ = [
    "COMMAND_VERBS",
    "DEFAULT_MAX_RETRY",
    "PHASES",
    "SIM_DURATION",
    "SIM_EXIT_CODE",
    "CancelTimer",
    "CommandIssued",
    "CreatePodGroup",
    "JobStatus",
    "PodCounts",
    "CreatePods",
    "DelayedAction",
    "DeletePodGroup",
    "DeletePods",
    "Effect",
    "JobEvent",
    "JobPhaseChanged",
    "JobRecord",
    "KeyGen",
    "PodBound",
    "PodDeleted",
    "PodEvicted",
    "PodFailed",
    "PodGroupAdmitted",
    "PodGroupInfo",
    "PodGroupUnknown",
    "PodRecord",
    "PodRestarted",
    "PodRun",
    "PodRunning",
    "PodScheduling",
    "PodPatch",
    "PodStatus",
    "PodSucceeded",
    "RankOverride",
    "Resolution",
    "SshKeyPair",
    "StartTimer",
    "TimerFired",
    "admit",
    "apply_defaults",
    "build_pod",
    "counts",
    "decide",
    "derive_podgroup",
    "deterministic_keygen",
    "job_status",
    "generate_rsa_keypair",
    "initial_effects",
    "minimum_pods",
    "parse_pod_name",
    "pod_environment",
    "pod_patch",
    "pod_request",
    "resolve",
    "shown_phase",
    "svc_data",
    "task_counts",
    "total_replicas",
]
