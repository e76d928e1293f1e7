"""The CLI as a kubectl/vcctl user drives it, against the running system: batches all-or-nothing,
every object reported, round trips through get -o yaml, namespaces, honest command results."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from .conftest import HYPERJOB, REPO, Cli

pytestmark = pytest.mark.e2e


def job(name: str, queue: str = "default", duration: str = "300s", gpus: int = 0, namespace: str = "") -> str:
    requests = f"{{cpu: '1', nvidia.com/gpu: '{gpus}'}}" if gpus else "{cpu: '1'}"
    ns = f", namespace: {namespace}" if namespace else ""
    return f"""apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: {name}, labels: {{suite: kubectl}}{ns}}}
spec:
  queue: {queue}
  minAvailable: 1
  tasks:
  - name: w
    replicas: 1
    template:
      metadata: {{annotations: {{hyperjob.io/sim-duration: {duration}}}}}
      spec: {{restartPolicy: OnFailure, containers: [{{name: c, image: x, resources: {{requests: {requests}}}}}]}}
"""


QUEUE = """apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: kubectl-q}
spec: {weight: 2}
"""


def names(cli: Cli, kind: str, *flags: str) -> set[str]:
    return {line.split("/", 1)[1] for line in cli.run("get", kind, "-o", "name", *flags).stdout.split()}


def test_a_batch_with_one_bad_reference_creates_nothing(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(job("batch-first"))
    (tmp_path / "b.yaml").write_text(job("batch-second") + "---\n" + job("batch-third", queue="no-such-queue"))
    done = cli.run("apply", "-f", str(tmp_path / "a.yaml"), "-f", str(tmp_path / "b.yaml"), check=False)
    assert done.returncode == 1
    assert f"error: {tmp_path / 'b.yaml'}: job/batch-third: $.spec.queue: queue 'no-such-queue' does not exist" in (
        done.stderr
    )
    assert not names(cli, "jobs") & {"batch-first", "batch-second", "batch-third"}


def test_every_object_of_every_file_is_applied_and_reported_then_deleted_by_file(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "1-queue.yaml").write_text(QUEUE)
    (tmp_path / "dir" / "2-jobs.yaml").write_text(job("many-a", "kubectl-q") + "---\n" + job("many-b", "kubectl-q"))
    (tmp_path / "c.yaml").write_text(job("many-c"))
    files = ["-f", str(tmp_path / "dir"), "-f", str(tmp_path / "c.yaml")]
    try:
        done = cli.run("apply", *files)
        assert done.stdout.splitlines() == [
            "queue/kubectl-q created",
            "job/many-a created",
            "job/many-b created",
            "job/many-c created",
        ]
        assert cli.run("apply", *files).stdout.splitlines() == [
            "queue/kubectl-q unchanged",
            "job/many-a unchanged",
            "job/many-b unchanged",
            "job/many-c unchanged",
        ]
        (tmp_path / "dir" / "1-queue.yaml").write_text(QUEUE.replace("weight: 2", "weight: 3"))
        assert cli.run("apply", "-f", str(tmp_path / "dir" / "1-queue.yaml")).stdout == "queue/kubectl-q configured\n"
        assert {"many-a", "many-b", "many-c"} <= names(cli, "jobs")
        assert {"many-a", "many-b", "many-c"} == names(cli, "jobs", "-l", "suite=kubectl")
    finally:
        cli.run("delete", "-f", str(tmp_path / "c.yaml"), "-f", str(tmp_path / "dir" / "2-jobs.yaml"), check=False)
        cli.run("delete", "-f", str(tmp_path / "dir" / "1-queue.yaml"), check=False)
    assert not names(cli, "jobs") & {"many-a", "many-b", "many-c"}
    again = cli.run("delete", "-f", str(tmp_path / "c.yaml"), check=False)
    assert (again.returncode, again.stderr) == (1, "error: job/many-c: Job 'many-c' not found\n")
    assert cli.run("delete", "-f", str(tmp_path / "c.yaml"), "--ignore-not-found").returncode == 0


def test_get_o_yaml_is_a_manifest_that_apply_takes_back(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "j.yaml").write_text(QUEUE + "---\n" + job("round-trip", "kubectl-q"))
    cli.run("apply", "-f", str(tmp_path / "j.yaml"))
    try:
        printed = yaml.safe_load(cli.run("get", "job", "round-trip", "-o", "yaml").stdout)
        assert (printed["apiVersion"], printed["kind"]) == ("batch.volcano.sh/v1alpha1", "Job")
        assert printed["metadata"]["name"] == "round-trip"
        assert printed["metadata"]["creationTimestamp"].endswith("Z")
        assert printed["spec"]["queue"] == "kubectl-q"
        assert "phase" in printed["status"]["state"]
        (tmp_path / "printed.yaml").write_text(cli.run("get", "job", "round-trip", "-o", "yaml").stdout)
        assert cli.run("apply", "-f", str(tmp_path / "printed.yaml")).stdout == "job/round-trip unchanged\n"
        (tmp_path / "queues.json").write_text(cli.run("get", "queues", "-o", "json").stdout)
        assert "queue/kubectl-q unchanged" in cli.run("apply", "-f", str(tmp_path / "queues.json")).stdout
    finally:
        cli.run("delete", "job", "round-trip", check=False)
        cli.run("delete", "queue", "kubectl-q", "default", check=False)


def test_a_job_waiting_for_room_is_listed_and_deletable(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "j.yaml").write_text(job("too-big", gpus=64))
    cli.run("apply", "-f", str(tmp_path / "j.yaml"))
    try:
        listed = {j["name"]: j for j in cli.json("get", "jobs")}
        assert listed["too-big"]["phase"] == "Pending"
    finally:
        assert "job/too-big deleted" in cli.run("delete", "job", "too-big").stdout
    assert "too-big" not in names(cli, "jobs")


def test_namespaces_are_kept_apart_and_never_collide_silently(cli: Cli, tmp_path: Path) -> None:
    """team-a/same-name and team-b/same-name are two Jobs (ADR 0010), each found in its namespace."""
    (tmp_path / "j.yaml").write_text(job("same-name"))
    cli.run("apply", "-n", "team-a", "-f", str(tmp_path / "j.yaml"))
    try:
        assert "job/same-name created" in cli.run("apply", "-n", "team-b", "-f", str(tmp_path / "j.yaml")).stdout
        assert "same-name" in names(cli, "jobs", "-n", "team-a")
        assert "same-name" in names(cli, "jobs", "-n", "team-b")
        assert "same-name" not in names(cli, "jobs")  # the default namespace
        wide = cli.run("get", "jobs", "-A").stdout.splitlines()
        assert wide[0].split()[0] == "NAMESPACE"
        assert {("team-a", "same-name"), ("team-b", "same-name")} <= {tuple(line.split()[:2]) for line in wide}
        assert "same-name" in cli.run("describe", "job", "same-name", "-n", "team-b").stdout
        elsewhere = cli.run("delete", "job", "same-name", "-n", "team-c", check=False)  # kubectl's -n
        assert (elsewhere.returncode, elsewhere.stderr) == (
            1,
            "error: job/same-name: Job 'same-name' in namespace 'team-c' not found\n",
        )
        cli.run("delete", "job", "same-name", "-n", "team-b")
        assert "same-name" in names(cli, "jobs", "-n", "team-a")  # untouched
    finally:
        cli.run("delete", "job", "same-name", "-n", "team-a")
        cli.run("delete", "job", "same-name", "-n", "team-b", "--ignore-not-found")


def small_hyperjob(tmp_path: Path, name: str, duration: str) -> Path:
    """The example HyperJob, 8 pods split 4/4 (fewer pods: quicker on a shared machine)."""
    manifest = tmp_path / f"{name}.yaml"
    manifest.write_text(
        (REPO / "examples" / "hyperjob-llm.yaml")
        .read_text()
        .replace("name: llm-train-hyperjob", f"name: {name}")
        .replace("replicas: 64", "replicas: 8")
        .replace("minAvailable: 64", "minAvailable: 8")
        .replace("replicas: 32", "replicas: 4")
        .replace("sim-duration: 10s", f"sim-duration: {duration}")
    )
    return manifest


def test_a_hyperjob_of_the_same_name_in_two_namespaces_is_two_hyperjobs(cli: Cli, tmp_path: Path) -> None:
    manifest = small_hyperjob(tmp_path, "ns-twin", "300s")
    for team in ("team-a", "team-b"):
        assert "hyperjob/ns-twin created" in cli.run("apply", "-n", team, "-f", str(manifest)).stdout
    try:
        assert names(cli, "hyperjobs", "-n", "team-a") >= {"ns-twin"}
        assert "ns-twin" not in names(cli, "hyperjobs")  # the default namespace has none
        table = cli.run("get", "hyperjobs", "-A").stdout.splitlines()
        assert table[0].split()[:2] == ["NAMESPACE", "NAME"]
        assert {tuple(line.split()[:2]) for line in table[1:]} >= {("team-a", "ns-twin"), ("team-b", "ns-twin")}
        for team in ("team-a", "team-b"):  # each runs its own children, named after its namespace
            cli.wait_for(
                f"{team}/ns-twin to run",
                lambda t=team: cli.json("get", "hyperjobs", "ns-twin", "-n", t)["phase"] == "Running",
            )
            children = [
                c["name"]
                for c in yaml.safe_load(cli.run("describe", "hj", "ns-twin", "-n", team, "-o", "yaml").stdout)[
                    "children"
                ]
            ]
            assert children and all(c.startswith(f"{team}-ns-twin-") for c in children), children
        missing = cli.run("describe", "hj", "ns-twin", "-n", "team-c", check=False)
        assert missing.returncode == 1 and "not found in namespace 'team-c'" in missing.stderr
        assert "hyperjob/ns-twin deleted" in cli.run("delete", "hyperjob", "ns-twin", "-n", "team-a").stdout
        assert cli.json("get", "hyperjobs", "ns-twin", "-n", "team-b")["phase"] == "Running"  # untouched
        assert "ns-twin" not in names(cli, "hyperjobs", "-n", "team-a")
    finally:
        for team in ("team-a", "team-b"):
            cli.run("delete", "hyperjob", "ns-twin", "-n", team, "--timeout", "120", "--ignore-not-found", check=False)


def test_child_jobs_are_deleted_through_their_hyperjob(cli: Cli, tmp_path: Path) -> None:
    manifest = small_hyperjob(tmp_path, "kubectl-hj", "1s")
    with cli.applied(manifest, "kubectl-hj"):
        cli.wait_for(
            "the HyperJob to complete", lambda: cli.json("get", "hyperjobs", "kubectl-hj")["phase"] == "Completed"
        )
        refused = cli.run("delete", "job", "kubectl-hj-job-0", check=False)
        assert refused.returncode == 1
        assert "belongs to HyperJob 'kubectl-hj'" in refused.stderr
        for action in ("suspend", "resume", "restart"):
            done = cli.run(action, "kubectl-hj", check=False)
            assert done.returncode == 1, action
            assert "is Completed: a finished HyperJob takes no" in done.stderr
        table = cli.run("get", "hyperjobs").stdout.splitlines()
        wide = cli.run("get", "hyperjobs", "-o", "wide").stdout.splitlines()
        assert len(wide[0].split()) > len(table[0].split())
        assert cli.run("get", "hyperjobs", "--no-headers").stdout.split()[0] == "kubectl-hj"


def test_resume_of_a_hyperjob_that_is_not_suspended_is_refused(cli: Cli, tmp_path: Path) -> None:
    manifest = small_hyperjob(tmp_path, "kubectl-abort", "300s")
    with cli.applied(manifest, "kubectl-abort"):
        cli.wait_for("the HyperJob to run", lambda: cli.json("get", "hyperjobs", "kubectl-abort")["phase"] == "Running")
        assert "commanded" in cli.run("abort", "kubectl-abort").stdout
        done = cli.run("resume", "kubectl-abort", check=False)
        assert done.returncode == 1
        assert "error: hyperjob/kubectl-abort:" in done.stderr


def test_a_fault_for_an_unknown_node_is_refused(cli: Cli) -> None:
    done = cli.run("agent", "--cluster", "cluster-a", "fault", "gpu-xid@no-such-node", check=False)
    assert (done.returncode, done.stderr) == (1, "error: node 'no-such-node' not found in cluster 'cluster-a'\n")


def test_vcctl_style_kinds_and_columns(cli: Cli) -> None:
    queues = cli.run("get", "queues").stdout.splitlines()
    assert queues[0].split() == ["NAME", "WEIGHT", "STATE", "INQUEUE", "PENDING", "RUNNING", "ALLOCATED"]
    for kind in ("pods", "podgroups", "priorityclasses", "services", "nodes"):
        assert cli.run("get", kind).returncode == 0, kind
    nodes = cli.run("get", "nodes", "-o", "wide").stdout.splitlines()
    assert "GPU" in nodes[0].split()


def test_watch_prints_objects_as_they_change_and_jsonpath_picks_fields(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "j.yaml").write_text(job("watched", duration="2s"))
    watch = subprocess.Popen(
        [HYPERJOB, "get", "jobs", "-w"], env=cli.env, cwd=REPO, stdout=subprocess.PIPE, text=True, bufsize=1
    )
    try:
        assert watch.stdout is not None
        assert watch.stdout.readline().split()[:2] == ["NAME", "CLUSTER"]
        cli.run("apply", "-f", str(tmp_path / "j.yaml"))
        seen: list[str] = []
        for line in watch.stdout:  # the same job again each time its row changes, up to Completed
            if line.startswith("watched "):
                seen.append(line.split()[3])
                if seen[-1] == "Completed":
                    break
        assert seen[0] in ("Pending", "Running") and seen[-1] == "Completed" and len(seen) >= 2
    finally:
        watch.terminate()
        watch.wait(10)
        if watch.stdout is not None:
            watch.stdout.close()
    template = '{range .items[*]}{.metadata.name}:{.status.state.phase}{"\\n"}{end}'
    assert "watched:Completed" in cli.run("get", "jobs", "-o", f"jsonpath={template}").stdout.splitlines()
    cli.run("delete", "job", "watched")


def test_a_server_dry_run_says_what_apply_would_do_and_changes_nothing(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "q.yaml").write_text(QUEUE)
    assert cli.run("apply", "-f", str(tmp_path / "q.yaml"), "--dry-run=server").stdout == (
        "queue/kubectl-q created (server dry run)\n"
    )
    assert "kubectl-q" not in names(cli, "queues")
    cli.run("apply", "-f", str(tmp_path / "q.yaml"))
    try:
        (tmp_path / "q.yaml").write_text(QUEUE.replace("weight: 2", "weight: 5"))
        dry = cli.run("apply", "-f", str(tmp_path / "q.yaml"), "--dry-run=server").stdout
        assert dry == "queue/kubectl-q configured (server dry run)\n"
    finally:
        cli.run("delete", "queue", "kubectl-q")
