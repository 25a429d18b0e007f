"""diff --live as Flux's controllers apply, against a real kube-apiserver: a HelmRelease's objects with
helm-controller's labels and field manager, variables substituted from the cluster's substituteFrom sources,
quantities the cluster holds as strings, and pruning from the Kustomization's inventory."""

from __future__ import annotations

import pytest

from eks_gpu_gitops.diff.live import environment_diff
from eks_gpu_gitops.live.cluster import connect
from eks_gpu_gitops.live.prune import inventory_key
from eks_gpu_gitops.live.server_apply import dry_run
from eks_gpu_gitops.model import Environment, FluxKustomization, HelmReleaseRender, Manifest
from eks_gpu_gitops.render import post_build


@pytest.fixture()
def api(control_plane):
    return connect(kubeconfig=str(control_plane.kubeconfig)).api


def kustomization_doc(name: str, **spec) -> dict:
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": name, "namespace": "flux-system"},
        "spec": {
            "path": "./apps",
            "interval": "10m",
            "prune": True,
            "sourceRef": {"kind": "GitRepository", "name": "x"},
            **spec,
        },
    }


def environment(name: str, *docs: dict, releases=(), **spec) -> Environment:
    """`docs` as the Flux Kustomization `name` applies them (substituted as the render does when `spec` has a
    postBuild), and what `releases` ((HelmRelease, its objects)) install."""
    kustomization = FluxKustomization(Manifest(kustomization_doc(name, **spec), "clusters/t", "t", "flux-system"), "")
    kustomization.objects = [Manifest(doc, "apps/objects.yaml", "t", name) for doc in docs]
    post_build.substitute_environment([kustomization])
    rendered = [
        HelmReleaseRender(
            Manifest(release, "apps/release.yaml", "t", name),
            [Manifest(doc, "", "t", f"HelmRelease {release['metadata']['name']}") for doc in objects],
        )
        for release, objects in releases
    ]
    return Environment("t", [kustomization], releases=rendered)


def apply(api, env: Environment) -> None:
    """Apply for real, as Flux would: the state a test starts from."""
    run = dry_run(api, env, dry=False)
    assert [o.error for o in run.outcomes if o.error] == []


def namespace(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def config_map(ns: str, name: str, **data) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns}, "data": data}


def changes(diff) -> list[tuple[str, str]]:
    return sorted((c.status, c.key.resource) for c in diff.changes)


def create(api, doc: dict) -> None:
    from kubernetes.dynamic import DynamicClient

    client = DynamicClient(api)
    resource = client.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
    client.server_side_apply(resource, body=doc, field_manager="test", force_conflicts=True)


@pytest.fixture()
def flux_system(api):
    create(api, namespace("flux-system"))


# --- 1. what a HelmRelease installs goes as helm-controller sends it -------------------------------------------


def release(name: str, ns: str, **spec) -> dict:
    return {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"interval": "10m", "chart": {"spec": {"chart": name}}, **spec},
    }


def test_a_helm_release_object_carries_helm_controllers_labels_and_field_manager(api):
    create(api, namespace("helm-a"))
    chart_object = config_map("helm-a", "kueue-config", a="1")
    env = environment("helm-a", namespace("helm-a"), releases=[(release("kueue", "helm-a"), [chart_object])])

    run = dry_run(api, env)

    outcome = next(o for o in run.outcomes if o.manifest.kind == "ConfigMap")
    assert outcome.error == ""
    metadata = outcome.result["metadata"]
    assert {k: v for k, v in metadata["labels"].items() if "fluxcd" in k or "managed-by" in k} == {
        "app.kubernetes.io/managed-by": "Helm",
        "helm.toolkit.fluxcd.io/name": "kueue",
        "helm.toolkit.fluxcd.io/namespace": "helm-a",
    }
    assert metadata["annotations"] == {
        "meta.helm.sh/release-name": "kueue",
        "meta.helm.sh/release-namespace": "helm-a",
    }
    assert [f["manager"] for f in metadata["managedFields"]] == ["helm-controller"]


def test_a_release_with_a_target_namespace_is_named_as_helm_controller_names_it(api):
    create(api, namespace("helm-b"))
    chart_object = config_map("helm-b", "c", a="1")
    env = environment(
        "helm-b",
        namespace("helm-b"),
        releases=[(release("kueue", "flux-system", targetNamespace="helm-b"), [chart_object])],
    )

    run = dry_run(api, env)

    outcome = next(o for o in run.outcomes if o.manifest.kind == "ConfigMap")
    assert outcome.result["metadata"]["annotations"] == {
        "meta.helm.sh/release-name": "helm-b-kueue",
        "meta.helm.sh/release-namespace": "helm-b",
    }
    assert outcome.result["metadata"]["labels"]["helm.toolkit.fluxcd.io/namespace"] == "flux-system"


def test_a_helm_release_applied_by_helm_controller_shows_no_change_and_a_changed_value_does(api):
    def env(value: str) -> Environment:
        objects = [config_map("helm-c", "c", a=value)]
        return environment("helm-c", namespace("helm-c"), releases=[(release("r", "helm-c"), objects)])

    apply(api, env("1"))

    same, problems, _ = environment_diff(api, env("1"))
    changed, _, _ = environment_diff(api, env("2"))

    assert (changes(same), problems) == ([], [])
    assert changes(changed) == [("changed", "ConfigMap helm-c/c")]
    assert "+  a: '2'" in changed.changes[0].diff


# --- 2. variables only the cluster has, substituted from its substituteFrom sources ----------------------------


def storage_class(name: str, subnet: str) -> dict:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": "fsx.csi.aws.com",
        "parameters": {"subnetId": subnet, "deploymentType": "SCRATCH_2"},
    }


def settings_spec(name: str, kind: str = "ConfigMap") -> dict:
    return {"postBuild": {"substituteFrom": [{"kind": kind, "name": name}]}}


def test_a_storage_class_is_compared_after_substitution_from_the_clusters_config_map(api, flux_system):
    create(api, config_map("flux-system", "settings-a", FSX_SUBNET_ID="subnet-0aaa"))
    apply(api, environment("sub-a", storage_class("fsx-sub-a", "subnet-0aaa")))
    env = environment("sub-a", storage_class("fsx-sub-a", "${FSX_SUBNET_ID}"), **settings_spec("settings-a"))
    assert env.kustomizations[0].substitution.left  # the render alone leaves it as written

    diff, problems, notes = environment_diff(api, env)

    assert (changes(diff), problems, notes) == ([], [], [])


def test_a_changed_value_on_the_cluster_is_refused_as_flux_would_be(api, flux_system):
    create(api, config_map("flux-system", "settings-b", FSX_SUBNET_ID="subnet-0bbb"))
    apply(api, environment("sub-b", storage_class("fsx-sub-b", "subnet-0old")))
    env = environment("sub-b", storage_class("fsx-sub-b", "${FSX_SUBNET_ID}"), **settings_spec("settings-b"))

    _, problems, _ = environment_diff(api, env)

    assert problems == [
        't: StorageClass/fsx-sub-b: Invalid: StorageClass.storage.k8s.io "fsx-sub-b" is invalid: parameters: '
        "Forbidden: updates to parameters are forbidden."
    ]


def test_a_source_not_on_the_cluster_is_a_note_and_the_object_is_left_as_written(api, flux_system):
    create(api, namespace("sub-c"))
    env = environment(
        "sub-c",
        namespace("sub-c"),
        config_map("sub-c", "c", subnet="${FSX_SUBNET_ID}"),
        **settings_spec("settings-missing"),
    )

    diff, problems, notes = environment_diff(api, env)

    assert problems == []
    assert notes == [
        "t: Flux Kustomization sub-c: variables left as written, compared before Flux's substitution: "
        "ConfigMap flux-system/settings-missing not on the cluster"
    ]
    added = next(c for c in diff.changes if c.key.resource == "ConfigMap sub-c/c")
    assert "${FSX_SUBNET_ID}" in added.diff


def test_a_secrets_value_substituted_from_the_cluster_never_shows(api, flux_system):
    password = "s3cr3t-from-cluster-4711"
    create(api, namespace("sub-d"))
    create(
        api,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "settings-d", "namespace": "flux-system"},
            "stringData": {"DB_PASSWORD": password},
        },
    )
    env = environment(
        "sub-d",
        namespace("sub-d"),
        config_map("sub-d", "c", label="tag-${DB_PASSWORD}"),
        **settings_spec("settings-d", kind="Secret"),
    )

    diff, problems, notes = environment_diff(api, env)

    added = next(c for c in diff.changes if c.key.resource == "ConfigMap sub-d/c")
    assert "+  label: tag-***" in added.diff.splitlines()  # substituted, the Secret's value masked
    shown = "\n".join([*(c.diff for c in diff.changes), *problems, *notes])
    assert password not in shown


# --- 3. quantities the cluster holds as strings ----------------------------------------------------------------


def cluster_queue(name: str, quota) -> dict:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [{"name": "gpu", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": quota}]}],
                }
            ],
        },
    }


def test_a_quantity_the_cluster_holds_as_a_string_is_the_same_number(api):
    apply(api, environment("q-a", cluster_queue("q-a", "8")))

    same, problems, _ = environment_diff(api, environment("q-a", cluster_queue("q-a", 8)))
    changed, _, _ = environment_diff(api, environment("q-a", cluster_queue("q-a", 9)))

    assert (changes(same), problems) == ([], [])
    assert changes(changed) == [("changed", "ClusterQueue q-a")]
    assert "nominalQuota: 9" in changed.changes[0].diff


# --- 4. pruning from the Kustomization's inventory --------------------------------------------------------------


def set_inventory(api, name: str, entries: list[dict]) -> None:
    from kubernetes.client import CustomObjectsApi

    create(api, kustomization_doc(name))
    CustomObjectsApi(api).patch_namespaced_custom_object_status(
        "kustomize.toolkit.fluxcd.io",
        "v1",
        "flux-system",
        "kustomizations",
        name,
        {"status": {"inventory": {"entries": entries}}},
    )


def service(ns: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {"ports": [{"port": 80}]},
    }


def endpoints_like_the_service(api, ns: str, kustomization: str) -> None:
    """What the endpoints controllers make: the Service's labels copied, an EndpointSlice owned by it."""
    from kubernetes.client import CoreV1Api

    labels = {"kustomize.toolkit.fluxcd.io/name": kustomization, "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}
    uid = CoreV1Api(api).read_namespaced_service("web", ns).metadata.uid
    create(
        api, {"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": "web", "namespace": ns, "labels": labels}}
    )
    owner = {"apiVersion": "v1", "kind": "Service", "name": "web", "uid": uid, "controller": True}
    create(
        api,
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": "web-abc", "namespace": ns, "labels": labels, "ownerReferences": [owner]},
            "addressType": "IPv4",
            "endpoints": [],
        },
    )


def test_inventory_key_reads_fluxs_ids():
    assert inventory_key("inv_web__Service") == ("", "Service", "inv", "web")
    assert inventory_key("_inv__Namespace") == ("", "Namespace", "", "inv")
    assert inventory_key("inv_web_apps_Deployment") == ("apps", "Deployment", "inv", "web")
    assert inventory_key("_system__x_rbac.authorization.k8s.io_ClusterRole") == (
        "rbac.authorization.k8s.io",
        "ClusterRole",
        "",
        "system:x",
    )
    assert inventory_key("nonsense") is None


def test_only_what_the_inventory_lists_is_pruned(api, flux_system):
    kept = config_map("inv-a", "kept", a="1")
    kept["metadata"]["annotations"] = {"kustomize.toolkit.fluxcd.io/prune": "disabled"}
    apply(api, environment("inv-a", namespace("inv-a"), service("inv-a"), config_map("inv-a", "old", a="1"), kept))
    endpoints_like_the_service(api, "inv-a", "inv-a")
    set_inventory(
        api,
        "inv-a",
        [
            {"id": "_inv-a__Namespace", "v": "v1"},
            {"id": "inv-a_web__Service", "v": "v1"},
            {"id": "inv-a_old__ConfigMap", "v": "v1"},
            {"id": "inv-a_kept__ConfigMap", "v": "v1"},
            {"id": "inv-a_gone__ConfigMap", "v": "v1"},  # already deleted: nothing to prune
        ],
    )

    diff, problems, _ = environment_diff(api, environment("inv-a", namespace("inv-a"), service("inv-a")))

    assert problems == []
    assert changes(diff) == [("removed", "ConfigMap inv-a/old")]


def test_without_an_inventory_labels_decide_but_objects_owned_by_another_are_left(api, flux_system):
    apply(api, environment("inv-b", namespace("inv-b"), service("inv-b"), config_map("inv-b", "old", a="1")))
    endpoints_like_the_service(api, "inv-b", "inv-b")

    diff, _, _ = environment_diff(api, environment("inv-b", namespace("inv-b"), service("inv-b")))

    # The Endpoints (no ownerReference) is what labels alone cannot tell apart: the inventory does (test above).
    assert changes(diff) == [("removed", "ConfigMap inv-b/old"), ("removed", "Endpoints inv-b/web")]
