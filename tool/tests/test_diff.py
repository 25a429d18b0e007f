"""scripts/diff on real git repositories made from this repository's manifests.

Each test commits the manifests as generated to `main`, changes something the way a pull
request would, and checks what diff reports. Real git, real kustomize, no mocks.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))  # diff_fixtures sits next to this file
from diff_fixtures import GitRepo, Result, copy_manifests, environments, objects  # noqa: E402

from eks_gpu_gitops.diff import (
    impact,  # noqa: E402
    sides,  # noqa: E402
)
from eks_gpu_gitops.render.repository import render_repository  # noqa: E402

MPIJOB = "MPIJob training/horovod-train"
TENSORBOARD = "Deployment training/tensorboard"
PVC = "PersistentVolumeClaim training/fsx-training"


@pytest.fixture
def repo(tmp_path) -> GitRepo:
    return GitRepo.create(tmp_path / "repo")


def rendered(repo: GitRepo, env: str) -> list:
    """The objects of one environment at the repository's current state."""
    [environment] = render_repository(repo.root, [env])
    return environment.objects


def find(repo: GitRepo, env: str, kind: str, name: str) -> dict:
    return next(m.doc for m in rendered(repo, env) if m.kind == kind and m.name == name)


def notice_titles(env: dict, resource: str) -> dict[str, str]:
    return {n["title"]: n["severity"] for n in env["notices"] if n["resource"] == resource}


def checkout_state(repo: GitRepo) -> list[str]:
    """What a user's checkout is: index, working tree status, HEAD, branches and worktrees."""
    return [
        repo.git(*args)
        for args in (
            ("status", "--porcelain=v2"),
            ("ls-files", "--stage"),
            ("rev-parse", "HEAD"),
            ("branch", "--list"),
            ("worktree", "list"),
        )
    ]


def test_no_change_reports_nothing_and_leaves_the_checkout_alone(repo, tmp_path):
    # A user mid-work: one change staged, one not. diff must not disturb either.
    repo.path("overlays/dev/training/notes.txt").write_text("unstaged\n")
    repo.path("clusters/dev/notes.txt").write_text("staged\n")
    repo.git("add", "clusters/dev/notes.txt")
    state = checkout_state(repo)
    scratch = tmp_path / "scratch"
    scratch.mkdir()

    result = repo.cli("--base", "main", "--exit-code", env={"TMPDIR": str(scratch)})

    assert (result.code, result.err) == (0, "")
    assert "No changes in the rendered manifests." in result.out
    assert checkout_state(repo) == state
    assert list(scratch.iterdir()) == [], "the temporary worktree was not removed"


def test_scaling_workers_shows_the_gpu_change_and_the_running_job(repo):
    job = find(repo, "prod", "MPIJob", "horovod-train")
    workers = job["spec"]["mpiReplicaSpecs"]["Worker"]
    per_worker = int(workers["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])
    replicas = workers["replicas"]
    repo.add_patch(
        "overlays/prod/training",
        {
            "target": {"kind": "MPIJob", "name": "horovod-train"},
            "patch": yaml.safe_dump(
                [{"op": "replace", "path": "/spec/mpiReplicaSpecs/Worker/replicas", "value": replicas + 2}]
            ),
        },
    )

    result = repo.diff("--base", "main", "--format", "json", "--exit-code")

    assert result.code == 1, result.err
    envs = environments(result)
    assert envs["dev"]["status"] == "unchanged"
    prod = envs["prod"]
    assert prod["counts"] == {"added": 0, "changed": 1, "moved": 0, "removed": 0}
    assert (prod["mpijob_gpus"]["before"], prod["mpijob_gpus"]["after"]) == (
        replicas * per_worker,
        (replicas + 2) * per_worker,
    )
    diff = objects(prod)[MPIJOB]["diff"]
    assert f"-      replicas: {replicas}\n+      replicas: {replicas + 2}" in diff
    titles = notice_titles(prod, MPIJOB)
    assert titles == {"running job keeps its spec": "warning"}
    # As generated, the queue's GPU quota is what the gpu group holds at maxSize; scaling a job changes neither.
    capacity = prod["gpu_capacity"]["after"]
    assert prod["gpu_quota"]["before"] == prod["gpu_quota"]["after"] == capacity
    assert "GPU capacity changes" not in notice_titles(prod, "GPU capacity")
    # The job is queued: it needs the GPUs alone, whatever else waits in the queue.
    assert ("not enough GPUs" in notice_titles(prod, "GPU capacity")) == ((replicas + 2) * per_worker > capacity)


def test_growing_the_gpu_group_shows_capacity_quota_and_gpu_hours(repo):
    settings = repo.read_yaml("overlays/prod/settings.yaml")
    nodes = settings["gpuNodeGroup"]["maxSize"]
    settings["gpuNodeGroup"]["maxSize"] = nodes + 1
    [flavor] = [f for f in settings["queue"]["resourceGroups"][0]["flavors"] if f["name"] == "gpu"]
    [quota] = [r for r in flavor["resources"] if r["name"] == "nvidia.com/gpu"]
    per_node = quota["nominalQuota"] // nodes
    quota["nominalQuota"] += per_node
    repo.write_yaml("overlays/prod/settings.yaml", settings)

    result = repo.diff("--base", "main", "--format", "json")

    prod = environments(result)["prod"]
    before, after = nodes * per_node, (nodes + 1) * per_node
    for figure in ("gpu_capacity", "gpu_quota"):
        assert (prod[figure]["before"], prod[figure]["after"]) == (before, after), figure
    assert prod["gpu_quota"]["after_detail"] == f"training: gpu {after}"
    [message] = [n["message"] for n in prod["notices"] if n["id"] == "gpu-capacity-changed"]
    assert message == (
        f"GPU node capacity {before} -> {after}, GPU quota {before} -> {after}: "
        f"+{per_node * 24} GPU-hours per day at max size."
    )


def test_scaling_workers_in_markdown_puts_the_summary_first(repo):
    job = find(repo, "prod", "MPIJob", "horovod-train")
    replicas = job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]
    repo.add_patch(
        "overlays/prod/training",
        {
            "target": {"kind": "MPIJob"},
            "patch": yaml.safe_dump(
                [{"op": "replace", "path": "/spec/mpiReplicaSpecs/Worker/replicas", "value": replicas + 1}]
            ),
        },
    )

    result = repo.diff("--base", "main", "--format", "markdown")

    body = result.out
    assert result.code == 0
    table = body.index("| Environment | Objects | MPIJob GPUs | GPU quota | GPU node capacity | Notices |")
    assert table < body.index("### Notices") < body.index("<details><summary><b>prod</b>")
    assert "| **prod** | ~1 |" in body and "→" in body
    assert f"<details><summary>~ <code>{MPIJOB}</code>" in body
    assert "```diff\n@@" in body
    assert "<b>dev</b>" not in body


def test_changing_the_image_changes_each_workload_of_the_image_and_nothing_else(repo):
    kustomization = repo.read_yaml("overlays/base/training/kustomization.yaml")
    [image] = [i for i in kustomization["images"] if i["name"] == "trainer"]
    old_tag = str(image["newTag"])
    image["newTag"] = "9.9.9-test"
    repo.write_yaml("overlays/base/training/kustomization.yaml", kustomization)
    repo.commit("bump the trainer image")

    result = repo.diff("--base", "main~1", "--head", "main", "--format", "json")

    for name, env in environments(result).items():
        assert env["status"] == "changed", name
        # The MPIJob, and TensorBoard, which runs the same image.
        assert sorted(objects(env)) == sorted([MPIJOB, TENSORBOARD]), name
        for resource in (MPIJOB, TENSORBOARD):
            diff = objects(env)[resource]["diff"]
            assert f":{old_tag}" in diff and ":9.9.9-test" in diff
            assert all(
                line.startswith(("-", "+")) is ("image:" in line)
                for line in diff.splitlines()
                if not line.startswith("@@") and line.strip()
            ), diff


def test_head_ref_ignores_the_working_tree(repo):
    repo.add_patch(
        "overlays/dev/training",
        {
            "target": {"kind": "MPIJob"},
            "patch": yaml.safe_dump([{"op": "replace", "path": "/spec/runPolicy/backoffLimit", "value": 9}]),
        },
    )
    result = repo.diff("--base", "main", "--head", "main", "--exit-code")
    assert (result.code, result.err) == (0, "")
    assert "No changes" in result.out


def test_adding_an_environment_adds_all_its_objects(repo):
    shutil.copytree(repo.path("overlays/dev"), repo.path("overlays/qa"))
    repo.path("clusters/qa").mkdir()
    for source in repo.path("clusters/dev").glob("*.yaml"):
        text = source.read_text().replace("./overlays/dev/", "./overlays/qa/")
        repo.path(f"clusters/qa/{source.name}").write_text(text)
    expected = len(rendered(repo, "dev")) + 1  # + the eksctl ClusterConfig

    result = repo.diff("--base", "main", "--format", "json")

    envs = environments(result)
    assert envs["dev"]["status"] == envs["prod"]["status"] == "unchanged"
    qa = envs["qa"]
    assert qa["status"] == "added"
    assert qa["counts"] == {"added": expected, "changed": 0, "moved": 0, "removed": 0}
    assert {obj["status"] for obj in qa["objects"]} == {"added"}
    assert "new environment" in notice_titles(qa, "environment qa")
    [dev] = render_repository(repo.root, ["dev"])
    dev_figures = dict(zip(("mpijob_gpus", "gpu_quota", "gpu_capacity"), impact.figures(dev, dev), strict=True))
    for figure in ("mpijob_gpus", "gpu_quota"):
        assert qa[figure]["before"] == 0 and qa[figure]["after"] == dev_figures[figure].after, figure
        # dev's inputs are the same on both sides: not rendered, its figures not known
        assert envs["dev"][figure]["before"] is envs["dev"][figure]["after"] is None, figure


def remove_the_claim(repo: GitRepo) -> None:
    base = repo.read_yaml("overlays/base/training/kustomization.yaml")
    base["resources"].remove("pvc.yaml")
    repo.write_yaml("overlays/base/training/kustomization.yaml", base)
    for env in ("dev", "prod"):
        folder = f"overlays/{env}/training"
        kustomization = repo.read_yaml(f"{folder}/kustomization.yaml")
        kustomization["patches"] = [p for p in kustomization.get("patches", []) if p.get("path") != "pvc.yaml"]
        repo.write_yaml(f"{folder}/kustomization.yaml", kustomization)


def test_deleting_the_pvc_warns_where_data_is_lost(repo):
    expected = {}
    for env in ("dev", "prod"):
        claim = find(repo, env, "PersistentVolumeClaim", "fsx-training")
        storage_class = find(repo, env, "StorageClass", claim["spec"]["storageClassName"])
        policy = storage_class.get("reclaimPolicy", "Delete")
        expected[env] = ("data loss", "danger") if policy == "Delete" else ("volume released", "warning")
    # As generated, dev's class deletes the file system with its claim and prod's retains it.
    remove_the_claim(repo)

    result = repo.diff("--base", "main", "--format", "json")

    for env_name, (title, severity) in expected.items():
        env = environments(result)[env_name]
        assert objects(env)[PVC]["status"] == "removed"
        assert notice_titles(env, PVC) == {title: severity}


def move_dev_training_to(repo: GitRepo, namespace: str, how: str) -> None:
    if how == "overlay":  # the overlay's `namespace:`
        kustomization = repo.read_yaml("overlays/dev/training/kustomization.yaml")
        kustomization["namespace"] = namespace
        repo.write_yaml("overlays/dev/training/kustomization.yaml", kustomization)
        return
    # The Flux Kustomization's targetNamespace.
    documents = list(yaml.safe_load_all(repo.path("clusters/dev/training.yaml").read_text()))
    [training] = [d for d in documents if d and d["metadata"]["name"] == "training"]
    training["spec"]["targetNamespace"] = namespace
    repo.path("clusters/dev/training.yaml").write_text(yaml.safe_dump_all(documents, sort_keys=False))


@pytest.mark.parametrize("how", ["overlay", "targetNamespace"])
def test_a_namespace_rename_moves_each_object_and_still_deletes_the_old_namespace_and_its_claim(repo, how):
    namespaced = {
        (m.kind, m.name) for m in rendered(repo, "dev") if m.namespace == "training" and m.source == "training"
    }
    claim = find(repo, "dev", "PersistentVolumeClaim", "fsx-training")
    assert find(repo, "dev", "StorageClass", claim["spec"]["storageClassName"]).get("reclaimPolicy", "Delete") == (
        "Delete"
    )
    move_dev_training_to(repo, "ml2", how)

    result = repo.diff("--base", "main", "--format", "json", "--exit-code")

    assert result.code == 1, result.err
    dev = environments(result)["dev"]
    moved = {(o["kind"], o["name"]): o for o in dev["objects"] if o["status"] == "moved"}
    assert set(moved) == namespaced and len(moved) == dev["counts"]["moved"] == 5
    assert all(o["namespace_move"] == {"from": "training", "to": "ml2"} for o in moved.values())
    assert all("-  namespace: training\n+  namespace: ml2" in o["diff"] for o in moved.values())
    # None of them is also shown as removed or added; the Namespace itself is.
    others = {(o["status"], o["kind"], o["name"]) for o in dev["objects"] if o["status"] in ("added", "removed")}
    assert not {(kind, name) for _, kind, name in others} & namespaced
    assert {("removed", "Namespace", "training"), ("added", "Namespace", "ml2")} <= others
    # What the old namespace takes with it: the namespace and the claim notices agree on the volume.
    fate = "its FSx for Lustre file system and all data on it are deleted (reclaimPolicy Delete)"
    notices = {n["id"]: n for n in dev["notices"]}
    assert notices["namespace-deleted"]["resource"] == "Namespace training"
    assert f"PersistentVolumeClaim/fsx-training is deleted, and {fate}" in notices["namespace-deleted"]["message"]
    assert notices["claim-deleted"]["resource"] == PVC and fate in notices["claim-deleted"]["message"]
    assert environments(result)["prod"]["status"] == "unchanged"

    shown = repo.diff("--base", "main").out
    assert "> PersistentVolumeClaim fsx-training: namespace training -> ml2  (Kustomization training" in shown
    assert "- PersistentVolumeClaim training/fsx-training" not in shown


def test_a_claim_added_in_a_new_namespace_while_the_old_one_stays_is_added(repo):
    claim = repo.read_yaml("overlays/base/training/pvc.yaml")
    claim["metadata"]["namespace"] = "ml2"
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml2"}}
    repo.add_resource("overlays/dev/training", "ml2.yaml", namespace)
    repo.add_resource("overlays/dev/training", "ml2-claim.yaml", claim)

    result = repo.diff("--base", "main", "--format", "json")

    dev = environments(result)["dev"]
    assert dev["counts"] == {"added": 2, "changed": 0, "moved": 0, "removed": 0}
    assert objects(dev)["PersistentVolumeClaim ml2/fsx-training"]["namespace_move"] is None


def test_a_claim_flux_does_not_prune_is_left_on_the_cluster(repo):
    claim = repo.read_yaml("overlays/base/training/pvc.yaml")
    claim["metadata"]["annotations"] = {"kustomize.toolkit.fluxcd.io/prune": "disabled"}
    repo.write_yaml("overlays/base/training/pvc.yaml", claim)
    repo.commit("keep the claim when it leaves Git")
    remove_the_claim(repo)

    result = repo.diff("--base", "main", "--format", "json")

    for env_name in ("dev", "prod"):
        env = environments(result)[env_name]
        assert objects(env)[PVC]["status"] == "removed"
        assert notice_titles(env, PVC) == {"left on the cluster": "info"}


def secret_manifest(api_key: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "tracking", "namespace": "training"},
        "type": "Opaque",
        "stringData": {"api-key": api_key, "user": "alice"},
    }


def env_patch(token: str) -> dict:
    value = [{"name": "TRACKING_TOKEN", "value": token}, {"name": "LOG_LEVEL", "value": "debug"}]
    return {
        "target": {"kind": "MPIJob"},
        "patch": yaml.safe_dump(
            [{"op": "add", "value": value, "path": "/spec/mpiReplicaSpecs/Launcher/template/spec/containers/0/env"}]
        ),
    }


def test_secret_values_never_appear(repo):
    folder = "overlays/dev/training"
    repo.add_resource(folder, "secret.yaml", secret_manifest("first-api-key-value"))
    repo.add_patch(folder, env_patch("first-token-value"))
    repo.commit("add a tracking secret")
    repo.write_yaml(f"{folder}/secret.yaml", secret_manifest("second-api-key-value"))
    kustomization = repo.read_yaml(f"{folder}/kustomization.yaml")
    kustomization["patches"][-1] = env_patch("second-token-value")
    repo.write_yaml(f"{folder}/kustomization.yaml", kustomization)

    outputs = {
        fmt: repo.diff("--base", "main", "--env", "dev", "--format", fmt).out for fmt in ("text", "markdown", "json")
    }
    added = repo.diff("--base", "main~1", "--head", "main", "--env", "dev", "--format", "json")

    for text in [*outputs.values(), added.out]:
        for value in (
            "first-api-key-value",
            "second-api-key-value",
            "first-token-value",
            "second-token-value",
            "alice",
        ):
            assert value not in text
    changed = objects(environments(Result(0, outputs["json"], ""))["dev"])
    secret_diff = changed["Secret training/tracking"]["diff"]
    assert "-  api-key: '*** (before)'\n+  api-key: '*** (after)'" in secret_diff
    assert "   user: '***'" in secret_diff  # unchanged: masked, and not shown as a change
    job_diff = changed[MPIJOB]["diff"]
    assert "-              value: '*** (before)'\n+              value: '*** (after)'" in job_diff
    # LOG_LEVEL is no credential: shown as it is, and as unchanged context only.
    assert "               value: debug" in job_diff
    assert not [line for line in job_diff.splitlines() if line.startswith(("+", "-")) and "debug" in line]
    new = objects(environments(added)["dev"])["Secret training/tracking"]
    assert new["status"] == "added" and "+  api-key: '***'" in new["diff"]


def launcher_secrets_patch(api_key: str, password: str) -> dict:
    container = "/spec/mpiReplicaSpecs/Launcher/template/spec/containers/0"
    database = f"postgresql://trainer:{password}@results-db:5432/runs"
    operations = [
        {"op": "add", "path": f"{container}/args/-", "value": "-x"},
        {"op": "add", "path": f"{container}/args/-", "value": f"WANDB_API_KEY={api_key}"},
        {"op": "add", "path": f"{container}/env", "value": [{"name": "RESULTS_DB", "value": database}]},
    ]
    return {"target": {"kind": "MPIJob"}, "patch": yaml.safe_dump(operations)}


def test_url_passwords_and_exported_keys_never_appear(repo):
    folder = "overlays/dev/training"
    repo.add_patch(folder, launcher_secrets_patch("first-wandb-key", "first-db-password"))
    repo.commit("log to wandb and a results database")
    kustomization = repo.read_yaml(f"{folder}/kustomization.yaml")
    kustomization["patches"][-1] = launcher_secrets_patch("second-wandb-key", "second-db-password")
    repo.write_yaml(f"{folder}/kustomization.yaml", kustomization)

    outputs = [repo.diff("--base", "main", "--env", "dev", "--format", fmt).out for fmt in ("text", "markdown", "json")]
    added = repo.diff("--base", "main~1", "--head", "main", "--env", "dev", "--format", "json").out

    for text in [*outputs, added]:
        for value in ("first-wandb-key", "second-wandb-key", "first-db-password", "second-db-password"):
            assert value not in text
    job_diff = objects(environments(Result(0, outputs[2], ""))["dev"])[MPIJOB]["diff"]
    assert "-            - WANDB_API_KEY=*** (before)\n+            - WANDB_API_KEY=*** (after)" in job_diff
    assert "+              value: postgresql://trainer:*** (after)@results-db:5432/runs" in job_diff
    assert "+            - WANDB_API_KEY=***" in objects(environments(Result(0, added, ""))["dev"])[MPIJOB]["diff"]


def reformat(value):
    """The same data with every mapping's keys in reverse order."""
    if isinstance(value, dict):
        return {key: reformat(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [reformat(item) for item in value]
    return value


def test_comment_and_formatting_changes_show_nothing(repo):
    files = sorted(repo.root.glob("clusters/**/*.yaml")) + sorted(repo.root.glob("overlays/**/*.yaml"))
    for path in files:
        documents = [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]
        dumped = [
            yaml.safe_dump(reformat(doc), sort_keys=False, default_flow_style=True, width=50) for doc in documents
        ]
        path.write_text("# reformatted for the test\n" + "---\n# a comment between documents\n".join(dumped))
    assert repo.git("diff", "--stat"), "nothing was reformatted"

    result = repo.diff("--base", "main", "--exit-code")

    assert (result.code, result.err) == (0, ""), result.out
    assert "No changes" in result.out


def test_unknown_base_ref_is_one_line_and_exit_2(repo):
    result = repo.cli("--base", "no-such-branch")
    assert result.code == 2
    assert result.out == ""
    assert result.err.count("\n") == 1 and "Traceback" not in result.err
    assert result.err.startswith("diff: unknown git ref 'no-such-branch'")


def test_a_side_that_does_not_render_is_one_line_and_exit_2(repo):
    kustomization = repo.read_yaml("overlays/dev/training/kustomization.yaml")
    kustomization["resources"].append("missing.yaml")
    repo.write_yaml("overlays/dev/training/kustomization.yaml", kustomization)

    result = repo.cli("--base", "main")

    # prod still renders: dev's error, then prod's diff, then the error on stderr (tests/test_robustness.py
    # has more).
    assert result.code == 2 and result.out.endswith("\nNo changes in the environments that render.\n")
    assert "No changes in the rendered manifests." not in result.out
    assert "  ERROR dev: working tree does not render: overlays/dev/training" in result.out
    assert result.err.count("\n") == 1 and "Traceback" not in result.err
    assert result.err.startswith("diff: working tree does not render: overlays/dev/training")
    assert result.err.endswith("(environment dev; its diff is left out)\n")
    assert str(repo.root) not in result.err


def test_outside_a_git_repository_is_one_line_and_exit_2(tmp_path):
    copy_manifests(tmp_path / "plain")
    result = GitRepo(tmp_path / "plain").cli("--base", "HEAD", env={"GIT_CEILING_DIRECTORIES": str(tmp_path)})
    assert result.code == 2 and result.out == ""
    assert result.err.count("\n") == 1 and "Traceback" not in result.err
    assert result.err.startswith("diff: ") and "is not a git repository" in result.err


def test_a_base_without_clusters_shows_every_environment_as_added(repo):
    # The pull request that adds the GitOps layout: its base has no clusters/ folder.
    empty_tree = repo.git("hash-object", "-w", "-t", "tree", "/dev/null")
    before_layout = repo.git("commit-tree", empty_tree, "-m", "before the GitOps layout")

    result = repo.diff("--base", before_layout, "--format", "json", "--exit-code")

    assert result.code == 1, result.err
    envs = environments(result)
    assert envs and {env["status"] for env in envs.values()} == {"added"}
    assert all(env["counts"]["added"] > 0 and env["counts"]["removed"] == 0 for env in envs.values())
    # The head side must have clusters/: that is still an error.
    reverse = repo.cli("--base", "main", "--head", before_layout)
    assert reverse.code == 2 and reverse.err.count("\n") == 1
    assert "does not render" in reverse.err and "no clusters/ folder" in reverse.err


def test_one_run_prints_text_and_writes_markdown_rendering_each_side_once(repo, tmp_path, monkeypatch):
    rendered_trees = []

    def counting_render(tree, names):
        rendered_trees.append(tree)
        return render_repository(tree, names)

    monkeypatch.setattr(sides, "render_repository", counting_render)
    repo.add_patch(
        "overlays/dev/training",
        {
            "target": {"kind": "MPIJob"},
            "patch": yaml.safe_dump([{"op": "replace", "path": "/spec/runPolicy/backoffLimit", "value": 9}]),
        },
    )
    markdown_file = tmp_path / "out" / "diff.md"

    result = repo.diff("--base", "main", "--markdown-output", str(markdown_file))

    assert result.code == 0 and len(rendered_trees) == 2
    assert result.out.startswith("Manifest diff: main (") and f"~ {MPIJOB}" in result.out
    assert result.err == f"diff: environments with changes: dev; wrote {markdown_file}\n"
    assert markdown_file.read_text() == repo.diff("--base", "main", "--format", "markdown").out
