"""Volcano JobFlow and JobTemplate (``flow.volcano.sh/v1alpha1``): a DAG of jobs made from templates.

Shapes and checks follow Volcano (volcano-sh/volcano ed72c7c81, ``apis/flow/v1alpha1`` and
``pkg/webhooks/admission/jobflows/validate``): flow names are unique, every ``dependsOn.targets``
names a flow of the same JobFlow, and the dependencies form a DAG. ``dependsOn.probe`` (HTTP, TCP
and task-status probes) and ``patch`` are refused by name: Volcano's controller starts a flow when
every target job is Completed and reads neither. The progression itself is ``jobcore.jobflow``.

``api.decode`` reads these kinds with CronJob's (``WORKFLOW_KINDS``); the workflow-controller
service answers their applies and deletes and runs them (the splitter leaves them to it).
"""

from __future__ import annotations

from typing import Final, Literal

from .base import ObjectMeta, Opaque, Spec
from .errors import ManifestError
from .hyperjob import TRAINING_API_VERSION, HyperJob, HyperJobSpec
from .job import CronJob, JobSpec, _cycle
from .validation import check_hyperjob, check_job_spec, check_sim_annotations

FLOW_API_VERSION: Final = "flow.volcano.sh/v1alpha1"
WORKFLOW_KINDS = ("CronJob", "JobFlow", "JobTemplate", "HyperJobTemplate")
"""The kinds that make Volcano Jobs (the workflow-controller's); every other kind is the splitter's."""


class FlowDependsOn(Spec, frozen=True, kw_only=True):
    targets: list[str] = []
    probe: Opaque | None = None

    def __post_init__(self) -> None:
        if self.probe is not None:
            raise ValueError(
                "probe: not supported (Volcano's JobFlow controller starts a flow once every target job "
                "is Completed and does not evaluate probes either)"
            )


class Flow(Spec, frozen=True, kw_only=True):
    name: str
    depends_on: FlowDependsOn | None = None
    patch: Opaque | None = None

    def __post_init__(self) -> None:
        if self.patch is not None:
            raise ValueError("patch: not supported; write the change into the JobTemplate")


class JobFlowSpec(Spec, frozen=True, kw_only=True):
    flows: list[Flow] = []
    job_retain_policy: Literal["retain", "delete"] = "retain"

    def __post_init__(self) -> None:
        names = [flow.name for flow in self.flows]
        graph: dict[str, list[str]] = {}
        for i, flow in enumerate(self.flows):
            if flow.name in names[:i]:
                raise ValueError(f"flows[{i}].name: duplicate flow {flow.name!r}")
            targets = flow.depends_on.targets if flow.depends_on else []
            for j, target in enumerate(targets):
                if target not in names:
                    raise ValueError(f"flows[{i}].dependsOn.targets[{j}]: {target!r} is not a flow of this JobFlow")
            graph[flow.name] = list(targets)
        cycle = _cycle(graph)
        if cycle:
            raise ValueError(f"flows: dependsOn does not form a directed acyclic graph ({' -> '.join(cycle)})")


class JobFlow(Spec, frozen=True, kw_only=True):
    api_version: Literal["flow.volcano.sh/v1alpha1"] = FLOW_API_VERSION
    kind: Literal["JobFlow"] = "JobFlow"
    metadata: ObjectMeta
    spec: JobFlowSpec


class JobTemplate(Spec, frozen=True, kw_only=True):
    """A Volcano Job spec kept under a name; a JobFlow's flow named N creates the Job ``<jobflow>-N`` from it."""

    api_version: Literal["flow.volcano.sh/v1alpha1"] = FLOW_API_VERSION
    kind: Literal["JobTemplate"] = "JobTemplate"
    metadata: ObjectMeta
    spec: JobSpec


class HyperJobTemplate(Spec, frozen=True, kw_only=True):
    """A HyperJob spec kept under a name (HyperJob's extension of Volcano's JobFlow): a JobFlow's flow
    named N whose template is this one makes the HyperJob ``<jobflow>-N``, split across clusters like
    any HyperJob; the flow's dependents start once that HyperJob is Completed. A JobTemplate and a
    HyperJobTemplate share one namespace of names, as the flow refers to either by name alone."""

    api_version: Literal["training.volcano.sh/v1alpha1"] = TRAINING_API_VERSION
    kind: Literal["HyperJobTemplate"] = "HyperJobTemplate"
    metadata: ObjectMeta
    spec: HyperJobSpec

    def as_hyperjob(self, name: str) -> HyperJob:
        return HyperJob(metadata=ObjectMeta(name=name, namespace=self.metadata.namespace), spec=self.spec)


# A CronJob's jobs are ``<cronjob>-<minutes since the epoch>``: Volcano's webhook keeps 11 characters for the suffix.
CRONJOB_NAME_MAX = 52


def check_workflow(obj: CronJob | JobFlow | JobTemplate | HyperJobTemplate) -> None:
    """Volcano's webhook checks, and the Job a CronJob or JobTemplate makes passes a Job's admission
    checks at apply (Volcano would accept it and fail each run)."""
    if isinstance(obj, CronJob):
        if len(obj.metadata.name) > CRONJOB_NAME_MAX:
            raise ManifestError(
                "$.metadata.name",
                f"a CronJob's name is at most {CRONJOB_NAME_MAX} characters (its jobs add an 11-character suffix)",
            )
        template = obj.spec.job_template
        annotations = template.metadata.get("annotations") or {}
        if isinstance(annotations, dict):
            check_sim_annotations(annotations, "$.spec.jobTemplate.metadata")
        check_job_spec(template.spec, "$.spec.jobTemplate.spec")
    elif isinstance(obj, JobTemplate):
        check_sim_annotations(obj.metadata.annotations, "$.metadata")
        check_job_spec(obj.spec, "$.spec")
    elif isinstance(obj, HyperJobTemplate):
        check_hyperjob(obj.as_hyperjob(obj.metadata.name))
