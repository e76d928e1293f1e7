"""Volcano JobFlow and JobTemplate (``flow.volcano.sh/v1alpha1``): a DAG of jobs made from templates.

Shapes and checks follow Volcano (volcano-sh/volcano ed72c7c81, ``apis/flow/v1alpha1`` and
``pkg/webhooks/admission/jobflows/validate``): flow names are unique, every ``dependsOn.targets``
names a flow of the same JobFlow, and the dependencies form a DAG. ``dependsOn.probe`` (HTTP, TCP
and task-status probes) and ``patch`` are refused by name: Volcano's controller starts a flow when
every target job is Completed and reads neither. The progression itself is ``jobcore.jobflow``.

Not yet wired: ``api.decode`` does not list these kinds (``api.manifest.KINDS``), and no service
runs a JobFlow; see ``jobcore.jobflow``.
"""

from __future__ import annotations

from typing import Literal

from .base import ObjectMeta, Opaque, Spec
from .job import JobSpec, _cycle

FLOW_API_VERSION = "flow.volcano.sh/v1alpha1"


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
