"""Validation as Kubernetes and the splitter need it: an extended resource is whole (a device
plugin hands out whole devices), and a split that gives no cluster a replica is refused at apply
(it sat Admitted with no children)."""

import pytest

from hyperjob import api
from hyperjob.api import ManifestError

CONTAINERS = "$.spec.tasks[0].template.spec.containers[0].resources"


def job(resources: dict[str, dict[str, str]]) -> dict[str, object]:
    container = {"name": "c", "image": "busybox", "resources": resources}
    task = {"name": "m", "replicas": 1, "template": {"spec": {"containers": [container]}}}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {"tasks": [task]},
    }


@pytest.mark.parametrize(
    ("resources", "path"),
    [
        ({"limits": {"nvidia.com/gpu": "0.5"}}, f"{CONTAINERS}.limits.nvidia.com/gpu"),
        ({"requests": {"nvidia.com/gpu": "500m"}}, f"{CONTAINERS}.requests.nvidia.com/gpu"),
        ({"requests": {"example.com/fpga": "1.5"}}, f"{CONTAINERS}.requests.example.com/fpga"),
    ],
    ids=["gpu-limit-half", "gpu-request-millis", "any-extended-resource"],
)
def test_an_extended_resource_that_is_not_whole_is_refused_naming_the_field(resources, path) -> None:
    with pytest.raises(ManifestError) as caught:
        api.decode(job(resources))
    assert caught.value.path == path and "must be an integer" in caught.value.message


@pytest.mark.parametrize(
    "resources",
    [
        {"limits": {"nvidia.com/gpu": "2"}},
        {"requests": {"cpu": "0.5", "memory": "1.5Gi", "nvidia.com/gpu": "1"}},
        {"requests": {"kubernetes.io/something": "0.5"}},
    ],
    ids=["whole-gpus", "fractional-cpu-and-memory", "kubernetes-io-is-native"],
)
def test_whole_extended_resources_and_fractional_native_ones_are_accepted(resources) -> None:
    assert isinstance(api.decode(job(resources)), api.Job)


def hyperjob(split: dict[str, object], replicas: int) -> dict[str, object]:
    task = {"name": "m", "replicas": replicas, "template": {"spec": {"containers": [{"name": "c", "image": "b"}]}}}
    spec = {"minAvailable": 0, "tasks": [task]}
    replicated = {"name": "w", "templateSpec": spec, "splitPolicy": split}
    return {
        "apiVersion": "training.volcano.sh/v1alpha1",
        "kind": "HyperJob",
        "metadata": {"name": "x"},
        "spec": {"replicatedJobs": [replicated]},
    }


@pytest.mark.parametrize(
    ("split", "replicas", "path", "words"),
    [
        ({"clusters": [{"name": "a", "replicas": 0}, {"name": "b", "replicas": 0}]}, 0, "clusters", "replicas are 0"),
        ({"weights": {"a": 0, "b": 0}}, 2, "weights", "every weight is 0"),
    ],
    ids=["clusters-all-zero", "weights-all-zero"],
)
def test_a_split_that_gives_no_cluster_a_replica_is_refused_naming_the_field(split, replicas, path, words) -> None:
    with pytest.raises(ManifestError) as caught:
        api.decode(hyperjob(split, replicas))
    assert caught.value.path == f"$.spec.replicatedJobs[0].splitPolicy.{path}" and words in caught.value.message


@pytest.mark.parametrize(
    ("image", "given", "policy"),
    [
        ("busybox", "", "Always"),
        ("busybox:latest", "", "Always"),
        ("registry.local:5000/team/trainer", "", "Always"),  # the port is no tag
        ("registry.local:5000/team/trainer:1.2", "", "IfNotPresent"),
        ("trainer@sha256:" + "a" * 64, "", "IfNotPresent"),
        ("busybox:latest", "Never", "Never"),
        ("busybox:1.36", "Always", "Always"),
    ],
)
def test_the_pull_policy_defaults_as_kubernetes_does(image: str, given: str, policy: str) -> None:
    assert api.pull_policy(image, given) == policy  # type: ignore[arg-type]


def test_an_unknown_pull_policy_is_refused_naming_the_field() -> None:
    manifest = job({})
    manifest["spec"]["tasks"][0]["template"]["spec"]["containers"][0]["imagePullPolicy"] = "Sometimes"  # type: ignore[index]
    with pytest.raises(ManifestError) as caught:
        api.decode(manifest)
    assert caught.value.path == "$.spec.tasks[0].template.spec.containers[0]"
    assert caught.value.message.startswith("imagePullPolicy: Unsupported value: 'Sometimes'"), caught.value.message
