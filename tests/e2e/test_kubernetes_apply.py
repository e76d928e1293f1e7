"""Server-side apply with field managers, and the patch types, driven by the real ``kubectl``
against ``hyperjob up``'s apiserver, as on a Kubernetes cluster."""

from __future__ import annotations

import pytest
import yaml

from .conftest import Cli
from .test_kubernetes_api import CONCEPTUAL, Kubectl, deleted_after, home, needs_kubectl, restart_apiserver

pytestmark = pytest.mark.e2e
GV = "scheduling.volcano.sh/v1beta1"


def queue(name: str, weight: int) -> str:
    return f"apiVersion: {GV}\nkind: Queue\nmetadata: {{name: {name}}}\nspec: {{weight: {weight}, reclaimable: true}}\n"


@pytest.fixture(scope="module")
def kubectl(cli: Cli) -> Kubectl:
    kube = Kubectl(cli, home(cli) / "kubeconfig")
    cli.wait_for("the apiserver to answer", lambda: kube.run("version", check=False).returncode == 0, timeout=60)
    return kube


def managers(kubectl: Kubectl, obj: str) -> dict[str, dict[str, object]]:
    shown = yaml.safe_load(kubectl.run("get", obj, "-o", "yaml", "--show-managed-fields").stdout)
    return {entry["manager"]: entry for entry in shown["metadata"]["managedFields"]}


@needs_kubectl
def test_two_appliers_conflict_naming_the_field_and_force_conflicts_takes_it(kubectl: Kubectl):
    with deleted_after(kubectl, "queue/kube-ssa"):
        kubectl.apply(queue("kube-ssa", 2), "--server-side", "--field-manager=alice")
        refused = kubectl.apply(queue("kube-ssa", 3), "--server-side", "--field-manager=bob", check=False)
        assert refused.returncode != 0
        assert 'Apply failed with 1 conflict: conflict with "alice": .spec.weight' in refused.stderr
        assert kubectl.run("get", "queue/kube-ssa", "-o", "jsonpath={.spec.weight}").stdout == "2"

        forced = kubectl.apply(queue("kube-ssa", 3), "--server-side", "--field-manager=bob", "--force-conflicts")
        assert "serverside-applied" in forced.stdout
        assert kubectl.run("get", "queue/kube-ssa", "-o", "jsonpath={.spec.weight}").stdout == "3"
        owners = managers(kubectl, "queue/kube-ssa")
        assert owners["alice"]["operation"] == owners["bob"]["operation"] == "Apply"
        assert owners["alice"]["fieldsV1"] == {"f:spec": {"f:reclaimable": {}}}
        assert owners["bob"]["fieldsV1"] == {"f:spec": {"f:reclaimable": {}, "f:weight": {}}}
        assert "managedFields" not in kubectl.run("get", "queue/kube-ssa", "-o", "yaml").stdout


@needs_kubectl
def test_an_updaters_field_conflicts_with_an_apply_naming_its_api_version(kubectl: Kubectl):
    with deleted_after(kubectl, "queue/kube-ssa-patched"):
        kubectl.apply(queue("kube-ssa-patched", 2), "--server-side", "--field-manager=alice")
        kubectl.run("patch", "queue/kube-ssa-patched", "--type=merge", "-p", '{"spec":{"weight":4}}')
        owners = managers(kubectl, "queue/kube-ssa-patched")
        assert owners["kubectl-patch"]["operation"] == "Update" and owners["kubectl-patch"]["apiVersion"] == GV
        assert owners["kubectl-patch"]["fieldsV1"] == {"f:spec": {"f:weight": {}}}
        refused = kubectl.apply(queue("kube-ssa-patched", 5), "--server-side", "--field-manager=alice", check=False)
        assert f'conflict with "kubectl-patch" using {GV}: .spec.weight' in refused.stderr
        # Its next apply omits reclaimable, which alice alone owned: it is removed.
        gone = f"apiVersion: {GV}\nkind: Queue\nmetadata: {{name: kube-ssa-patched}}\nspec: {{weight: 4}}\n"
        kubectl.apply(gone, "--server-side", "--field-manager=alice")
        spec = yaml.safe_load(kubectl.run("get", "queue/kube-ssa-patched", "-o", "yaml").stdout)["spec"]
        assert spec["weight"] == 4 and "reclaimable" not in spec


@needs_kubectl
def test_a_strategic_merge_patch_is_refused_415_for_a_custom_resource_and_applied_to_a_priorityclass(
    kubectl: Kubectl,
):
    with deleted_after(kubectl, "queue/kube-ssa-smp", "priorityclass/kube-ssa-pc"):
        kubectl.apply(queue("kube-ssa-smp", 2))
        refused = kubectl.run("patch", "queue/kube-ssa-smp", "-p", '{"spec":{"weight":4}}', check=False)
        # kubectl's wording for a 415, as on a cluster: it names the patch type and the kind.
        assert "strategic-merge-patch+json is not supported by scheduling.volcano.sh/v1beta1, Kind=Queue" in (
            refused.stderr
        )
        assert "accepted media types include: application/json-patch+json, application/merge-patch+json" in (
            refused.stderr
        )
        pc = "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: kube-ssa-pc}\nvalue: 100\n"
        kubectl.apply(pc)
        kubectl.run("patch", "priorityclass/kube-ssa-pc", "-p", '{"value": 200}')
        assert kubectl.run("get", "priorityclass/kube-ssa-pc", "-o", "jsonpath={.value}").stdout == "200"
        owners = managers(kubectl, "priorityclass/kube-ssa-pc")
        assert owners["kubectl-patch"]["fieldsV1"] == {"f:value": {}}
        assert "f:value" not in owners["kubectl-client-side-apply"]["fieldsV1"]


@needs_kubectl
def test_client_side_apply_moves_to_server_side_apply_and_managers_survive_an_apiserver_restart(kubectl: Kubectl):
    """kubectl's own path: ``apply`` (its manager ``kubectl-client-side-apply``), then ``apply
    --server-side`` (kubectl first patches the client-side manager's fields over to ``kubectl``,
    so its apply conflicts with no one); the managers are still there after a restart."""
    with deleted_after(kubectl, "queue/kube-ssa-moved"):
        kubectl.apply(queue("kube-ssa-moved", 2))
        csa = managers(kubectl, "queue/kube-ssa-moved")["kubectl-client-side-apply"]
        assert csa["operation"] == "Update" and csa["fieldsV1"]["f:spec"] == {
            ".": {},
            "f:reclaimable": {},
            "f:weight": {},
        }
        assert "f:kubectl.kubernetes.io/last-applied-configuration" in csa["fieldsV1"]["f:metadata"]["f:annotations"]
        kubectl.apply(queue("kube-ssa-moved", 3), "--server-side")
        assert kubectl.run("get", "queue/kube-ssa-moved", "-o", "jsonpath={.spec.weight}").stdout == "3"
        owners = managers(kubectl, "queue/kube-ssa-moved")
        assert owners["kubectl"]["operation"] == "Apply" and "kubectl-client-side-apply" not in owners

        restart_apiserver(kubectl.cli)
        assert managers(kubectl, "queue/kube-ssa-moved").keys() == owners.keys()
        refused = kubectl.apply(queue("kube-ssa-moved", 4), "--server-side", "--field-manager=bob", check=False)
        assert 'Apply failed with 1 conflict: conflict with "kubectl": .spec.weight' in refused.stderr


CONCEPTUAL_HYPERJOB = CONCEPTUAL.replace("name: kube-concept", "name: kube-ssa-forms")


@needs_kubectl
def test_a_hyperjob_in_its_conceptual_form_applies_server_side_again_and_after_its_exported_form(
    kubectl: Kubectl,
):
    """The services store a HyperJob in the upstream form; a server-side apply of the conceptual
    form merged field by field into it made an object neither form accepts (``spec.replicatedJobs``
    unknown). Applied again, and after a client-side apply of ``get -o yaml``'s export, it is
    taken as the configuration it is."""
    with deleted_after(kubectl, "hyperjob/kube-ssa-forms"):
        for _ in range(2):
            applied = kubectl.apply(CONCEPTUAL_HYPERJOB, "--server-side")
            assert "serverside-applied" in applied.stdout, applied.stderr
        exported = kubectl.run("get", "hyperjob/kube-ssa-forms", "-o", "yaml").stdout
        kubectl.apply(exported)
        again = kubectl.apply(CONCEPTUAL_HYPERJOB, "--server-side", check=False)
        assert again.returncode == 0 and "serverside-applied" in again.stdout, again.stderr
        assert "failed to migrate" not in again.stderr, again.stderr  # kubectl's metadata-only apply
