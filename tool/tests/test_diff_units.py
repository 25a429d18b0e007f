"""Unit tests of diff's parts that need no git or kustomize: masking, impact figures,
notices about changes that cannot apply in place, and the markdown size cap."""

from __future__ import annotations

import copy
import json

import pytest
from diff_objects import (
    annotated,
    claim,
    cluster_config,
    cluster_queue,
    environment,
    manifest,
    mpijob,
    storage_class,
)

from eks_gpu_gitops.diff import impact, masking
from eks_gpu_gitops.diff.formats import json_format, markdown, text
from eks_gpu_gitops.diff.model import CHANGED, DANGER, INFO, WARNING, EnvironmentDiff, Key, ObjectChange, Report, Side
from eks_gpu_gitops.diff.pairing import unified
from eks_gpu_gitops.diff.report import build_report

# --- masking ---------------------------------------------------------------------------------------


def secret(**string_data) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s", "namespace": "n"},
        "data": {"token": "c2VjcmV0"},
        "stringData": dict(string_data),
    }


def pod(*env: tuple[str, str]) -> dict:
    container = {"name": "main", "image": "app", "env": [{"name": n, "value": v} for n, v in env]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [container]}}


@pytest.mark.parametrize(
    "name",
    [
        "PASSWORD",
        "db_password",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "GITHUB_TOKEN",
        "apiKey",
        "WANDB_API_KEY",
        "SERVICE_CREDENTIALS",
        "aws-session-token",
        "PRIVATE_KEY_PEM",
        "DATABASE_DSN",
    ],
)
def test_credential_names_are_recognised(name):
    assert masking.looks_like_credential(name)


@pytest.mark.parametrize("name", ["NCCL_DEBUG", "LOG_LEVEL", "EPOCHS", "HOROVOD_CYCLE_TIME", "PATH"])
def test_ordinary_names_are_not(name):
    assert not masking.looks_like_credential(name)


def test_every_secret_value_is_masked_and_the_original_is_untouched():
    doc = secret(password="hunter2")
    doc["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": '{"data": "x"}'}
    original = copy.deepcopy(doc)
    masked = masking.mask(doc)
    assert masked["data"] == {"token": "***"} and masked["stringData"] == {"password": "***"}
    assert masked["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] == "***"
    assert doc == original


def test_a_changed_value_is_marked_before_and_after_and_an_unchanged_one_is_not():
    before, after = masking.mask_pair(secret(password="old", user="u"), secret(password="new", user="u"))
    assert before["stringData"] == {"password": "*** (before)", "user": "***"}
    assert after["stringData"] == {"password": "*** (after)", "user": "***"}
    assert before["data"] == after["data"] == {"token": "***"}


def test_credential_env_values_are_masked_wherever_the_env_list_is():
    mpijob = {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": "j"},
        "spec": {
            "mpiReplicaSpecs": {"Launcher": {"template": pod(("AWS_SECRET_ACCESS_KEY", "abc"), ("EPOCHS", "20"))}}
        },
    }
    masked = masking.mask(mpijob)
    env = masked["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["env"]
    assert env == [{"name": "AWS_SECRET_ACCESS_KEY", "value": "***"}, {"name": "EPOCHS", "value": "20"}]


def test_env_values_pair_by_name_not_position():
    # A variable inserted in front must not make the unchanged secret look changed.
    before, after = masking.mask_pair(pod(("API_TOKEN", "same")), pod(("MODE", "x"), ("API_TOKEN", "same")))
    assert before["spec"]["containers"][0]["env"][0]["value"] == "***"
    assert after["spec"]["containers"][0]["env"][1]["value"] == "***"


def test_a_diff_of_a_changed_secret_says_so_without_the_values():
    text, additions, deletions = unified(secret(password="p4ssw0rd-old"), secret(password="p4ssw0rd-new"), 3)
    assert "p4ssw0rd" not in text and "c2VjcmV0" not in text
    assert "-  password: '*** (before)'" in text and "+  password: '*** (after)'" in text
    assert (additions, deletions) == (1, 1)


def test_a_password_in_a_url_is_masked_whatever_the_variable_is_called():
    before, after = masking.mask_pair(
        pod(("DATABASE_URL", "postgres://alice:hunter2@db:5432/runs")),
        pod(("DATABASE_URL", "postgres://alice:hunter3@db-2:5432/runs")),
    )
    assert before["spec"]["containers"][0]["env"][0]["value"] == "postgres://alice:*** (before)@db:5432/runs"
    assert after["spec"]["containers"][0]["env"][0]["value"] == "postgres://alice:*** (after)@db-2:5432/runs"
    same = masking.mask(pod(("CACHE", "redis://:pw@cache:6379"), ("SITE", "https://example.com:8443/x")))
    assert [e["value"] for e in same["spec"]["containers"][0]["env"]] == [
        "redis://:***@cache:6379",
        "https://example.com:8443/x",
    ]


def launcher(*command: str) -> dict:
    job = pod()
    job["spec"]["containers"][0]["command"] = list(command)
    return job


def test_mpirun_exports_of_credentials_are_masked_in_command_and_args():
    masked = masking.mask(
        launcher(
            "mpirun",
            "-x",
            "WANDB_API_KEY=k3y-value",
            "-x",
            "NCCL_DEBUG=INFO",
            "-x",
            "LD_LIBRARY_PATH",
            "python",
            "train.py",
        )
    )
    assert masked["spec"]["containers"][0]["command"] == [
        "mpirun",
        "-x",
        "WANDB_API_KEY=***",
        "-x",
        "NCCL_DEBUG=INFO",
        "-x",
        "LD_LIBRARY_PATH",
        "python",
        "train.py",
    ]
    script = "mpirun -np 4 -x HF_TOKEN=tok-value -x EPOCHS=3 -x DB=mysql://u:pw-value@db python train.py"
    masked = masking.mask(launcher("/bin/sh", "-c", script))
    assert masked["spec"]["containers"][0]["command"][2] == (
        "mpirun -np 4 -x HF_TOKEN=*** -x EPOCHS=3 -x DB=mysql://u:***@db python train.py"
    )


def test_a_changed_export_is_marked_and_an_unchanged_one_is_not():
    before, after = masking.mask_pair(
        launcher("sh", "-c", "mpirun -x API_TOKEN=one -np 2 run"),
        launcher("sh", "-c", "mpirun -x API_TOKEN=one -np 4 run"),
    )
    assert (before["spec"]["containers"][0]["command"][2], after["spec"]["containers"][0]["command"][2]) == (
        "mpirun -x API_TOKEN=*** -np 2 run",
        "mpirun -x API_TOKEN=*** -np 4 run",
    )
    text, _, _ = unified(launcher("mpirun", "-x", "API_TOKEN=one"), launcher("mpirun", "-x", "API_TOKEN=two"), 3)
    assert "one" not in text and "two" not in text
    assert "-    - API_TOKEN=*** (before)\n+    - API_TOKEN=*** (after)" in text


def test_a_config_map_keeps_its_ordinary_values():
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"mode": "visible"}}
    assert masking.mask(config) == config


# --- impact figures ----------------------------------------------------------------------------------


def test_mpijob_gpus_are_replicas_times_gpus_per_pod():
    assert impact.mpijob_gpus(manifest(mpijob(workers=4, gpus=8))) == (32, ["4 workers x 8"])
    assert impact.mpijob_gpus(manifest(mpijob(workers=2, gpus=1, launcher_gpus=1))) == (
        3,
        ["1 launcher x 1", "2 workers x 1"],
    )


def test_an_init_container_counts_when_it_needs_more_than_the_containers():
    job = mpijob(workers=2, gpus=1)
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    worker["initContainers"] = [{"name": "warmup", "image": "i", "resources": {"requests": {"nvidia.com/gpu": "4"}}}]
    assert impact.mpijob_gpus(manifest(job))[0] == 8


def test_gpu_capacity_is_max_size_times_gpus_per_instance():
    assert impact.gpu_capacity(manifest(cluster_config(4))) == (32, "gpu: 4 x p4d.24xlarge (8 GPUs)")
    assert impact.gpu_capacity(manifest(cluster_config(3, "g5.xlarge"))) == (3, "gpu: 3 x g5.xlarge (1 GPU)")
    assert impact.gpu_capacity(manifest(cluster_config(4, "x9.huge")))[0] is None
    assert impact.gpu_capacity(None)[0] is None


def test_gpu_quota_sums_the_gpu_quota_of_every_flavor_of_every_cluster_queue():
    assert impact.gpu_quota([manifest(cluster_queue(16))]) == (16, "training: gpu 16")
    debug = cluster_queue("8", name="debug")
    debug["spec"]["resourceGroups"][0]["flavors"][0]["resources"][1]["nominalQuota"] = 2  # the system flavor
    assert impact.gpu_quota([manifest(cluster_queue(16)), manifest(debug), manifest(mpijob(4, 8))]) == (
        26,
        "training: gpu 16; debug: system 2, gpu 8",
    )
    assert impact.gpu_quota([manifest(cluster_queue(0, name="cpu"))]) == (0, "cpu: no GPU quota")
    assert impact.gpu_quota([manifest(mpijob(4, 8))]) == (0, "no ClusterQueue")


def test_a_new_environment_has_no_gpu_quota_before():
    _, quota, _ = impact.figures(None, environment([cluster_queue(16)]))
    assert (quota.before, quota.after, quota.before_detail, quota.after_detail) == (0, 16, "", "training: gpu 16")


# --- notices --------------------------------------------------------------------------------------------


def report_notices(before: list[dict], after: list[dict], **env_options) -> list:
    side = Side("x", "x", "x")
    report = build_report(side, [environment(before, **env_options)], side, [environment(after, **env_options)])
    return [(n.severity, n.resource, n.title) for _, n in report.notices]


def test_storage_class_parameters_cannot_change_in_place():
    found = report_notices([storage_class()], [storage_class(parameters={"deploymentType": "PERSISTENT_2"})])
    assert found == [(DANGER, "StorageClass fsx", "cannot change in place")]


def test_the_notice_names_the_kustomization_that_fails_and_who_waits():
    side = Side("x", "x", "x")
    report = build_report(
        side, [environment([storage_class()])], side, [environment([storage_class(reclaimPolicy="Retain")])]
    )
    [(_, notice)] = report.notices
    assert "`infrastructure` fails to apply; `training` waits for it" in notice.message
    assert "`reclaimPolicy`" in notice.message


def test_with_force_flux_recreates_instead_of_failing():
    side = Side("x", "x", "x")
    report = build_report(
        side,
        [environment([storage_class()], force=True)],
        side,
        [environment([storage_class(provisioner="other")], force=True)],
    )
    [(_, notice)] = report.notices
    assert notice.message.count("Flux deletes and re-creates it") == 1 and "fails to apply" not in notice.message


def test_a_storage_class_change_that_is_allowed_says_nothing():
    assert report_notices([storage_class()], [storage_class(allowVolumeExpansion=False)]) == []


def test_a_claim_cannot_shrink_or_change_class_but_can_grow():
    sc = storage_class()
    assert report_notices([sc, claim("2400Gi")], [sc, claim("1200Gi")]) == [
        (DANGER, "PersistentVolumeClaim t/data", "cannot change in place")
    ]
    assert report_notices([sc, claim()], [sc, claim(storage_class_name="other")]) == [
        (DANGER, "PersistentVolumeClaim t/data", "cannot change in place")
    ]
    assert report_notices([sc, claim("1200Gi")], [sc, claim("2.4Ti")]) == [
        (INFO, "PersistentVolumeClaim t/data", "volume grows")
    ]


def test_a_job_template_and_a_daemonset_selector_cannot_change_in_place():
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "t"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "a:1"}]}}},
    }
    new_job = copy.deepcopy(job)
    new_job["spec"]["template"]["spec"]["containers"][0]["image"] = "a:2"
    daemonset = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "d", "namespace": "t"},
        "spec": {"selector": {"matchLabels": {"app": "d"}}, "template": {}},
    }
    new_daemonset = copy.deepcopy(daemonset)
    new_daemonset["spec"]["selector"]["matchLabels"]["app"] = "e"
    assert report_notices([job, daemonset], [new_job, new_daemonset]) == [
        (DANGER, "DaemonSet t/d", "cannot change in place"),
        (DANGER, "Job t/j", "cannot change in place"),
    ]


def test_a_removed_claim_loses_data_only_where_flux_prunes_and_the_class_deletes():
    assert report_notices([storage_class(), claim()], [storage_class()]) == [
        (DANGER, "PersistentVolumeClaim t/data", "data loss")
    ]
    retain = storage_class(reclaimPolicy="Retain")
    assert report_notices([retain, claim()], [retain]) == [(WARNING, "PersistentVolumeClaim t/data", "volume released")]
    assert report_notices([storage_class(), claim()], [storage_class()], prune=False) == [
        (INFO, "Kustomization training", "left on the cluster")
    ]


def test_removing_an_fsx_class_with_its_claims_is_data_loss():
    found = report_notices([storage_class(), claim()], [])
    assert (DANGER, "StorageClass fsx", "data loss") in found
    assert report_notices([storage_class()], []) == [(WARNING, "StorageClass fsx", "FSx class removed")]


def test_more_mpijob_gpus_than_nodes_hold_is_flagged():
    side = Side("x", "x", "x")
    before, after = environment([mpijob(2, 8)]), environment([mpijob(4, 8)])
    before.cluster_config = after.cluster_config = manifest(cluster_config(2), source="eksctl")
    report = build_report(side, [before], side, [after])
    env = report.environments[0]
    assert (env.mpijob_gpus.before, env.mpijob_gpus.after, env.gpu_capacity.after) == (16, 32, 16)
    assert (WARNING, "GPU capacity", "not enough GPUs") in [(n.severity, n.resource, n.title) for n in env.notices]


def gpu_notices(before: list[dict], after: list[dict], before_nodes: int = 2, after_nodes: int = 2) -> dict:
    """The GPU notices' messages by id, for an environment whose gpu group goes from
    `before_nodes` to `after_nodes` p4d.24xlarge (8 GPUs each)."""
    side = Side("x", "x", "x")
    base = environment(before, cluster=cluster_config(before_nodes))
    head = environment(after, cluster=cluster_config(after_nodes))
    report = build_report(side, [base], side, [head])
    return {n.id: n.message for _, n in report.notices if n.resource == "GPU capacity"}


def test_a_capacity_change_states_capacity_and_quota_and_the_gpu_hours_a_day():
    grown = gpu_notices([cluster_queue(16)], [cluster_queue(32)], 2, 4)
    assert grown["gpu-capacity-changed"] == (
        "GPU node capacity 16 -> 32, GPU quota 16 -> 32: +384 GPU-hours per day at max size."
    )
    shrunk = gpu_notices([cluster_queue(16)], [cluster_queue(8)], 2, 1)
    assert shrunk["gpu-capacity-changed"].endswith(": -192 GPU-hours per day at max size.")
    quota_only = gpu_notices([cluster_queue(16)], [cluster_queue(8)])
    assert quota_only["gpu-capacity-changed"] == (
        "GPU node capacity 16 (unchanged), GPU quota 16 -> 8: no change in GPU-hours per day at max size."
    )
    side = Side("x", "x", "x")
    unknown = environment([cluster_queue(16)], cluster=cluster_config(2, "x9.huge"))
    report = build_report(side, [environment([cluster_queue(16)], cluster=cluster_config(2))], side, [unknown])
    [message] = [n.message for _, n in report.notices if n.id == "gpu-capacity-changed"]
    assert message.startswith("GPU node capacity 16 -> unknown,") and "GPU-hours per day at max size unknown" in message


def test_no_capacity_notice_without_a_change_and_one_for_a_new_environment():
    assert "gpu-capacity-changed" not in gpu_notices([cluster_queue(16)], [cluster_queue(16), mpijob(2, 8)])
    side = Side("x", "x", "x")
    new = environment([cluster_queue(16)], cluster=cluster_config(2), name="qa")
    report = build_report(side, [], side, [new])
    [message] = [n.message for _, n in report.notices if n.id == "gpu-capacity-changed"]
    # A new environment of 2 x 8-GPU nodes: +16 GPUs at max size, 24 hours a day.
    assert message == "GPU node capacity 0 -> 16, GPU quota 0 -> 16: +384 GPU-hours per day at max size."


def test_queued_jobs_take_turns_but_each_must_fit_alone():
    queued = [mpijob(2, 8, name=f"queued-{i}", queue="training") for i in range(3)]
    assert gpu_notices([], queued) == {}  # 48 GPUs queued, 16 at a time
    big = mpijob(3, 8, name="big", queue="training")
    assert gpu_notices([], [*queued, big])["gpus-exceed-capacity"] == (
        "MPIJob t/big alone asks for 24 GPUs but the GPU node groups hold at most 16: Kueue runs queued jobs one "
        "after another, and this one never fits."
    )


def test_jobs_outside_a_queue_add_up_and_are_named_first():
    unqueued = [mpijob(1, 8, name="a"), mpijob(1, 8, name="b"), mpijob(1, 8, name="c")]
    message = gpu_notices([], [*unqueued, mpijob(3, 8, name="big", queue="training")])["gpus-exceed-capacity"]
    assert message.startswith("MPIJobs outside a Kueue queue ask for 24 GPUs at once but the GPU node groups hold ")
    assert message.index("outside a Kueue queue") < message.index("MPIJob t/big alone asks for 24 GPUs")


def test_a_shortfall_the_change_does_not_touch_is_not_repeated():
    big = mpijob(3, 8, name="big", queue="training")
    assert gpu_notices([big], [big, storage_class()]) == {}
    assert "gpus-exceed-capacity" in gpu_notices([big], [big], 2, 1)  # smaller nodes: a new shortfall


def test_every_format_shows_the_gpu_quota():
    side = Side("main (abc)", "main", "abc")
    base = environment([cluster_queue(16), mpijob(2, 8, queue="training")], cluster=cluster_config(2))
    head = environment([cluster_queue(32), mpijob(2, 8, queue="training")], cluster=cluster_config(4))
    report = build_report(side, [base], side, [head])

    table = markdown.render(report).splitlines()
    header = table.index("| Environment | Objects | MPIJob GPUs | GPU quota | GPU node capacity | Notices |")
    assert table[header + 2] == "| **prod** | ~2 | 16 | 16 → 32 | 16 → 32 | ℹ️ 2 |"  # the queue and the ClusterConfig
    assert "- GPU quota 16 → 32: training: gpu 16 → training: gpu 32" in table
    plain = text.render(report)
    assert "GPU quota" in plain and "  GPU quota 16 -> 32: training: gpu 16 -> training: gpu 32" in plain
    quota = json.loads(json_format.render(report))["environments"][0]["gpu_quota"]
    assert quota == {
        "before": 16,
        "after": 32,
        "before_detail": "training: gpu 16",
        "after_detail": "training: gpu 32",
    }


def test_flux_keeps_a_removed_object_that_opts_out_of_pruning():
    for kept in (
        annotated(claim(), prune="disabled"),
        annotated(claim(), "labels", prune="Disabled"),
        annotated(claim(), reconcile="disabled"),
    ):
        assert report_notices([storage_class(), kept], [storage_class()]) == [
            (INFO, "PersistentVolumeClaim t/data", "left on the cluster")
        ]
    # Its FSx class going too deletes no data: the kept claim keeps its file system.
    assert report_notices([storage_class(), annotated(claim(), prune="disabled")], []) == [
        (WARNING, "StorageClass fsx", "FSx class removed"),
        (INFO, "PersistentVolumeClaim t/data", "left on the cluster"),
    ]


def test_the_left_on_the_cluster_notice_names_the_setting():
    side = Side("x", "x", "x")
    report = build_report(
        side,
        [environment([storage_class(), annotated(claim(), prune="disabled")])],
        side,
        [environment([storage_class()])],
    )
    [(_, notice)] = report.notices
    assert "`kustomize.toolkit.fluxcd.io/prune: disabled`" in notice.message and "Flux leaves it" in notice.message


def test_an_object_that_opts_out_of_pruning_moves_without_a_race():
    side = Side("x", "x", "x")
    kept = annotated(claim(), prune="disabled")
    before, after = environment([storage_class(), kept]), environment([storage_class()])
    after.kustomizations[0].objects.append(manifest(kept, source="infrastructure"))
    assert build_report(side, [before], side, [after]).notices == []


def test_flux_does_not_apply_a_change_to_an_object_it_only_creates_or_ignores():
    changed = {"parameters": {"deploymentType": "PERSISTENT_2"}}
    for settings in ({"ssa": "IfNotPresent"}, {"ssa": "ifnotpresent"}, {"ssa": "Ignore"}, {"reconcile": "disabled"}):
        old, new = annotated(storage_class(), **settings), annotated(storage_class(**changed), **settings)
        assert report_notices([old], [new]) == [(WARNING, "StorageClass fsx", "Flux does not apply it")], settings
    # The object in the cluster still has reconcile: disabled, so removing it in Git changes nothing either.
    assert report_notices([annotated(storage_class(), reconcile="disabled")], [storage_class(**changed)]) == [
        (WARNING, "StorageClass fsx", "Flux does not apply it")
    ]
    # IfNotPresent only counts in Git: without it there, Flux applies the change (and fails on it).
    assert report_notices([annotated(storage_class(), ssa="IfNotPresent")], [storage_class(**changed)]) == [
        (DANGER, "StorageClass fsx", "cannot change in place")
    ]


def test_force_also_works_as_a_label_in_any_case():
    side = Side("x", "x", "x")
    old = annotated(storage_class(), "labels", force="Enabled")
    new = annotated(storage_class(provisioner="other"), "labels", force="Enabled")
    [(_, notice)] = build_report(side, [environment([old])], side, [environment([new])]).notices
    assert "Flux deletes and re-creates it" in notice.message and "fails to apply" not in notice.message


def test_a_removed_environment_points_at_the_other_notices():
    side = Side("x", "x", "x")
    report = build_report(side, [environment([storage_class(), claim()])], side, [])
    notices = [n for _, n in report.notices]
    assert notices[0].title == "data loss"  # danger sorts first, above the environment notice
    [removed] = [n for n in notices if n.title == "environment removed"]
    assert "see the other notices" in removed.message and "below" not in removed.message


# --- markdown cap --------------------------------------------------------------------------------------


def big_report(objects: int, lines_per_object: int) -> Report:
    changes = []
    for number in range(objects):
        diff = "@@ -1,1 +1,1 @@\n" + "\n".join(f"+  line {i}: {'x' * 60}" for i in range(lines_per_object))
        changes.append(
            ObjectChange(
                key=Key("prod", "apps", "Deployment", "t", f"app-{number:03d}"),
                status=CHANGED,
                before=None,
                after=None,
                diff=diff,
                additions=lines_per_object,
            )
        )
    environments = [EnvironmentDiff("prod", CHANGED, changes)]
    return Report(Side("main (abc)", "main", "abc"), Side("working tree", "", ""), environments)


def test_a_small_comment_is_complete():
    body = markdown.render(big_report(3, 5))
    assert body.count("<details><summary>~ <code>Deployment t/app-") == 3
    assert "left out" not in body


def test_a_big_comment_stays_under_githubs_limit_and_says_what_it_cut():
    report = big_report(300, 40)  # about 900,000 characters of diff
    body = markdown.render(report, full_diff_hint="Run `scripts/diff --base abc` for the full diff.")
    assert len(body) <= markdown.DEFAULT_LIMIT < markdown.GITHUB_LIMIT
    shown = body.count("<details><summary>~ <code>Deployment t/app-")
    assert 0 < shown < 300
    note = body[body.index("> [!NOTE]") :].split("\n\n", 1)[0]
    assert f"The diffs of {300 - shown} objects were left out" in note
    assert f"`prod: Deployment t/app-{shown:03d}`" in note  # the first one cut is named
    assert f"and {300 - shown - 20} more" in note
    assert "scripts/diff --base abc" in note
    assert body.index("| Environment |") < body.index("> [!NOTE]") < body.index("<details>")


def test_the_cap_is_a_parameter():
    body = markdown.render(big_report(300, 40), max_chars=20_000)
    assert len(body) <= 20_000 and "left out" in body


def test_a_diff_with_backticks_gets_a_longer_fence():
    report = big_report(1, 1)
    report.environments[0].changes[0].diff = "@@ -1 +1 @@\n+  script: |\n+    echo ```"
    assert "````diff\n" in markdown.render(report)


def test_no_change_is_one_sentence():
    report = Report(Side("main (abc)", "main", "abc"), Side("working tree", "", ""), [EnvironmentDiff("dev", "")])
    assert "No changes in the rendered manifests." in markdown.render(report)


def test_unified_diff_ignores_key_order_and_shows_multiline_strings_as_blocks():
    before = {"kind": "ConfigMap", "apiVersion": "v1", "data": {"run.sh": "set -e\necho one\n"}}
    after = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"run.sh": "set -e\necho two\n"}}
    text, additions, deletions = unified(before, after, 1)
    assert "-    echo one\n+    echo two" in text and (additions, deletions) == (1, 1)


def test_an_immutable_secret_cannot_change_its_data():
    before = secret(password="a")
    before["immutable"] = True
    after = copy.deepcopy(before)
    after["stringData"]["password"] = "b"
    assert report_notices([before], [after]) == [(DANGER, "Secret n/s", "cannot change in place")]
    before.pop("immutable"), after.pop("immutable")
    assert report_notices([before], [after]) == []


def test_an_object_moved_between_kustomizations_is_a_change_even_with_equal_content():
    side = Side("x", "x", "x")
    before, after = environment([storage_class(), claim()]), environment([storage_class()])
    moved = manifest(claim(), source="infrastructure")
    after.kustomizations[0].objects.append(moved)
    report = build_report(side, [before], side, [after])
    [change] = report.environments[0].changes
    assert (change.status, change.moved_from, change.diff) == (CHANGED, "training", "")
    [(_, notice)] = report.notices
    assert (notice.severity, notice.title) == (DANGER, "moves between Kustomizations")
    assert (
        "If `training` reconciles first, it prunes the object and `infrastructure` creates it again" in notice.message
    )
    assert "Content unchanged." in markdown.render(report)


def test_malformed_objects_are_diffed_without_crashing():
    # The schema check reports these; diff must still show them, not fail with a traceback.
    odd = [
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "t"},
            "spec": ["not", "a", "mapping"],
        },
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "annotations": "oops"}, "data": "c2VjcmV0"},
        {
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "metadata": {"name": "j", "namespace": "t"},
            "spec": {"mpiReplicaSpecs": {"Worker": {"replicas": "many", "template": []}}, "runPolicy": []},
        },
    ]
    changed = copy.deepcopy(odd)
    for doc in changed:
        doc["extra"] = True
    side = Side("x", "x", "x")
    report = build_report(side, [environment(odd)], side, [environment(changed)])
    assert len(report.environments[0].changes) == 3
    assert "c2VjcmV0" not in markdown.render(report)
