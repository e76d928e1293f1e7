"""HyperJob in both manifest forms, normalized to one model.

* Upstream form, ``training.volcano.sh/v1alpha1``: ``replicatedJobs[]`` each with a Volcano
  ``templateSpec``, ``replicas``, ``clusterNames`` and ``splitPolicy``.
* Conceptual form, ``batch.volcano.sh/v1alpha1``: one whole Job manifest in ``template`` plus
  ``splitPolicy: {strategy: ByCluster, clusters: [{name, replicas}]}``; it becomes one replicated
  job named ``job``.

Project extensions (upstream leaves these "reserved" or lacks them), all optional:
``replicatedJobs[].templateMetadata`` (labels and annotations for every child Job),
``splitPolicy.clusters`` (explicit per-cluster replicas, in the upstream form too),
``splitPolicy.weights`` (static weights per cluster), ``splitPolicy.granularity`` (replicas are
divided in multiples of this), and ``spec.childFailurePolicy`` (what a child failing beyond its own
retries does to the HyperJob).
"""

from __future__ import annotations

from typing import Final, Generic, Literal, TypeVar

import msgspec

from .base import NonNegative, ObjectMeta, Positive, Spec
from .job import JobSpec
from .pod import PodTemplateMeta

TRAINING_API_VERSION: Final = "training.volcano.sh/v1alpha1"
CONCEPT_API_VERSION: Final = "batch.volcano.sh/v1alpha1"
CONCEPT_REPLICATED_JOB = "job"
# Set by ``normalize`` on a HyperJob written in the conceptual form, so errors can name the fields
# the user actually wrote (``$.spec.splitPolicy`` rather than ``$.spec.replicatedJobs[0].splitPolicy``).
FORM_ANNOTATION = "hyperjob.io/form"

ChildFailurePolicy = Literal["FailHyperJob", "RestartHyperJob", "RePlaceChild"]


class ClusterReplicas(Spec, frozen=True, kw_only=True):
    name: str
    replicas: NonNegative


class SplitPolicy(Spec, frozen=True, kw_only=True):
    mode: Literal["static", "auto"] | None = None
    strategy: Literal["ByCluster"] | None = None
    accelerators: NonNegative | None = None
    accelerator_type: str = ""
    clusters: list[ClusterReplicas] = []
    weights: dict[str, NonNegative] = {}
    granularity: Positive = 1
    # Extension: with ``mode: auto``, ``cost`` chooses among the plans that fit the one whose whole
    # job costs least by the clusters' declared prices (docs/api-reference.md).
    prefer: Literal["cost"] | None = None


class LabelSelectorRequirement(Spec, frozen=True, kw_only=True):
    """Kubernetes' ``metav1.LabelSelectorRequirement``, over a cluster's labels."""

    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = []


class LabelSelector(Spec, frozen=True, kw_only=True):
    """Kubernetes' ``metav1.LabelSelector``: every ``matchLabels`` pair and every expression holds."""

    match_labels: dict[str, str] = {}
    match_expressions: list[LabelSelectorRequirement] = []


class ClusterTerm(Spec, frozen=True, kw_only=True):
    """The clusters a preferred term favours: named in ``clusterNames`` (any, when empty) and whose
    labels match ``labelSelector`` (any, when absent)."""

    cluster_names: list[str] = []
    label_selector: LabelSelector | None = None


class PreferredClusterTerm(Spec, frozen=True, kw_only=True):
    """Kubernetes' ``PreferredSchedulingTerm`` over clusters: a cluster's preference is the sum of
    the ``weight`` (1-100) of every term whose ``preference`` it matches; more is chosen first,
    among the clusters where the job fits."""

    weight: int
    preference: ClusterTerm


SpreadField = Literal["cluster", "region", "zone", "provider"]


class SpreadConstraint(Spec, frozen=True, kw_only=True):
    """Karmada's ``SpreadConstraint``: the clusters of one replicated job span at least
    ``minGroups`` and at most ``maxGroups`` (unbounded when absent) distinct values of the cluster
    label ``spreadByLabel``, or of ``spreadByField`` (``cluster``: the cluster's name; ``region``,
    ``zone``, ``provider``: the label of that name). Exactly one of the two is given; a cluster
    without the label is not eligible."""

    spread_by_field: SpreadField | None = None
    spread_by_label: str = ""
    min_groups: int = 1
    max_groups: int | None = None


class ClusterAffinity(Spec, frozen=True, kw_only=True):
    """Karmada's ``ClusterAffinity``: the clusters a replicated job may use are those named in
    ``clusterNames`` (any, when empty), not in ``exclude``, whose labels match ``labelSelector``.
    Extensions in the same object: ``preferred`` terms with weights (soft: the order among the
    clusters that fit) and Karmada's ``spreadConstraints`` (hard: how many label values the
    chosen clusters span)."""

    cluster_names: list[str] = []
    exclude: list[str] = []
    label_selector: LabelSelector | None = None
    preferred: list[PreferredClusterTerm] = []
    spread_constraints: list[SpreadConstraint] = []


class ReplicatedJob(Spec, frozen=True, kw_only=True):
    name: str
    template_spec: JobSpec
    replicas: NonNegative = 1
    cluster_names: list[str] = []
    split_policy: SplitPolicy | None = None
    # Extension: labels and annotations every child Job carries (the conceptual form's template
    # ``metadata`` lands here, so nothing the user wrote on the template Job is lost).
    template_metadata: PodTemplateMeta | None = None
    # Extension: Karmada's cluster choice as a policy (the cluster-selector annotation still works).
    cluster_affinity: ClusterAffinity | None = None


class Dispatch(Spec, frozen=True, kw_only=True):
    """Kueue MultiKueue's dispatch strategies, for the clusters a HyperJob's children may go to.

    ``AllAtOnce`` (the default): every eligible cluster at once. ``Incremental``: only the best
    ``initialClusters`` (placement's order: preferred weights, data sets held, then room), and
    ``widenBy`` more each ``widenAfter`` (a duration) the HyperJob has waited since it was
    submitted, until every eligible cluster is tried."""

    strategy: Literal["AllAtOnce", "Incremental"] = "AllAtOnce"
    initial_clusters: Positive = 1
    widen_by: Positive = 1
    widen_after: str = "60s"


class _GangSpec(Spec, frozen=True, kw_only=True):
    """What both forms say about the HyperJob as a whole, besides its jobs."""

    min_available: NonNegative | None = None
    max_domains: Positive | None = None
    plugins: dict[str, list[str]] = {}
    child_failure_policy: ChildFailurePolicy = "FailHyperJob"
    # Extension: the data sets the job reads; among the clusters where it fits, placement prefers
    # those that hold more of them (a cluster declares its ``dataSets``; docs/api-reference.md).
    data_sets: list[str] = []
    # Extension: Kueue MultiKueue's dispatch strategies (``Dispatch``).
    dispatch: Dispatch = Dispatch()


class HyperJobSpec(_GangSpec, frozen=True, kw_only=True):
    replicated_jobs: list[ReplicatedJob]


SpecT = TypeVar("SpecT", bound=_GangSpec)


class _HyperJobForm(Spec, Generic[SpecT], frozen=True, kw_only=True):
    """What both forms are: a namespaced ``HyperJob`` whose ``spec`` is the form's. Each form
    narrows ``api_version`` to its own (the field keeps its place, so the wire order holds)."""

    api_version: str
    kind: Literal["HyperJob"] = "HyperJob"
    metadata: ObjectMeta
    spec: SpecT


class HyperJob(_HyperJobForm[HyperJobSpec], frozen=True, kw_only=True):
    """Upstream form."""

    api_version: Literal["training.volcano.sh/v1alpha1"] = TRAINING_API_VERSION


class JobTemplate(Spec, frozen=True, kw_only=True):
    api_version: Literal["batch.volcano.sh/v1alpha1"] = CONCEPT_API_VERSION
    kind: Literal["Job"] = "Job"
    metadata: PodTemplateMeta = PodTemplateMeta()
    spec: JobSpec


class TemplatedHyperJobSpec(_GangSpec, frozen=True, kw_only=True):
    template: JobTemplate
    split_policy: SplitPolicy | None = None
    cluster_names: list[str] = []
    cluster_affinity: ClusterAffinity | None = None


class TemplatedHyperJob(_HyperJobForm[TemplatedHyperJobSpec], frozen=True, kw_only=True):
    """Conceptual form."""

    api_version: Literal["batch.volcano.sh/v1alpha1"] = CONCEPT_API_VERSION


def normalize(hyperjob: HyperJob | TemplatedHyperJob) -> HyperJob:
    """Return the upstream form; the conceptual form becomes one replicated job named ``job``.

    ``strategy: ByCluster`` is explicit per-cluster counts; its clusters become the eligible set.
    """
    if isinstance(hyperjob, HyperJob):
        return hyperjob
    spec = hyperjob.spec
    split = spec.split_policy
    cluster_names = list(spec.cluster_names) or [c.name for c in (split.clusters if split else [])]
    replicated = ReplicatedJob(
        name=CONCEPT_REPLICATED_JOB,
        template_spec=spec.template.spec,
        replicas=1,
        cluster_names=cluster_names,
        split_policy=split,
        cluster_affinity=spec.cluster_affinity,
        template_metadata=spec.template.metadata if spec.template.metadata != PodTemplateMeta() else None,
    )
    metadata = msgspec.structs.replace(
        hyperjob.metadata, annotations={**hyperjob.metadata.annotations, FORM_ANNOTATION: "conceptual"}
    )
    return HyperJob(
        metadata=metadata,
        spec=HyperJobSpec(
            replicated_jobs=[replicated],
            **{field: getattr(spec, field) for field in _GangSpec.__struct_fields__},
        ),
    )


def is_conceptual(hyperjob: HyperJob) -> bool:
    return hyperjob.metadata.annotations.get(FORM_ANNOTATION) == "conceptual"


def user_path(hyperjob: HyperJob, path: str) -> str:
    """Map a field path in the normalized form back to the form the user wrote."""
    if not is_conceptual(hyperjob):
        return path
    path = path.replace("$.spec.replicatedJobs[0].templateSpec", "$.spec.template.spec")
    path = path.replace("$.spec.replicatedJobs[0].templateMetadata", "$.spec.template.metadata")
    return path.replace("$.spec.replicatedJobs[0].", "$.spec.")


def template_replicas(spec: JobSpec) -> int:
    """Total pod replicas of a job template (all tasks)."""
    return sum(task.replicas for task in spec.tasks)
