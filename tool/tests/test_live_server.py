"""validate --server and diff --live against a real kube-apiserver: server-side apply dry runs as Flux
sends them, what the server refuses or drops, and what applying would change on the cluster."""

from __future__ import annotations

import base64
import copy
import json
import os
import subprocess

import pytest
from conftest import REPO

from eks_gpu_gitops.diff.live import environment_diff
from eks_gpu_gitops.live.cluster import connect
from eks_gpu_gitops.live.server_apply import FIELD_MANAGER, NAME_LABEL, dry_run
from eks_gpu_gitops.model import Environment, FluxKustomization, Manifest
from eks_gpu_gitops.render.repository import render_repository
from eks_gpu_gitops.validate.server import DROPPED, REJECTED, findings


@pytest.fixture()
def api(control_plane):
    return connect(kubeconfig=str(control_plane.kubeconfig)).api


def environment(*docs: dict, name: str = "test") -> Environment:
    """The objects as one Flux Kustomization applies them, named after the first object's name (each test
    has its own namespace, so pruning in one test never sees another's objects)."""
    owner = {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": docs[0]["metadata"]["name"], "namespace": "flux-system"},
        "spec": {
            "path": "./apps",
            "interval": "10m",
            "prune": True,
            "sourceRef": {"kind": "GitRepository", "name": "x"},
        },
    }
    source = owner["metadata"]["name"]
    kustomization = FluxKustomization(Manifest(owner, f"clusters/{name}", name, "flux-system"), source)
    kustomization.objects = [Manifest(doc, "apps/objects.yaml", name, source) for doc in docs]
    return Environment(name, [kustomization])


def apply(api, *docs: dict) -> None:
    """Apply for real, as Flux would: the state a test starts from."""
    run = dry_run(api, environment(*docs), dry=False)
    assert [o.error for o in run.outcomes if o.error] == []


def namespace(name: str, **labels) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def pvc(ns: str, storage_class: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": ns},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": storage_class,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


def pod(ns: str, secure: bool) -> dict:
    container = {"name": "main", "image": "busybox:1.36"}
    if secure:
        container["securityContext"] = {
            "runAsNonRoot": True,
            "runAsUser": 1000,
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": ns},
        "spec": {"containers": [container]},
    }


def service_account(ns: str) -> dict:
    return {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": ns}}


def mpijob(ns: str, **spec_extra) -> dict:
    template = {"spec": {"containers": [{"name": "w", "image": "horovod:1"}]}}
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "train", "namespace": ns},
        "spec": {
            "slotsPerWorker": 1,
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": template},
                "Worker": {"replicas": 2, "template": template},
            },
            **spec_extra,
        },
    }


def deployment(ns: str, replicas: int) -> dict:
    labels = {"app": "web"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "web", "image": "nginx:1"}]}},
        },
    }


def secret(ns: str, password: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "db", "namespace": ns},
        "stringData": {"password": password},
    }


def reported(env: Environment, api) -> list[tuple[str, str, str]]:
    result = findings([dry_run(api, env)])
    return [(f.rule, f.resource, f.path) for f in result.findings]


# --- validate --server -------------------------------------------------------------------------------------


def test_an_immutable_field_changed_against_the_live_object_is_refused(api):
    apply(api, namespace("imm"), pvc("imm", "gp3"))

    result = findings([dry_run(api, environment(namespace("imm"), pvc("imm", "fsx")))])

    assert [(f.rule, f.resource) for f in result.findings] == [(REJECTED, "PersistentVolumeClaim/imm/data")]
    assert "spec: Forbidden: spec is immutable after creation" in result.findings[0].message
    assert "\n" not in result.findings[0].message  # the server's diff of the spec is left out
    assert result.findings[0].kustomization == "imm"


def test_the_unchanged_claim_passes(api):
    apply(api, namespace("imm2"), pvc("imm2", "gp3"))

    assert reported(environment(namespace("imm2"), pvc("imm2", "gp3")), api) == []


def test_a_pod_running_as_root_in_a_restricted_namespace_is_refused_by_pod_security(api):
    restricted = namespace("psa", **{"pod-security.kubernetes.io/enforce": "restricted"})
    apply(api, restricted, service_account("psa"))

    result = findings([dry_run(api, environment(restricted, pod("psa", secure=False)))])

    assert [(f.rule, f.resource) for f in result.findings] == [(REJECTED, "Pod/psa/p")]
    assert 'violates PodSecurity "restricted:latest"' in result.findings[0].message


def test_a_pod_that_meets_the_restricted_profile_passes(api):
    restricted = namespace("psa2", **{"pod-security.kubernetes.io/enforce": "restricted"})
    apply(api, restricted, service_account("psa2"))

    assert reported(environment(restricted, pod("psa2", secure=True)), api) == []


def test_a_field_the_crd_schema_does_not_declare_is_refused_with_its_path(api):
    apply(api, namespace("crd"))

    result = findings([dry_run(api, environment(namespace("crd"), mpijob("crd", slotsPerWorkr=8)))])

    assert [(f.rule, f.resource, f.path) for f in result.findings] == [
        (REJECTED, "MPIJob/crd/train", "spec.slotsPerWorkr")
    ]
    assert "spec.slotsPerWorkr is not in the cluster's schema for MPIJob" in result.findings[0].message


def test_fields_the_server_does_not_apply_are_reported_as_dropped(api):
    apply(api, namespace("drop"))
    job = mpijob("drop") | {"status": {"startTime": "2026-01-01T00:00:00Z"}}
    web = deployment("drop", 1) | {"status": {"replicas": 3}}

    found = reported(environment(namespace("drop"), job, web), api)

    assert found == [(DROPPED, "Deployment/drop/web", "status.replicas"), (DROPPED, "MPIJob/drop/train", "status")]


def test_a_well_formed_mpijob_and_a_secret_from_string_data_keep_every_field(api):
    apply(api, namespace("crd2"))

    assert reported(environment(namespace("crd2"), mpijob("crd2"), secret("crd2", "s3cr3t-value")), api) == []


def test_objects_in_a_namespace_only_created_in_this_run_are_skipped_with_a_note(api):
    run = dry_run(api, environment(namespace("fresh"), deployment("fresh", 1)))

    result = findings([run])
    assert result.findings == []
    assert result.notes == [
        "test: 1 object not tried: Deployment/fresh/web: its namespace fresh is only created in this run"
    ]


def test_objects_of_a_kind_whose_crd_is_only_created_in_this_run_are_skipped_with_a_note(api):
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Cluster",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "versions": [
                {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {"type": "object"}}}
            ],
        },
    }
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}

    result = findings([dry_run(api, environment(widget, crd))])  # the CRD is tried first whatever the order

    assert result.findings == []
    assert result.notes == [
        "test: 1 object not tried: Widget/w: its CRD is only created in this run (Widget.example.com)"
    ]


def test_the_dry_run_is_sent_as_flux_sends_it_and_stores_nothing(api):
    from kubernetes import client

    apply(api, namespace("flux"))
    run = dry_run(api, environment(namespace("flux"), deployment("flux", 2)))

    answer = run.outcomes[1].result
    assert answer["metadata"]["labels"] == {NAME_LABEL: "flux", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}
    assert [m["manager"] for m in answer["metadata"]["managedFields"]] == [FIELD_MANAGER]
    assert client.AppsV1Api(api).list_namespaced_deployment("flux").items == []


# --- diff --live ------------------------------------------------------------------------------------------


def test_a_changed_replica_count_is_the_only_line_that_changes(api):
    apply(api, namespace("rep"), deployment("rep", 1))

    diff, problems, _ = environment_diff(api, environment(namespace("rep"), deployment("rep", 3)))

    assert problems == []
    assert [(c.status, c.key.resource) for c in diff.changes] == [("changed", "Deployment rep/web")]
    assert (diff.changes[0].additions, diff.changes[0].deletions) == (1, 1)
    assert "-  replicas: 1\n+  replicas: 3" in diff.changes[0].diff


def test_more_mpijob_workers_show_in_the_diff_and_in_the_gpu_figure(api):
    def job(workers: int) -> dict:
        doc = mpijob("gpus")
        worker = doc["spec"]["mpiReplicaSpecs"]["Worker"] = copy.deepcopy(doc["spec"]["mpiReplicaSpecs"]["Worker"])
        worker["replicas"] = workers
        worker["template"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 4}}
        return doc

    apply(api, namespace("gpus"), job(2))

    diff, _, _ = environment_diff(api, environment(namespace("gpus"), job(3)))

    assert [(c.status, c.key.resource, c.additions, c.deletions) for c in diff.changes] == [
        ("changed", "MPIJob gpus/train", 1, 1)
    ]
    assert "-      replicas: 2\n+      replicas: 3" in diff.changes[0].diff
    assert (diff.mpijob_gpus.before, diff.mpijob_gpus.after) == (8, 12)


def test_an_unchanged_environment_shows_no_change(api):
    apply(api, namespace("same"), deployment("same", 2), mpijob("same"), secret("same", "kept-value"))

    diff, problems, _ = environment_diff(
        api, environment(namespace("same"), deployment("same", 2), mpijob("same"), secret("same", "kept-value"))
    )

    assert (diff.changes, problems) == ([], [])


def test_a_changed_secret_value_is_masked(api):
    apply(api, namespace("sec"), secret("sec", "old-password-1"))

    diff, _, _ = environment_diff(api, environment(namespace("sec"), secret("sec", "new-password-2")))

    [change] = diff.changes
    assert change.key.resource == "Secret sec/db"
    assert "-  password: '*** (before)'\n+  password: '*** (after)'" in change.diff
    for value in ("old-password-1", "new-password-2"):
        assert value not in change.diff and base64.b64encode(value.encode()).decode() not in change.diff


def test_new_objects_are_added_and_labelled_objects_no_longer_rendered_are_removed(api):
    apply(api, namespace("prune"), deployment("prune", 1))

    diff, _, _ = environment_diff(api, environment(namespace("prune"), secret("prune", "x-value")))

    assert sorted((c.status, c.key.resource) for c in diff.changes) == [
        ("added", "Secret prune/db"),
        ("removed", "Deployment prune/web"),
    ]


# --- the commands on the generated repository --------------------------------------------------------------


def run_tool(verb: str, *args: str, kubeconfig) -> subprocess.CompletedProcess:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    env.pop("GITOPS_DEBUG", None)
    return subprocess.run([str(REPO / "scripts" / verb), *args], cwd=REPO, env=env, capture_output=True, text=True)


def test_the_dev_environment_applied_as_is_passes_and_shows_no_change(api, control_plane):
    [dev] = render_repository(REPO, ["dev"])
    from kubernetes import client

    client.CoreV1Api(api).create_namespace(namespace("flux-system"))  # flux bootstrap makes it
    run = dry_run(api, dev, dry=False)
    assert [o.error for o in run.outcomes if o.error] == []

    validated = run_tool("validate", "--server", "--env", "dev", "--quiet", kubeconfig=control_plane.kubeconfig)
    diffed = run_tool("diff", "--live", "--env", "dev", "--exit-code", kubeconfig=control_plane.kubeconfig)

    assert (validated.returncode, validated.stdout.splitlines()[-1]) == (0, validated.stdout.splitlines()[-1])
    assert validated.stdout.splitlines()[-1].startswith("0 errors, 0 warnings, 0 suppressed in ")
    assert diffed.returncode == 0, diffed.stdout + diffed.stderr
    as_json = run_tool("diff", "--live", "--env", "dev", "--format", "json", kubeconfig=control_plane.kubeconfig)
    markdown = run_tool("diff", "--live", "--env", "dev", "--format", "markdown", kubeconfig=control_plane.kubeconfig)
    assert (markdown.returncode, markdown.stdout.splitlines()[0]) == (0, "## Manifest diff")
    document = json.loads(as_json.stdout)
    assert (document["has_changes"], [(e["name"], e["objects"]) for e in document["environments"]]) == (
        False,
        [("dev", [])],
    )


def test_a_missing_kubeconfig_is_one_line(tmp_path):
    result = run_tool("validate", "--server", "--env", "dev", "--quiet", kubeconfig=tmp_path / "absent")

    assert result.returncode == 2
    assert result.stderr.startswith(f"validate: no usable kubeconfig at {tmp_path / 'absent'}: ")
    assert len(result.stderr.splitlines()) == 1


@pytest.mark.parametrize(
    ("verb", "args", "message"),
    [
        ("validate", ("--context", "local"), "validate: --context goes with --server (see --help)"),
        (
            "validate",
            ("--server", "clusters/dev"),
            "validate: --server validates environments (--env), not paths (see --help)",
        ),
        (
            "diff",
            ("--live", "--base", "main"),
            "diff: --live compares with the cluster, not with --base/--head (see --help)",
        ),
        ("diff", ("--live", "--kube-context", "prod"), "diff: unknown context 'prod' in {kubeconfig}; known: local"),
        ("diff", ("--base", "main", "--kube-context", "local"), "diff: --kube-context goes with --live (see --help)"),
        ("validate", ("--server", "--env", "nope"), "validate: unknown environment 'nope'; known: dev, prod"),
    ],
)
def test_bad_input_is_one_line(control_plane, verb, args, message):
    result = run_tool(verb, *args, kubeconfig=control_plane.kubeconfig)

    assert result.returncode == 2
    assert result.stderr.strip().splitlines()[-1] == message.format(kubeconfig=control_plane.kubeconfig)
    assert result.stdout == ""
