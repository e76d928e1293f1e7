"""The CLI without a running system: reading -f arguments, checks before sending, one-line errors
with kubectl's exit code, local commands (version, schema, completion, up's lock and supervision)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from hyperjob.cli import jsonpath_template, manifests, up, views
from hyperjob.cli.config import UpConfig
from hyperjob.cli.main import main

QUEUE = """apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: q1}
spec: {weight: 1}
"""
JOB = """apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {name: NAME}
spec:
  tasks: [{name: w, replicas: 1, template: {spec: {containers: [{name: c, image: x}]}}}]
"""
HYPERJOB = str(Path(sys.executable).parent / "hyperjob")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HYPERJOB_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("NATS_URL", raising=False)
    monkeypatch.delenv("REDIS_URL", raising=False)
    return tmp_path / "home"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The installed command, as a user runs it (exit code and stderr exactly as they see them)."""
    return subprocess.run(
        [HYPERJOB, *args], capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})}
    )


def job(name: str) -> str:
    return JOB.replace("NAME", name)


# -- -f: several files, directories, every object reported -----------------------------------------


def test_apply_reads_every_file_and_directory_given(tmp_path: Path, home: Path) -> None:
    (tmp_path / "a.yaml").write_text(QUEUE)
    (tmp_path / "b.yaml").write_text(job("one"))
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "c.yml").write_text(job("two") + "---\n" + job("three"))
    (tmp_path / "dir" / "notes.txt").write_text("not a manifest")
    args = ["-f", str(tmp_path / "a.yaml"), "-f", str(tmp_path / "b.yaml"), "-f", str(tmp_path / "dir")]
    result = CliRunner().invoke(main, ["apply", *args, "--dry-run=client"])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        "queue/q1 valid (dry run)",
        "job/one valid (dry run)",
        "job/two valid (dry run)",
        "job/three valid (dry run)",
    ]


def test_one_invalid_object_means_nothing_is_sent_and_each_error_names_object_and_field(
    tmp_path: Path, home: Path
) -> None:
    bad = job("bad").replace("replicas: 1", "replicas: -1")
    (tmp_path / "all.yaml").write_text(QUEUE + "---\n" + job("good") + "---\n" + bad)
    # No system is running: had anything been sent, the error would be about reaching it.
    result = run("apply", "-f", str(tmp_path / "all.yaml"), env={"HYPERJOB_HOME": str(home)})
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"error: {tmp_path / 'all.yaml'}: job/bad: $.spec.tasks[0].replicas:")
    assert lines[1] == "error: nothing applied: 1 of 3 objects are invalid"
    assert "Traceback" not in result.stderr


def test_the_same_object_defined_differently_twice_in_one_apply_is_an_error(tmp_path: Path, home: Path) -> None:
    (tmp_path / "a.yaml").write_text(job("twice"))
    (tmp_path / "b.yaml").write_text(job("twice").replace("replicas: 1", "replicas: 2"))
    result = CliRunner().invoke(main, ["apply", "-f", str(tmp_path / "a.yaml"), "-f", str(tmp_path / "b.yaml")])
    assert result.exit_code == 1
    assert "job/twice is also defined, differently, in" in result.output


def test_a_missing_file_is_one_line(home: Path) -> None:
    result = run("apply", "-f", "/no/such/file.yaml")
    assert (result.returncode, result.stderr) == (1, 'error: the path "/no/such/file.yaml" does not exist\n')


# -- size limits, checked before parsing or sending ------------------------------------------------


def test_a_file_over_the_limit_is_refused_with_its_size_before_it_is_parsed(tmp_path: Path, home: Path) -> None:
    path = tmp_path / "huge.yaml"
    path.write_text(job("huge").replace("{name: huge}", "{name: huge, annotations: {a: '" + "x" * (10 << 20) + "'}}"))
    started = time.monotonic()
    result = run("apply", "-f", str(path))
    assert result.returncode == 1
    assert result.stderr == f"error: {path}: the file is 10.0 MiB; the limit is 8.0 MiB\n"
    assert time.monotonic() - started < 30  # refused, not parsed for minutes (a generous bound: a hang guard)


def test_an_object_over_the_message_limit_is_refused_with_its_size(tmp_path: Path, home: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text(job("big").replace("{name: big}", "{name: big, annotations: {a: '" + "x" * (3 << 20) + "'}}"))
    found = manifests.objects(str(path))
    assert found[0].error == "$: the manifest is 3.0 MiB; the limit is 1.0 MiB"


# -- what kubectl would accept or reject -----------------------------------------------------------


def test_a_kubectl_exported_object_is_accepted(tmp_path: Path, home: Path) -> None:
    exported = job("exported").replace(
        "metadata: {name: exported}",
        "metadata:\n  name: exported\n  uid: 1b2c\n  resourceVersion: '12345'\n  generation: 3\n"
        "  creationTimestamp: '2024-01-01T00:00:00Z'\n"
        "  ownerReferences: [{apiVersion: v1, kind: Foo, name: bar, uid: x}]\n"
        "  managedFields: [{manager: kubectl, operation: Update}]",
    )
    (tmp_path / "exported.yaml").write_text(exported + "status: {state: {phase: Running}}\n")
    assert manifests.objects(str(tmp_path / "exported.yaml"))[0].error == ""


@pytest.mark.parametrize(("length", "ok"), [(63, True), (64, False)])
def test_names_are_dns_labels(tmp_path: Path, home: Path, length: int, ok: bool) -> None:
    (tmp_path / "j.yaml").write_text(job("a" * length))
    error = manifests.objects(str(tmp_path / "j.yaml"))[0].error
    assert (error == "") is ok
    if not ok:
        assert error.startswith("$.metadata.name:")


def test_a_namespace_other_than_the_flag_is_refused(tmp_path: Path, home: Path) -> None:
    (tmp_path / "j.yaml").write_text(job("ns").replace("{name: ns}", "{name: ns, namespace: team-a}"))
    error = manifests.objects(str(tmp_path / "j.yaml"), namespace="team-b")[0].error
    assert error == "the namespace from the provided object 'team-a' does not match the namespace 'team-b'"
    (tmp_path / "k.yaml").write_text(job("ns2"))
    assert manifests.objects(str(tmp_path / "k.yaml"), namespace="team-b")[0].document["metadata"] == {
        "name": "ns2",
        "namespace": "team-b",
    }


# -- errors: one line, exit code 1 -----------------------------------------------------------------


def test_without_a_system_every_command_says_so_in_one_line(home: Path) -> None:
    result = run("get", "hyperjobs")
    assert result.returncode == 1
    assert result.stderr.startswith("error: no running system: start one with `hyperjob up`")
    assert len(result.stderr.splitlines()) == 1


def test_unreachable_servers_are_one_line_not_a_traceback(home: Path) -> None:
    env = {"NATS_URL": "nats://127.0.0.1:1", "REDIS_URL": "redis://127.0.0.1:1"}
    started = time.monotonic()
    result = run("get", "hyperjobs", env=env)
    assert result.returncode == 1
    assert result.stderr.startswith("error: cannot reach NATS at nats://127.0.0.1:1")
    assert len(result.stderr.splitlines()) == 1
    assert time.monotonic() - started < 30


def test_a_recorded_system_whose_up_is_gone_is_reported_as_gone(home: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    home.mkdir(parents=True)
    (home / "endpoints.json").write_text(
        json.dumps({"nats_url": "nats://127.0.0.1:1", "redis_url": "redis://127.0.0.1:1", "pid": dead.pid})
    )
    result = run("get", "hyperjobs")
    assert (result.returncode, result.stderr) == (
        1,
        f"error: no running system: `hyperjob up` (pid {dead.pid}) is gone; start it again\n",
    )


@pytest.mark.parametrize(
    "args", [["get", "nosuchkind"], ["apply"], ["get", "jobs", "-o", "toml"], ["delete", "job"], ["nosuchcommand"]]
)
def test_usage_errors_exit_1_as_kubectl(args: list[str], home: Path) -> None:
    result = run(*args)
    assert result.returncode == 1
    assert result.stderr.startswith("error: ")
    assert "Traceback" not in result.stderr


# -- local commands --------------------------------------------------------------------------------


def test_version() -> None:
    result = CliRunner().invoke(main, ["version"])
    assert result.exit_code == 0
    assert result.output.startswith("hyperjob ")
    assert "contract v2" in result.output


def test_completion_scripts_are_clicks() -> None:
    for shell in ("bash", "zsh", "fish"):
        result = CliRunner().invoke(main, ["completion", shell])
        assert result.exit_code == 0, result.output
        assert "_HYPERJOB_COMPLETE" in result.output


def test_schema_lists_and_prints_every_type_of_the_contract() -> None:
    listed = CliRunner().invoke(main, ["schema"]).output.split()
    assert {"HyperJob", "Job", "Queue", "ApplyManifest", "RequestRejected", "HyperJobStatusChanged"} <= set(listed)
    applied = json.loads(CliRunner().invoke(main, ["schema", "ApplyManifest"]).output)
    assert applied["$id"].endswith("/v2/ApplyManifest.json")
    assert applied["$defs"]["ApplyManifest"]["properties"]["type"] == {"enum": ["hj.manifest.apply.v1"]}
    hyperjob = json.loads(CliRunner().invoke(main, ["schema", "hyperjob"]).output)
    assert hyperjob["$defs"]["ObjectMeta"]["properties"]["name"]["maxLength"] == 63


def test_label_selectors() -> None:
    match = views.selector("team=a,tier!=gold,env,!debug")
    assert match({"team": "a", "env": "x"})
    assert not match({"team": "a", "env": "x", "tier": "gold"})
    assert not match({"team": "a"})
    assert not match({"team": "a", "env": "x", "debug": "1"})
    with pytest.raises(ValueError):
        views.selector("=a")


def test_kinds_by_any_name_kubectl_takes() -> None:
    assert {views.kind(n).plural for n in ("hj", "HyperJob", "hyperjobs")} == {"hyperjobs"}  # type: ignore[union-attr]
    assert views.kind("pg").plural == "podgroups"  # type: ignore[union-attr]
    assert views.kind("pc").plural == "priorityclasses"  # type: ignore[union-attr]
    assert views.kind("nope") is None


def test_wide_output_has_more_columns_for_every_kind() -> None:
    for kind in views.KINDS.values():
        narrow, _ = kind.rows([], False)
        wide, _ = kind.rows([], True)
        assert len(wide) > len(narrow), kind.plural


# -- up: one per home, supervision --------------------------------------------------------------------


def test_a_second_up_in_the_same_home_refuses(home: Path) -> None:
    first = up.HomeLock()
    first.acquire()
    try:
        with pytest.raises(up.UpError, match=f"another `hyperjob up` \\(pid {os.getpid()}\\) is running in {home}"):
            up.HomeLock().acquire()
        assert up.holder_pid() == os.getpid()
    finally:
        first.release()
    assert up.holder_pid() is None
    result = run("down")
    assert result.returncode == 0
    assert "no `hyperjob up` is running" in result.stderr


def test_a_crashed_service_is_restarted_with_back_off_and_shown(home: Path) -> None:
    (home / "logs").mkdir(parents=True)
    system = up.System(UpConfig(clusters=[]))
    system.services = [
        up.ServiceProcess("crasher", "hyperjob.no_such_module", dict(os.environ), home / "logs" / "c.log")
    ]
    system.services[0].start()
    system.services[0].proc.wait()  # type: ignore[union-attr]
    notes = system.supervise_once()
    assert notes == [f"crasher exited (1); restarting in 1s (see {home / 'logs' / 'c.log'})"]
    system.write_status(ready=False)
    shown = CliRunner().invoke(main, ["get", "services", "--no-headers"]).output.split()
    assert shown[:3] == ["crasher", "backoff", "0"]
    time.sleep(1.1)
    assert system.supervise_once() == ["crasher restarted (restart 1)"]
    system.services[0].proc.wait()  # type: ignore[union-attr]
    assert "restarting in 2s" in system.supervise_once()[0]  # the back-off doubles
    system.stop()


# -- -o jsonpath=TEMPLATE ------------------------------------------------------------------------------

LIST = {
    "kind": "List",
    "items": [
        {"metadata": {"name": "a"}, "status": {"phase": "Running", "ready": True}},
        {"metadata": {"name": "b"}, "status": {"phase": "Failed", "ready": False}},
    ],
}


@pytest.mark.parametrize(
    ("template", "printed"),
    [
        ("{.items[*].metadata.name}", "a b"),
        ('{range .items[*]}{.metadata.name}={.status.phase}{"\\n"}{end}', "a=Running\nb=Failed\n"),
        ('{.items[?(@.status.phase=="Failed")].metadata.name}', "b"),
        ("names: {.items[0].metadata.name}, {.items[1].status.ready}", "names: a, false"),
        ("{.items[0].status}", '{"phase":"Running","ready":true}'),
    ],
)
def test_jsonpath_templates_as_kubectl_prints_them(template: str, printed: str) -> None:
    assert jsonpath_template.render(template, LIST) == printed


@pytest.mark.parametrize("template", ["{range .items[*]}{.a}", "{.a}{end}", "{.a"])
def test_bad_jsonpath_templates_are_refused(template: str) -> None:
    with pytest.raises(jsonpath_template.TemplateError):
        jsonpath_template.render(template, LIST)


def test_user_add_names_a_bad_namespace_before_touching_anything(tmp_path: Path) -> None:
    env = {"HYPERJOB_HOME": str(tmp_path)}
    bad = CliRunner().invoke(main, ["user", "add", "carol", "--namespaces", "team-a,Team_B"], env=env)
    assert bad.exit_code == 1 and "--namespaces" in bad.output and "'Team_B'" in bad.output
    none = CliRunner().invoke(main, ["user", "add", "carol", "--namespaces", ","], env=env)
    assert none.exit_code == 1 and "at least one namespace" in none.output
    assert list(tmp_path.iterdir()) == []
