"""The part of the Kubernetes Pod API that batch jobs use.

Fields the scheduler and node agents read are typed; other common Pod fields (volumes, security
context, ...) are accepted as opaque maps so real manifests load, and passed through unchanged.
"""

from __future__ import annotations

from typing import Literal

from .base import NonNegative, Opaque, QuantityMap, RawDocument, Spec

DRA_REFUSED = (
    "dynamic resource allocation is not supported: the devices a ResourceClaim names are decided by "
    "a DRA driver the scheduler cannot see; request the devices as extended resources (e.g. "
    "nvidia.com/gpu: 1) instead"
)


class ResourceRequirements(Spec, frozen=True, kw_only=True):
    requests: QuantityMap = {}
    limits: QuantityMap = {}
    claims: list[Opaque] = []

    def __post_init__(self) -> None:
        if self.claims:
            raise ValueError(f"claims: {DRA_REFUSED}")


class EnvVar(Spec, frozen=True, kw_only=True):
    name: str
    value: str = ""
    value_from: Opaque | None = None


class ContainerPort(Spec, frozen=True, kw_only=True):
    container_port: int
    name: str = ""
    protocol: str = "TCP"
    host_port: int | None = None


class Container(Spec, frozen=True, kw_only=True):
    name: str
    image: str = ""
    command: list[str] = []
    args: list[str] = []
    env: list[EnvVar] = []
    env_from: list[Opaque] = []
    resources: ResourceRequirements = ResourceRequirements()
    ports: list[ContainerPort] = []
    working_dir: str = ""
    volume_mounts: list[Opaque] = []
    image_pull_policy: str = ""
    security_context: Opaque | None = None
    liveness_probe: Opaque | None = None
    readiness_probe: Opaque | None = None
    startup_probe: Opaque | None = None
    lifecycle: Opaque | None = None
    stdin: bool = False
    tty: bool = False


class NodeSelectorRequirement(Spec, frozen=True, kw_only=True):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: list[str] = []


class NodeSelectorTerm(Spec, frozen=True, kw_only=True):
    match_expressions: list[NodeSelectorRequirement] = []
    match_fields: list[NodeSelectorRequirement] = []


class NodeSelector(Spec, frozen=True, kw_only=True):
    node_selector_terms: list[NodeSelectorTerm]


class NodeAffinity(Spec, frozen=True, kw_only=True):
    required_during_scheduling_ignored_during_execution: NodeSelector | None = None
    preferred_during_scheduling_ignored_during_execution: list[Opaque] = []


class Affinity(Spec, frozen=True, kw_only=True):
    node_affinity: NodeAffinity | None = None
    pod_affinity: Opaque | None = None
    pod_anti_affinity: Opaque | None = None


class Toleration(Spec, frozen=True, kw_only=True):
    key: str = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str = ""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""
    toleration_seconds: int | None = None


class Taint(Spec, frozen=True, kw_only=True):
    key: str
    value: str = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]


HOSTNAME_LABEL = "kubernetes.io/hostname"
OS_LABEL = "kubernetes.io/os"
ARCH_LABEL = "kubernetes.io/arch"


def well_known_node_labels(node: str, os: str = "linux", arch: str = "amd64") -> dict[str, str]:
    """The labels the kubelet puts on every node, which manifests select on (``kubernetes.io/os: linux``)."""
    return {HOSTNAME_LABEL: node, OS_LABEL: os, ARCH_LABEL: arch}


class PodSpec(Spec, frozen=True, kw_only=True):
    containers: list[Container]
    init_containers: list[Container] = []
    restart_policy: Literal["Always", "OnFailure", "Never"] = "Always"
    node_selector: dict[str, str] = {}
    node_name: str = ""
    affinity: Affinity | None = None
    tolerations: list[Toleration] = []
    priority_class_name: str = ""
    priority: int | None = None
    preemption_policy: Literal["PreemptLowerPriority", "Never"] | None = None
    hostname: str = ""
    subdomain: str = ""
    scheduler_name: str = ""
    service_account_name: str = ""
    termination_grace_period_seconds: NonNegative | None = None
    volumes: list[Opaque] = []
    security_context: Opaque | None = None
    image_pull_secrets: list[Opaque] = []
    host_network: bool = False
    dns_policy: str = ""
    scheduling_gates: list[Opaque] = []
    resource_claims: list[Opaque] = []

    def __post_init__(self) -> None:
        # Refused by name rather than as an unknown field: the CRD accepts it, we cannot honour it.
        if self.resource_claims:
            raise ValueError(f"resourceClaims: {DRA_REFUSED}")


class PodTemplateMeta(Spec, frozen=True, kw_only=True):
    name: str = ""
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}


class PodTemplateSpec(Spec, frozen=True, kw_only=True):
    metadata: PodTemplateMeta = PodTemplateMeta()
    spec: PodSpec


def with_default_requests(document: RawDocument) -> RawDocument:
    """A copy of a raw manifest in which every container's ``requests`` default to its ``limits``.

    Kubernetes' defaulting rule for every pod of every kind: a resource given only a limit requests
    that limit (GPUs are usually written this way). Applied to the raw document before it is decoded,
    so it covers every place a pod template can appear; data of the wrong shape is left for the
    decoder to reject with its field path.
    """
    return _mapping_with_default_requests(document)


def _with_default_requests(data: object) -> object:
    if isinstance(data, list):
        return [_with_default_requests(item) for item in data]
    if isinstance(data, dict):
        return _mapping_with_default_requests(data)
    return data


def _mapping_with_default_requests(data: RawDocument) -> RawDocument:
    out = {key: _with_default_requests(value) for key, value in data.items()}
    for key in ("containers", "initContainers"):
        containers = out.get(key)
        if isinstance(containers, list):
            out[key] = [_container_with_default_requests(c) for c in containers]
    return out


def _container_with_default_requests(container: object) -> object:
    if not isinstance(container, dict):
        return container
    resources = container.get("resources")
    if not isinstance(resources, dict) or not isinstance(resources.get("limits"), dict):
        return container
    requests = resources.get("requests", {})
    if not isinstance(requests, dict):
        return container
    return {**container, "resources": {**resources, "requests": {**resources["limits"], **requests}}}
