"""render builds what Flux applies: all of clusters/<env>, nested Kustomizations, Flux-side transforms,
confined to the repository (real kustomize, copies of this repository)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import REPO
from diff_fixtures import GitRepo, environments, objects

from eks_gpu_gitops.core.errors import InputError
from eks_gpu_gitops.render.repository import render_repository, repository_root
from eks_gpu_gitops.validate import plan

BACKDOOR = {
    "apiVersion": "rbac.authorization.k8s.io/v1",
    "kind": "ClusterRoleBinding",
    "metadata": {"name": "backdoor"},
    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "system:anonymous"}],
}
MPIJOB = "MPIJob training/horovod-train"


@pytest.fixture
def repo(tmp_path) -> GitRepo:
    return GitRepo.create(tmp_path / "repo")


def environment(repo: GitRepo, env: str = "prod"):
    [result] = render_repository(repo.root, [env])
    return result


def kustomizations(repo: GitRepo, env: str = "prod") -> dict:
    return {k.name: k for k in environment(repo, env).kustomizations}


def find(repo: GitRepo, kind: str, name: str, env: str = "prod"):
    found = [m for m in environment(repo, env).objects if m.kind == kind and m.name == name]
    assert len(found) == 1, [m.resource for m in found]
    return found[0]


def set_spec(repo: GitRepo, name: str, **fields) -> None:
    path = f"clusters/prod/{name}.yaml"
    doc = repo.read_yaml(path)
    doc["spec"].update(fields)
    repo.write_yaml(path, doc)


def test_as_generated_the_root_sync_applies_only_the_two_entry_points(repo):
    found = kustomizations(repo)
    assert list(found) == ["flux-system", "infrastructure", "training"]
    assert found["flux-system"].objects == []
    assert found["flux-system"].path == "clusters/prod"


@pytest.mark.parametrize("name", ["backdoor.yaml", "backdoor.yml", "extra/more/backdoor.yaml"])
def test_any_manifest_below_clusters_env_is_applied_by_the_root_sync(repo, name):
    repo.write_yaml(f"clusters/prod/{name}", BACKDOOR)

    binding = find(repo, "ClusterRoleBinding", "backdoor")

    assert (binding.source, binding.file) == ("flux-system", f"clusters/prod/{name}")
    assert binding.doc["subjects"][0]["name"] == "system:anonymous"
    assert [m.name for m in environment(repo, "dev").objects if m.kind == "ClusterRoleBinding"] == []


def test_a_file_git_ignores_never_reaches_flux_so_it_is_not_rendered(repo):
    repo.write_yaml("clusters/prod/backdoor.yaml", BACKDOOR)
    (repo.root / ".gitignore").write_text("clusters/prod/backdoor.yaml\n")

    assert [m.resource for m in environment(repo).objects if m.kind == "ClusterRoleBinding"] == []

    (repo.root / ".gitignore").write_text("")
    assert [m.resource for m in environment(repo).objects if m.kind == "ClusterRoleBinding"] == [
        "ClusterRoleBinding/backdoor"
    ]


def test_a_kustomization_file_in_clusters_env_is_built(repo):
    repo.write_yaml("clusters/prod/rbac/binding.yaml", BACKDOOR)
    repo.write_yaml(
        "clusters/prod/kustomization.yaml",
        {"resources": ["infrastructure.yaml", "training.yaml", "rbac/binding.yaml"], "namePrefix": "x-"},
    )

    found = kustomizations(repo)

    assert [m.name for m in found["flux-system"].objects] == ["x-backdoor"]
    assert sorted(found) == ["flux-system", "x-infrastructure", "x-training"]


def test_a_backdoor_in_clusters_env_shows_in_the_diff(repo):
    repo.write_yaml("clusters/prod/backdoor.yaml", BACKDOOR)
    repo.commit("backdoor")

    result = repo.diff("--base", "HEAD~1", "--head", "HEAD", "--format", "json")

    assert result.code == 0, result.err
    prod = environments(result)["prod"]
    assert prod["counts"] == {"added": 1, "changed": 0, "moved": 0, "removed": 0}, result.err
    assert list(objects(prod)) == ["ClusterRoleBinding backdoor"]
    assert environments(result)["dev"]["status"] == "unchanged"


def nested(name: str, path: str, source: str = "flux-system", kind: str = "GitRepository") -> dict:
    return {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": name, "namespace": "flux-system"},
        "spec": {"interval": "1h", "path": path, "prune": True, "sourceRef": {"kind": kind, "name": source}},
    }


def test_nested_kustomizations_of_this_repository_are_followed_others_are_not(repo):
    repo.write_yaml("clusters/prod/apps.yaml", nested("apps", "./apps/prod"))
    repo.write_yaml("apps/prod/more.yaml", nested("more", "./apps/more"))
    repo.write_yaml("apps/prod/again.yaml", nested("apps", "./apps/prod"))  # a cycle
    repo.write_yaml("apps/prod/elsewhere.yaml", nested("elsewhere", "./deploy", source="other"))
    repo.write_yaml("apps/more/backdoor.yaml", BACKDOOR)

    found = kustomizations(repo)

    assert sorted(found) == ["apps", "flux-system", "infrastructure", "more", "training"]
    assert [m.resource for m in found["more"].objects] == ["ClusterRoleBinding/backdoor"]
    assert sorted(m.resource for m in found["apps"].objects) == [
        "Kustomization/flux-system/apps",
        "Kustomization/flux-system/elsewhere",
    ]


def root_sync(post_build: dict) -> dict:
    """The repository's own copy of bootstrap's Kustomization (gotk-sync.yaml), with spec.postBuild."""
    root = nested("flux-system", "./clusters/prod")
    root["spec"]["postBuild"] = post_build
    return root


def test_a_child_path_with_a_variable_is_built_where_the_parents_substitution_points(repo):
    repo.write_yaml("clusters/prod/flux-system/gotk-sync.yaml", root_sync({"substitute": {"CLUSTER": "prod"}}))
    apps = nested("apps", "./apps/${CLUSTER}")
    apps["spec"]["postBuild"] = {"substitute": {"TEAM": "${CLUSTER}-team"}}  # the root's variable, passed on
    repo.write_yaml("clusters/prod/apps.yaml", apps)
    repo.write_yaml("apps/prod/backdoor.yaml", BACKDOOR)
    repo.write_yaml("apps/prod/more.yaml", nested("more", "./apps/more-${TEAM}"))  # a grandchild, the same way
    repo.write_yaml("apps/prod/unset.yaml", nested("unset", "./apps/${CLUSTER}"))  # apps does not know CLUSTER
    repo.write_yaml("apps/more-prod-team/c.yaml", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}})

    found = kustomizations(repo)

    assert list(found)[:4] == ["flux-system", "infrastructure", "training", "apps"]
    assert (found["apps"].path, found["more"].path) == ("apps/prod", "apps/more-prod-team")
    assert sorted(m.resource for m in found["apps"].objects) == [
        "ClusterRoleBinding/backdoor",
        "Kustomization/flux-system/unset",  # Flux fails it: ${CLUSTER} has no value in apps
    ]
    assert [m.resource for m in found["more"].objects] == ["ConfigMap/c"]
    assert found["apps"].manifest.doc["spec"]["path"] == "./apps/prod"  # as Flux applies it
    assert [m.resource for m in found["flux-system"].objects] == []


def test_a_child_path_only_the_cluster_can_fill_in_is_not_followed_and_validate_says_so(repo, monkeypatch, capsys):
    from_cluster = {"substituteFrom": [{"kind": "ConfigMap", "name": "made-on-the-cluster"}]}
    repo.write_yaml("clusters/prod/flux-system/gotk-sync.yaml", root_sync(from_cluster))
    repo.write_yaml("clusters/prod/apps.yaml", nested("apps", "./apps/${CLUSTER}"))
    repo.write_yaml("apps/prod/backdoor.yaml", BACKDOOR)

    found = kustomizations(repo)

    assert "apps" not in found
    assert [m.resource for m in found["flux-system"].objects] == ["Kustomization/flux-system/apps"]
    _, report = validate_json(repo.root, monkeypatch, capsys)
    [note] = [n for n in report["notes"] if n.startswith("prod: Flux Kustomization apps:")]
    assert note.startswith("prod: Flux Kustomization apps: spec.path './apps/${CLUSTER}' is known only on the cluster")


def test_target_namespace_moves_every_object_and_the_diff_shows_it(repo):
    set_spec(repo, "training", targetNamespace="ml")
    repo.commit("move")

    job = find(repo, "MPIJob", "horovod-train")
    result = repo.diff("--base", "HEAD~1", "--head", "HEAD", "--format", "json")

    assert result.code == 0, result.err
    assert job.namespace == "ml"
    changed = objects(environments(result)["prod"])
    # One entry: a move from training to ml, not a removal and an addition (diff/pairing.py).
    assert changed["MPIJob ml/horovod-train"]["status"] == "moved" and MPIJOB not in changed
    assert changed["MPIJob ml/horovod-train"]["namespace_move"] == {"from": "training", "to": "ml"}


def test_flux_patches_scale_the_workers(repo):
    before = find(repo, "MPIJob", "horovod-train").doc["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
    patch = [{"op": "replace", "path": "/spec/mpiReplicaSpecs/Worker/replicas", "value": before + 2}]
    set_spec(repo, "training", patches=[{"target": {"kind": "MPIJob"}, "patch": yaml.safe_dump(patch)}])

    job = find(repo, "MPIJob", "horovod-train")

    assert job.doc["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == before + 2
    assert (repo.root / "overlays/prod/training/kustomization.yaml").read_text().count("patches") == 0
    # The diff counts the GPUs the patched job asks for, and says when the GPU group cannot hold them.
    worker = job.doc["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    per_worker = int(worker["resources"]["limits"]["nvidia.com/gpu"])
    result = repo.diff("--base", "main", "--format", "json")
    prod = environments(result)["prod"]
    gpus = prod["mpijob_gpus"]
    assert (gpus["before"], gpus["after"]) == (before * per_worker, (before + 2) * per_worker)
    assert (before + 2) * per_worker > prod["gpu_capacity"]["after"]  # as generated: 2 workers fill the group
    assert "not enough GPUs" in {n["title"] for n in prod["notices"] if n["resource"] == "GPU capacity"}


def launcher_image(job) -> str:
    return job.doc["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["image"]


def test_flux_images_name_prefix_and_common_metadata(repo):
    built = launcher_image(find(repo, "MPIJob", "horovod-train")).rpartition(":")[0]
    set_spec(
        repo,
        "training",
        images=[{"name": built, "newName": "registry.example/trainer", "newTag": "v9"}],
        namePrefix="p-",
        nameSuffix="-s",
        commonMetadata={"labels": {"team": "ml"}, "annotations": {"owner": "ml-platform"}},
    )

    job = find(repo, "MPIJob", "p-horovod-train-s")

    assert launcher_image(job) == "registry.example/trainer:v9"
    assert job.labels["team"] == "ml" and job.annotations["owner"] == "ml-platform"
    assert "team" not in find(repo, "HelmRelease", "aws-fsx-csi-driver").labels


def test_flux_components_are_added(repo):
    repo.write_yaml(
        "overlays/prod/extra/kustomization.yaml",
        {
            "apiVersion": "kustomize.config.k8s.io/v1alpha1",
            "kind": "Component",
            "commonLabels": {"component": "on"},
        },
    )
    set_spec(repo, "training", components=["../extra"])

    assert find(repo, "MPIJob", "horovod-train").labels["component"] == "on"


def test_a_folder_without_kustomization_with_a_non_manifest_fails_in_one_line(repo):
    repo.write_yaml("clusters/prod/notes.yaml", {"title": "not an object", "password": "hunter2"})

    with pytest.raises(InputError) as error:
        environment(repo)

    # kustomize-controller's own message (fluxcd/pkg/kustomize scanManifests), on one line
    assert str(error.value) == (
        "clusters/prod: kustomize build failed: failed to decode Kubernetes YAML from clusters/prod/notes.yaml: "
        "missing Resource metadata"
    )


def add_generator(repo: GitRepo, files: list[str]) -> None:
    kustomization = repo.read_yaml("overlays/prod/training/kustomization.yaml")
    kustomization["configMapGenerator"] = [{"name": "leak", "namespace": "training", "files": files}]
    repo.write_yaml("overlays/prod/training/kustomization.yaml", kustomization)


@pytest.mark.parametrize("reference", ["/etc/passwd", "../../../../../../../../etc/passwd", "p=/etc/hostname"])
def test_files_outside_the_repository_are_refused_and_never_read(repo, reference):
    add_generator(repo, [reference])

    with pytest.raises(InputError) as error:
        environment(repo)

    message = str(error.value)
    assert message.startswith("overlays/prod/training/kustomization.yaml: configMapGenerator.files")
    assert "outside the repository" in message and "root:" not in message


def test_a_symlink_leading_outside_is_not_read(repo, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("s3cr3t-value\n")
    os.symlink(secret, repo.root / "overlays/prod/training/secret.txt")
    add_generator(repo, ["secret.txt"])

    with pytest.raises(InputError) as error:
        environment(repo)

    assert "secret.txt" in str(error.value) and "s3cr3t" not in str(error.value)


def test_a_relative_file_is_read(repo):
    (repo.root / "overlays/prod/training/settings.txt").write_text("inside\n")
    add_generator(repo, ["settings.txt"])

    config = [m for m in environment(repo).objects if m.kind == "ConfigMap" and m.name.startswith("leak-")]

    assert [c.doc["data"] for c in config] == [{"settings.txt": "inside\n"}]


# --- what source-controller leaves out of the artifact Flux builds from (flux_source.py) ------------------


def test_a_symlink_inside_the_repository_is_not_in_the_artifact_so_the_build_fails_in_one_line(repo):
    (repo.root / "overlays/prod/training/settings.txt").write_text("inside\n")
    os.symlink("settings.txt", repo.root / "overlays/prod/training/link.txt")
    add_generator(repo, ["settings.txt", "link.txt"])

    with pytest.raises(InputError) as error:
        environment(repo)

    assert str(error.value) == (
        "overlays/prod/training/kustomization.yaml: configMapGenerator.files 'link.txt' is not in the artifact "
        "Flux builds from (overlays/prod/training/link.txt is a symbolic link, and source-controller leaves links "
        "out); the Kustomization fails on the cluster"
    )


def test_a_file_sourceignore_excludes_is_not_applied_and_one_a_build_names_fails_in_one_line(repo):
    repo.write_yaml("clusters/prod/draft.yaml", BACKDOOR)
    (repo.root / "overlays/prod/training/notes.txt").write_text("draft\n")
    assert find(repo, "ClusterRoleBinding", "backdoor").file == "clusters/prod/draft.yaml"  # without the rule
    (repo.root / ".sourceignore").write_text("# drafts stay out of the cluster\n/clusters/prod/draft.yaml\n")
    assert [m for m in environment(repo).objects if m.kind == "ClusterRoleBinding"] == []
    (repo.root / "overlays/prod/training/.sourceignore").write_text("*.txt\n")  # a folder's own, scoped to it
    add_generator(repo, ["notes.txt"])

    with pytest.raises(InputError) as error:
        environment(repo)

    assert "'notes.txt' is not in the artifact Flux builds from (overlays/prod/training/.sourceignore excludes it " in (
        str(error.value)
    )


def test_without_sourceignore_source_controller_leaves_out_its_defaults(repo):
    (repo.root / "overlays/prod/training/logo.png").write_bytes(b"\x89PNG")
    add_generator(repo, ["logo.png"])

    with pytest.raises(InputError, match=r"source-controller leaves out \*\.png\); the Kustomization fails"):
        environment(repo)
    (repo.root / ".sourceignore").write_text("/overlays/prod/eksctl/\n")  # a rule of its own: no defaults then
    config = [m for m in environment(repo).objects if m.kind == "ConfigMap" and m.name.startswith("leak-")]
    assert list(config[0].doc["binaryData"]) == ["logo.png"]


def test_a_kustomization_outside_the_artifact_and_the_eksctl_overlays_is_not_checked(repo):
    deploy = repo.root / "trainer" / "deploy"
    deploy.mkdir(parents=True)
    (deploy / "kustomization.yaml").write_text("resources:\n  - github.com/org/repo/deploy\n")
    with pytest.raises(InputError, match="remote base"):
        environment(repo)  # in the artifact: Flux would read it
    (repo.root / ".sourceignore").write_text("/trainer/\n")
    assert environment(repo).cluster_config is not None  # neither Flux nor eksctl builds it


def test_an_ignore_file_that_is_a_link_to_a_device_is_not_read(repo):
    os.symlink("/dev/zero", repo.root / "clusters" / ".sourceignore")  # a link is not in the artifact either
    assert find(repo, "MPIJob", "horovod-train").name == "horovod-train"


def test_a_flux_path_the_artifact_leaves_out_says_so(repo):
    (repo.root / ".sourceignore").write_text("/overlays/*/eksctl/\n")
    set_spec(repo, "training", path="./overlays/prod/eksctl")

    with pytest.raises(InputError) as error:
        environment(repo)

    assert str(error.value).endswith(
        "points at 'overlays/prod/eksctl', which is not in the artifact Flux builds from "
        "(.sourceignore excludes it (/overlays/*/eksctl/))"
    )
    assert environment(repo, "dev").cluster_config is not None  # eksctl reads the checkout: still rendered


@pytest.mark.parametrize("path", ["/etc", "../../outside", "./overlays/../../x"])
def test_a_flux_path_outside_the_repository_is_one_line(repo, path):
    set_spec(repo, "training", path=path)

    with pytest.raises(InputError) as error:
        environment(repo)

    assert f"spec.path {path!r} is outside the repository" in str(error.value)


@pytest.mark.parametrize(
    "base", ["https://github.com/org/repo//deploy?ref=v1", "github.com/org/repo/deploy", "git@github.com:o/r.git"]
)
def test_remote_bases_are_refused_offline(repo, base):
    kustomization = repo.read_yaml("overlays/prod/training/kustomization.yaml")
    kustomization["resources"].append(base)
    repo.write_yaml("overlays/prod/training/kustomization.yaml", kustomization)

    with pytest.raises(InputError) as error:
        environment(repo)

    assert str(error.value) == (
        f"overlays/prod/training/kustomization.yaml: resources {base!r} is a remote base; "
        "builds here are offline, vendor it"
    )


def test_repository_root_is_found_from_a_sub_folder(repo):
    assert repository_root(repo.root / "overlays" / "prod") == repo.root


# --- a repository laid out as fluxcd's kustomize-helm example (written here, not copied) ------------


def flux_kustomization(name: str, path: str, depends_on: list[str] = (), **spec) -> dict:
    doc = nested(name, path)
    doc["spec"].update(spec)
    if depends_on:
        doc["spec"]["dependsOn"] = [{"name": d} for d in depends_on]
    return doc


def write_all(path: Path, docs: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False, explicit_start=True))


def flux_example(root: Path, apps_depend_on: str = "infra-configs") -> Path:
    root.mkdir(parents=True)
    shutil.copy2(REPO / ".yamllint", root / ".yamllint")
    for env in ("production", "staging"):
        cluster = root / "clusters" / env
        write_all(
            cluster / "flux-system" / "gotk-sync.yaml",
            [
                {
                    "apiVersion": "source.toolkit.fluxcd.io/v1",
                    "kind": "GitRepository",
                    "metadata": {"name": "flux-system", "namespace": "flux-system"},
                    "spec": {
                        "interval": "1m0s",
                        "ref": {"branch": "main"},
                        "secretRef": {"name": "flux-system"},
                        "url": "ssh://git@github.com/example/fleet",
                    },
                },
                flux_kustomization("flux-system", f"./clusters/{env}", interval="10m0s"),
            ],
        )
        write_all(cluster / "flux-system" / "kustomization.yaml", [{"resources": ["gotk-sync.yaml"]}])
        write_all(
            cluster / "infrastructure.yaml",
            [
                flux_kustomization("infra-controllers", "./infrastructure/controllers", wait=True),
                flux_kustomization("infra-configs", "./infrastructure/configs", ["infra-controllers"]),
            ],
        )
        write_all(cluster / "apps.yaml", [flux_kustomization("apps", f"./apps/{env}", [apps_depend_on])])
        write_all(
            root / "apps" / env / "kustomization.yaml",
            [{"namespace": "podinfo", "resources": ["../base/podinfo"]}],
        )
    write_all(
        root / "infrastructure" / "controllers" / "ingress.yaml",
        [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ingress"}},
            {
                "apiVersion": "source.toolkit.fluxcd.io/v1",
                "kind": "HelmRepository",
                "metadata": {"name": "ingress", "namespace": "ingress"},
                "spec": {"interval": "24h", "url": "https://kubernetes.github.io/ingress-nginx"},
            },
        ],
    )
    write_all(root / "infrastructure" / "controllers" / "kustomization.yaml", [{"resources": ["ingress.yaml"]}])
    write_all(
        root / "infrastructure" / "configs" / "settings.yaml",
        [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "settings", "namespace": "ingress"},
                "data": {"mode": "on"},
            }
        ],
    )
    write_all(
        root / "apps" / "base" / "podinfo" / "namespace.yaml",
        [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "podinfo"}}],
    )
    write_all(root / "apps" / "base" / "podinfo" / "kustomization.yaml", [{"resources": ["namespace.yaml"]}])
    return root


def validate_json(root: Path, monkeypatch, capsys) -> tuple[int, dict]:
    from eks_gpu_gitops.cli import validate

    monkeypatch.chdir(root)
    code = validate.main(["--format", "json", "--quiet"])
    return code, json.loads(capsys.readouterr().out)


def test_the_flux_example_layout_is_a_repository_and_renders(tmp_path):
    root = flux_example(tmp_path / "fleet")

    production = render_repository(repository_root(root / "apps" / "base"), ["production"])[0]

    found = {k.name: k for k in production.kustomizations}
    assert sorted(found) == ["apps", "flux-system", "infra-configs", "infra-controllers"]
    assert found["flux-system"].manifest.file == "clusters/production/flux-system/gotk-sync.yaml"
    assert [m.resource for m in found["flux-system"].objects] == ["GitRepository/flux-system/flux-system"]
    assert [m.resource for m in found["apps"].objects] == ["Namespace/podinfo"]
    assert plan.source_folders(root) == ["apps", "clusters", "infrastructure"]  # what yamllint reads


def test_the_flux_example_layout_runs_every_flux_rule(tmp_path, monkeypatch, capsys):
    code, report = validate_json(flux_example(tmp_path / "fleet"), monkeypatch, capsys)

    assert [n for n in report["notes"] if "Flux" in n or "flux" in n] == []
    assert [f["rule"] for f in report["findings"] if f["severity"] == "error"] == []
    assert code == 0


def test_the_flux_example_layout_trips_a_flux_rule(tmp_path, monkeypatch, capsys):
    code, report = validate_json(flux_example(tmp_path / "fleet", apps_depend_on="infra-config"), monkeypatch, capsys)

    missing = [(f["env"], f["resource"]) for f in report["findings"] if f["rule"] == "dependency-missing"]
    assert code == 1
    assert sorted(missing) == [
        ("production", "Kustomization/flux-system/apps"),
        ("staging", "Kustomization/flux-system/apps"),
    ]


# What `flux bootstrap --path=clusters/prod` commits (flux2 v2.9.5, pkg/manifestgen/sync and install): the
# controllers and CRDs in gotk-components.yaml, the GitRepository and root Kustomization in gotk-sync.yaml, and a
# kustomization.yaml listing both, written without a `---` line. A small stand-in with the same shapes.
GOTK_COMPONENTS = """---
# This manifest was generated by flux. DO NOT EDIT.
apiVersion: v1
kind: Namespace
metadata:
  name: flux-system
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          digest:
            description: Digest is the digest of the file in the form of '<algorithm>:<checksum>', LONG
            type: string
"""
GOTK_SYNC = """---
apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 1m0s
  ref:
    branch: main
  secretRef:
    name: flux-system
  url: ssh://git@github.com/example-org/fleet
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata:
  name: flux-system
  namespace: flux-system
spec:
  interval: 10m0s
  path: ./clusters/prod
  prune: true
  sourceRef:
    kind: GitRepository
    name: flux-system
"""


def bootstrap(repo: GitRepo, folder: str = "clusters/prod/flux-system") -> None:
    shutil.copyfile(REPO / ".yamllint", repo.root / ".yamllint")
    (repo.root / folder).mkdir(parents=True)
    long_line = "as the controller writes it on every reconcile of the object (a line longer than 140 columns)."
    (repo.root / folder / "gotk-components.yaml").write_text(GOTK_COMPONENTS.replace("LONG", long_line))
    (repo.root / folder / "gotk-sync.yaml").write_text(GOTK_SYNC)
    (repo.root / folder / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "resources:\n- gotk-components.yaml\n- gotk-sync.yaml\n"
    )


def test_a_bootstrapped_environment_renders_flux_itself_without_false_alarms(repo, monkeypatch, capsys):
    bootstrap(repo)
    repo.commit("flux bootstrap")

    found = kustomizations(repo)
    assert list(found) == ["flux-system", "infrastructure", "training"]
    assert found["flux-system"].manifest.file == "clusters/prod/flux-system/gotk-sync.yaml"
    assert [m.resource for m in found["flux-system"].objects] == [
        "Namespace/flux-system",
        "CustomResourceDefinition/widgets.example.com",
        "GitRepository/flux-system/flux-system",
    ]
    code, report = validate_json(repo.root, monkeypatch, capsys)
    from_flux = [(f["rule"], f["file"]) for f in report["findings"] if "flux-system/" in f["file"]]
    assert (code, from_flux) == (0, []), report["findings"]


def test_the_same_long_line_outside_the_bootstrap_folder_is_linted(repo, monkeypatch, capsys):
    bootstrap(repo, "clusters/prod/platform")
    repo.commit("a hand-written copy")

    code, report = validate_json(repo.root, monkeypatch, capsys)

    linted = [(f["rule"], f["file"], f["line"]) for f in report["findings"] if "platform/" in f["file"]]
    assert linted == [
        ("yaml-lint", "clusters/prod/platform/gotk-components.yaml", 25),  # line-length
        ("yaml-lint", "clusters/prod/platform/kustomization.yaml", 1),  # document-start
    ]
