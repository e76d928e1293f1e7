"""The part of the Kubernetes Pod API that batch jobs use.

Fields the scheduler and node agents read are typed; other common Pod fields (security context,
probes, ...) are accepted as opaque maps so real manifests load, and passed through unchanged.
Volumes are typed by name and mount: a container-mode node runs ``hostPath`` and ``emptyDir``; the
other sources are carried as written (a node that cannot mount them refuses the pod).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from .base import Name, NonNegative, Opaque, Quantity, QuantityMap, RawDocument, Spec

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


class VolumeMount(Spec, frozen=True, kw_only=True):
    name: str
    mount_path: Annotated[str, msgspec.Meta(min_length=1)]
    read_only: bool = False
    recursive_read_only: str = ""
    sub_path: str = ""
    sub_path_expr: str = ""
    mount_propagation: str = ""


class HostPathVolumeSource(Spec, frozen=True, kw_only=True):
    path: Annotated[str, msgspec.Meta(pattern=r"^/")]  # a directory or file of the node, absolute
    type: str = ""


class EmptyDirVolumeSource(Spec, frozen=True, kw_only=True):
    medium: Literal["", "Memory"] = ""
    size_limit: Quantity | None = None


class Volume(Spec, frozen=True, kw_only=True):
    """A pod volume: its name and one source (none: an ``emptyDir``, as Kubernetes defaults it).

    ``hostPath`` and ``emptyDir`` are typed (a container-mode node runs them); Kubernetes' other
    sources are accepted as written and carried unchanged, for nodes that could mount them."""

    name: Name
    host_path: HostPathVolumeSource | None = None
    empty_dir: EmptyDirVolumeSource | None = None
    persistent_volume_claim: Opaque | None = None
    config_map: Opaque | None = None
    secret: Opaque | None = None
    projected: Opaque | None = None
    downward_api: Opaque | None = msgspec.field(default=None, name="downwardAPI")
    ephemeral: Opaque | None = None
    csi: Opaque | None = None
    image: Opaque | None = None
    nfs: Opaque | None = None
    iscsi: Opaque | None = None
    fc: Opaque | None = None
    rbd: Opaque | None = None
    cephfs: Opaque | None = None
    cinder: Opaque | None = None
    glusterfs: Opaque | None = None
    flex_volume: Opaque | None = None
    flocker: Opaque | None = None
    git_repo: Opaque | None = None
    gce_persistent_disk: Opaque | None = None
    aws_elastic_block_store: Opaque | None = None
    azure_disk: Opaque | None = None
    azure_file: Opaque | None = None
    vsphere_volume: Opaque | None = None
    quobyte: Opaque | None = None
    photon_persistent_disk: Opaque | None = None
    portworx_volume: Opaque | None = None
    scale_io: Opaque | None = msgspec.field(default=None, name="scaleIO")
    storageos: Opaque | None = None

    def __post_init__(self) -> None:
        given = self.sources()
        if len(given) > 1:
            raise ValueError(f"a volume has one source, got {', '.join(given)}")

    def sources(self) -> list[str]:
        """The sources given, as Kubernetes spells them (``hostPath``)."""
        names = zip(self.__struct_fields__, self.__struct_encode_fields__, strict=True)
        return [wire for field, wire in names if field != "name" and getattr(self, field) is not None]

    def source(self) -> str:
        """The volume's one source (``emptyDir`` where none is given)."""
        return next(iter(self.sources()), "emptyDir")


PullPolicy = Literal["Always", "IfNotPresent", "Never"]
PULL_POLICIES: dict[str, PullPolicy] = {"Always": "Always", "IfNotPresent": "IfNotPresent", "Never": "Never"}


def pull_policy(image: str, policy: str = "") -> PullPolicy:
    """A container's ``imagePullPolicy`` as Kubernetes defaults it: the one given, else
    ``Always`` for an image tagged ``latest`` or not tagged at all, else ``IfNotPresent`` (also
    for an image named by digest)."""
    if policy:
        return PULL_POLICIES[policy]
    if "@" in image:
        return "IfNotPresent"
    tag = image.rsplit("/", 1)[-1].partition(":")[2]
    return "Always" if tag in ("", "latest") else "IfNotPresent"


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
    volume_mounts: list[VolumeMount] = []
    image_pull_policy: str = ""  # a string in the read model (ADR 0012): checked below
    security_context: Opaque | None = None
    liveness_probe: Opaque | None = None
    readiness_probe: Opaque | None = None
    startup_probe: Opaque | None = None
    lifecycle: Opaque | None = None
    stdin: bool = False
    tty: bool = False

    def __post_init__(self) -> None:
        if self.image_pull_policy and self.image_pull_policy not in PULL_POLICIES:
            raise ValueError(
                f"imagePullPolicy: Unsupported value: {self.image_pull_policy!r}: supported values: "
                '"Always", "IfNotPresent", "Never"'
            )


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
    volumes: list[Volume] = []
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
        check_volume_mounts(self)


def check_volume_mounts(spec: PodSpec) -> None:
    """Every volume is named once and every container's mount names one of them, as Kubernetes'
    validation says (a mount of no volume would run without the data it expects)."""
    names = [volume.name for volume in spec.volumes]
    for index, name in enumerate(names):
        if name in names[:index]:
            raise ValueError(f"volumes[{index}].name: {name!r} names two volumes")
    for key, containers in (("containers", spec.containers), ("initContainers", spec.init_containers)):
        for i, container in enumerate(containers):
            for j, mount in enumerate(container.volume_mounts):
                if mount.name not in names:
                    raise ValueError(f"{key}[{i}].volumeMounts[{j}].name: no volume named {mount.name!r} in volumes")


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
