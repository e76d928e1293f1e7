"""A pod's ``volumes`` (``hostPath``, ``emptyDir``) and its main container's ``volumeMounts``
(issue 27): typed and checked by the API (a mount naming no volume is refused, naming the field),
carried by jobcore into what starts the pod, and run as podman bind mounts (an ``emptyDir`` a
directory of the pod's own)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

from hyperjob import api, events
from hyperjob import jobcore as jc
from hyperjob.services.node_agent.containerpods import empty_dirs, mount_args, run_args

ROOT = Path("/pods/c1/p/volumes/u-1")


def job(volumes: list[dict[str, Any]], mounts: list[dict[str, Any]]) -> dict[str, Any]:
    container = {"name": "main", "image": "localhost/i:1", "volumeMounts": mounts}
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": "vol"},
        "spec": {
            "tasks": [
                {"name": "w", "replicas": 1, "template": {"spec": {"volumes": volumes, "containers": [container]}}}
            ]
        },
    }


DATA = {"name": "data", "hostPath": {"path": "/srv/data"}}
SCRATCH = {"name": "scratch", "emptyDir": {}}
MOUNTS = [{"name": "data", "mountPath": "/data", "readOnly": True}, {"name": "scratch", "mountPath": "/scratch"}]


def mounts_of(document: dict[str, Any]) -> list[events.PodMount]:
    decoded = api.decode(document)
    assert isinstance(decoded, api.Job)
    record = jc.admit(decoded, {"default": "Open"}, 0.0)
    record, _ = jc.decide(record, jc.PodGroupAdmitted(job_version=record.version), 0.0)  # its pods are made
    (pod,) = record.pods.values()
    start = events.PodStart(pod=pod.name, uid=pod.uid, node="n", task="w", mounts=pod.run.mounts)
    return msgspec.json.decode(msgspec.json.encode(start), type=events.PodStart).mounts  # as the agent reads it


def test_host_path_and_empty_dir_mounts_become_podman_bind_mounts() -> None:
    mounts = mounts_of(job([DATA, SCRATCH], MOUNTS))

    assert mounts == [
        events.PodMount(volume="data", mount_path="/data", source="hostPath", host_path="/srv/data", read_only=True),
        events.PodMount(volume="scratch", mount_path="/scratch", source="emptyDir"),
    ]
    assert mount_args(mounts, ROOT) == ["--volume", "/srv/data:/data:ro", "--volume", f"{ROOT}/scratch:/scratch"]


def test_mounts_reach_podman_run() -> None:
    msg = events.PodStart(pod="p", uid="u-1", node="n", task="w", image="i", mounts=mounts_of(job([DATA], MOUNTS[:1])))
    args = run_args(
        msg,
        agent="a",
        env={},
        files_root=ROOT.parent,
        log_path=ROOT / "log",
        grace=1,
        nvml_gpus=False,
        volumes_root=ROOT,
    )
    assert "/srv/data:/data:ro" in args and args.index("/srv/data:/data:ro") < args.index("i")


def test_a_volume_without_a_source_is_an_empty_dir_as_kubernetes_defaults_it() -> None:
    assert mounts_of(job([{"name": "tmp"}], [{"name": "tmp", "mountPath": "/tmp"}]))[0].source == "emptyDir"


@pytest.mark.parametrize(
    ("volumes", "mounts", "field"),
    [
        ([DATA], [{"name": "nope", "mountPath": "/x"}], "containers[0].volumeMounts[0].name: no volume named 'nope'"),
        ([DATA, {**DATA, "hostPath": {"path": "/other"}}], [], "volumes[1].name: 'data' names two volumes"),
        ([{"name": "two", "hostPath": {"path": "/a"}, "emptyDir": {}}], [], "volumes[0]: a volume has one source"),
        ([{"name": "rel", "hostPath": {"path": "srv"}}], [], "volumes[0].hostPath.path"),
        ([DATA], [{"name": "data"}], "containers[0].volumeMounts[0]: Object missing required field `mountPath`"),
    ],
    ids=["mount-of-no-volume", "volume-named-twice", "two-sources", "relative-host-path", "no-mount-path"],
)
def test_a_bad_volume_or_mount_is_refused_naming_the_field(
    volumes: list[dict[str, Any]], mounts: list[dict[str, Any]], field: str
) -> None:
    with pytest.raises(api.ManifestError, match=re.escape(field)):
        api.decode(job(volumes, mounts))


def test_other_volume_sources_load_and_round_trip_unchanged() -> None:
    volumes = [
        {"name": "claim", "persistentVolumeClaim": {"claimName": "c"}},
        {"name": "d", "downwardAPI": {"items": []}},
    ]
    decoded = api.decode(job(volumes, []))
    assert api.encode(decoded)["spec"]["tasks"][0]["template"]["spec"]["volumes"] == volumes


@pytest.mark.parametrize(
    ("mount", "field"),
    [
        (events.PodMount(volume="c", mount_path="/c", source="persistentVolumeClaim"), "volumeMounts[0]: volume 'c'"),
        (events.PodMount(volume="s", mount_path="rel"), "volumeMounts[0].mountPath:"),
        (events.PodMount(volume="h", mount_path="/h", source="hostPath", host_path="/a:b"), "volumeMounts[0].hostPath"),
        (events.PodMount(volume="s", mount_path="/s", sub_path="../up"), "volumeMounts[0].subPath:"),
        (events.PodMount(volume="s", mount_path="/s", sub_path="/abs"), "volumeMounts[0].subPath:"),
    ],
    ids=["unsupported-source", "relative-mount-path", "colon-in-host-path", "sub-path-leaving", "sub-path-absolute"],
)
def test_a_mount_the_node_cannot_make_is_refused_naming_the_field(mount: events.PodMount, field: str) -> None:
    with pytest.raises(ValueError, match="^" + re.escape(field)):
        mount_args([mount], ROOT)


def test_a_sub_path_mounts_a_path_inside_the_volume() -> None:
    document = job(
        [DATA, SCRATCH], [{"name": "data", "mountPath": "/d", "subPath": "set-1"}, {**MOUNTS[1], "subPath": "a/b"}]
    )
    mounts = mounts_of(document)
    assert mount_args(mounts, ROOT) == ["--volume", "/srv/data/set-1:/d", "--volume", f"{ROOT}/scratch/a/b:/scratch"]
    assert empty_dirs(mounts) == {"scratch/a/b"}  # made by the runner before the container starts
