"""scripts/new-environment and scripts/new-job on a real copy of this repository in git:
what they write validates clean and diff shows exactly the new objects; every refusal leaves
the tree untouched; running one twice changes nothing the second time (or refuses clearly)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import REPO as REPOSITORY

sys.path.insert(0, str(REPOSITORY / "trainer"))

from conftest import git  # noqa: E402
from horovod_trainer.errors import TrainerError  # noqa: E402
from horovod_trainer.settings import resolve  # noqa: E402
from horovod_trainer.train import OPTIONS  # noqa: E402

from eks_gpu_gitops.generate import answers  # noqa: E402
from eks_gpu_gitops.generate.new_environment import OPTIONS as ENVIRONMENT_OPTIONS  # noqa: E402


def as_option(problem: str) -> str:
    """The template question's message as new-environment says it: naming the option."""
    return answers.as_option(problem, ENVIRONMENT_OPTIONS)


def tool(repo: Path, name: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ}
    return subprocess.run([str(repo / "scripts" / name), *args], cwd=repo, env=env, capture_output=True, text=True)


def status(repo: Path) -> str:
    return git(repo, "status", "--porcelain")


def errors_in(repo: Path, env: str) -> list[dict]:
    result = tool(repo, "validate", "--env", env, "--format", "json")
    assert result.returncode in (0, 1), result.stderr
    return [f for f in json.loads(result.stdout)["findings"] if f["severity"] == "error"]


def commit(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", message)


def refused(result: subprocess.CompletedProcess) -> str:
    """The one line of a refusal, without its `<verb>: ` prefix."""
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    verb = result.args[0].rsplit("/", 1)[-1]
    assert len(lines) == 1 and lines[0].startswith(f"{verb}: "), result.stderr
    return lines[0].removeprefix(f"{verb}: ")


def rendered_mpijobs(repo: Path, env: str, out: Path) -> dict[str, dict]:
    result = tool(repo, "render", "--env", env, "--out", str(out))
    assert result.returncode == 0, result.stderr
    return {
        doc["metadata"]["name"]: doc
        for doc in yaml.safe_load_all((out / env / "training.yaml").read_text())
        if doc and doc["kind"] == "MPIJob"
    }


def images(mpijob: dict) -> set[str]:
    return {
        container["image"]
        for replica in mpijob["spec"]["mpiReplicaSpecs"].values()
        for key in ("initContainers", "containers")
        for container in replica["template"]["spec"].get(key, [])
    }


def diff_objects(repo: Path) -> dict[str, list[tuple[str, str]]]:
    git(repo, "add", "-A")  # diff compares the working tree; untracked files count once added
    result = tool(repo, "diff", "--base", "HEAD", "--format", "json")
    assert result.returncode == 0, result.stderr

    def key(change: dict) -> str:
        return "/".join(part for part in (change["kind"], change["namespace"], change["name"]) if part)

    return {
        env["name"]: [(o["status"], key(o)) for o in env["objects"]]
        for env in json.loads(result.stdout)["environments"]
        if env["objects"]
    }


def test_new_environment_validates_clean_and_diff_shows_only_it(repo):
    result = tool(
        repo,
        "new-environment",
        "staging",
        "--instance-type",
        "g6.12xlarge",
        "--nodes",
        "3",
        "--region",
        "eu-west-1",
        "--fsx-deployment-type",
        "PERSISTENT_2",
        "--fsx-capacity-gib",
        "2400",
    )
    assert result.returncode == 0, result.stderr
    assert errors_in(repo, "staging") == []
    changes = diff_objects(repo)
    assert list(changes) == ["staging"]
    assert {status for status, _ in changes["staging"]} == {"added"}
    resources = {resource for _, resource in changes["staging"]}
    assert {
        "MPIJob/training/horovod-train",
        "StorageClass/fsx-lustre",
        "DaemonSet/kube-system/aws-efa-k8s-device-plugin",
    } <= resources


def test_new_environment_twice_refuses_and_writes_nothing(repo):
    args = ("qa", "--instance-type", "g5.xlarge", "--nodes", "1")
    assert tool(repo, "new-environment", *args).returncode == 0
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "qa")
    second = tool(repo, "new-environment", *args)
    assert (
        refused(second)
        == "NAME: environment 'qa' already exists (clusters/qa); choose another name or edit its overlays"
    )
    assert status(repo) == ""


REFUSED = {
    "existing-name": (["dev", "--instance-type", "g5.xlarge", "--nodes", "1"], None),
    "bad-name": (["Stage_1", "--instance-type", "g5.xlarge", "--nodes", "1"], answers.check_slug("Stage_1", "NAME")),
    "unknown-type": (
        ["qa", "--instance-type", "p9.huge", "--nodes", "1"],
        as_option(answers.check_gpu_instance_type("p9.huge")),
    ),
    "cpu-type": (
        ["qa", "--instance-type", "m5.xlarge", "--nodes", "1"],
        as_option(answers.check_gpu_instance_type("m5.xlarge")),
    ),
    "efa-without-efa": (
        ["qa", "--instance-type", "g5.xlarge", "--nodes", "1", "--efa"],
        as_option(answers.parse_efa("on", "g5.xlarge")[1]),
    ),
    "zero-nodes": (
        ["qa", "--instance-type", "g5.xlarge", "--nodes", "0"],
        as_option(answers.parse_node_count("0", capacity_block=False)[1]),
    ),
    "az-elsewhere": (
        [
            "qa",
            "--instance-type",
            "g5.xlarge",
            "--nodes",
            "1",
            "--region",
            "us-east-1",
            "--availability-zone",
            "eu-west-1a",
        ],
        as_option(answers.check_availability_zone("eu-west-1a", "us-east-1")),
    ),
    "fsx-size": (
        ["qa", "--instance-type", "g5.xlarge", "--nodes", "1", "--fsx-capacity-gib", "1000"],
        as_option(answers.check_fsx("SCRATCH_2", "1000", "")),
    ),
    "s3-on-persistent2": (
        [
            "qa",
            "--instance-type",
            "g5.xlarge",
            "--nodes",
            "1",
            "--fsx-deployment-type",
            "PERSISTENT_2",
            "--fsx-s3-import-path",
            "s3://bucket",
        ],
        as_option(answers.check_fsx("PERSISTENT_2", "1200", "s3://bucket")),
    ),
}


@pytest.mark.parametrize("args, message", REFUSED.values(), ids=REFUSED.keys())
def test_new_environment_refusals_match_the_template_and_touch_nothing(repo, args, message):
    line = refused(tool(repo, "new-environment", *args))
    if message is not None:
        assert line == message  # the pre-generation hook prints it naming the question, not the option
    assert not line.startswith(tuple(ENVIRONMENT_OPTIONS)), line
    assert status(repo) == ""


def test_new_job_validates_clean_and_diff_shows_only_the_job(repo):
    result = tool(repo, "new-job", "resnet", "--env", "dev", "--workers", "2", "--epochs", "30")
    assert result.returncode == 0, result.stderr
    assert errors_in(repo, "dev") == []
    assert diff_objects(repo) == {"dev": [("added", "MPIJob/training/resnet")]}


def test_new_job_keeps_comments_and_order_and_is_idempotent(repo):
    kustomization = repo / "overlays/prod/training/kustomization.yaml"
    kustomization.write_text(kustomization.read_text().replace("resources:", "# our jobs live here\nresources:"))
    git(repo, "commit", "--quiet", "-am", "comment")
    args = ("bert", "--env", "prod", "--workers", "1", "--gpus-per-worker", "4", "--batch-size", "32")
    assert tool(repo, "new-job", *args).returncode == 0
    text = kustomization.read_text()
    assert "# our jobs live here\nresources:" in text
    assert text.index("resources:") < text.index("components:")
    assert "- mpijob-bert.yaml" in text
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "bert")
    again = tool(repo, "new-job", *args)
    assert again.returncode == 0 and "nothing to do" in again.stdout
    assert status(repo) == ""
    other = tool(repo, "new-job", "bert", "--env", "prod", "--workers", "2")
    assert other.returncode == 2 and "already exists" in other.stderr
    assert status(repo) == ""


def test_new_job_more_workers_than_the_gpu_group_holds_is_refused_naming_the_option(repo):
    line = refused(tool(repo, "new-job", "huge", "--env", "dev", "--workers", "50"))
    assert line == (
        "--workers: '50' is more than 2, what dev's gpu node group holds at maxSize (2 x g5.xlarge, 1 worker(s) of "
        "1 GPU each); give a number of workers, 1 to 2"
    )
    assert status(repo) == ""


def test_new_job_bad_arguments(repo):
    for args in (
        ["x", "--env", "nowhere", "--workers", "1"],
        ["x", "--env", "dev", "--workers", "0"],
        ["Bad_Name", "--env", "dev", "--workers", "1"],
    ):
        refused(tool(repo, "new-job", *args))
    assert status(repo) == ""


def test_new_environment_refuses_a_name_that_makes_the_eks_cluster_name_too_long(repo):
    platform = repo / "platform.yaml"
    prefix = "c" * 80
    text = platform.read_text()
    platform.write_text(re.sub(r"^(  cluster_name_prefix: ).*$", rf"\g<1>{prefix}", text, count=1, flags=re.MULTILINE))
    commit(repo, "long prefix")
    name = "a" * 20
    line = refused(tool(repo, "new-environment", name, "--instance-type", "g5.xlarge", "--nodes", "1"))
    assert line == answers.check_environment_name(name, prefix)
    assert line.startswith("NAME: ") and "at most 19 characters" in line
    assert status(repo) == ""


def test_new_job_refused_when_the_overlay_sets_a_namespace(repo):
    kustomization = repo / "overlays/dev/training/kustomization.yaml"
    text = kustomization.read_text()
    kustomization.write_text(text.replace("kind: Kustomization\n", "kind: Kustomization\nnamespace: ml\n"))
    commit(repo, "namespace ml")
    line = refused(tool(repo, "new-job", "huge", "--env", "dev", "--workers", "2"))
    # The job lands in ml, where the ClusterQueue (which takes jobs from training) never admits it.
    assert line.startswith("queue-quota-exceeded: ClusterQueue training's namespaceSelector does not take jobs from ml")
    assert status(repo) == ""


PREAMBLE_AND_ZERO_INDENT = """# Training jobs of prod; the ML team owns this file.
---
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- ../../base/training
- ../settings.yaml
components:
- ../../base/training/environment
"""


def test_new_job_keeps_the_preamble_and_indentation_byte_for_byte(repo):
    kustomization = repo / "overlays/prod/training/kustomization.yaml"
    kustomization.write_text(PREAMBLE_AND_ZERO_INDENT)
    commit(repo, "own style")
    result = tool(repo, "new-job", "bert", "--env", "prod", "--workers", "1", "--image", "ghcr.io/org/bert:1.0")
    assert result.returncode == 0, result.stderr
    listed = "- ../settings.yaml\n- mpijob-bert.yaml\n"
    # A pinned image needs no image replacement; the NCCL log level still follows the settings.
    log_level = """replacements:
- source:
    kind: EnvironmentSettings
    fieldPath: training.ncclDebug
  targets:
  - select:
      kind: MPIJob
      name: bert
    fieldPaths:
    - spec.mpiReplicaSpecs.Launcher.template.spec.containers.[name=launcher].env.[name=NCCL_DEBUG].value
"""
    expected = PREAMBLE_AND_ZERO_INDENT.replace("- ../settings.yaml\n", listed) + log_level
    assert kustomization.read_text() == expected


def test_new_job_follows_the_release_image_unless_given_one(repo, tmp_path):
    assert tool(repo, "new-job", "resnet", "--env", "dev", "--workers", "1").returncode == 0
    pinned = tool(repo, "new-job", "pinned", "--env", "dev", "--workers", "1", "--image", "ghcr.io/org/x:1.0")
    assert pinned.returncode == 0, pinned.stderr
    assert errors_in(repo, "dev") == []
    base = repo / "overlays/base/training/kustomization.yaml"
    base.write_text(base.read_text().replace('newTag: "0.1.0"', 'newTag: "0.2.0"'))
    jobs = rendered_mpijobs(repo, "dev", tmp_path / "rendered")
    release = images(jobs["horovod-train"])
    assert len(release) == 1 and next(iter(release)).endswith(":0.2.0")
    assert images(jobs["resnet"]) == release
    assert images(jobs["pinned"]) == {"ghcr.io/org/x:1.0"}


@pytest.mark.parametrize("flag, value", [("epochs", "abc"), ("model", "resnet18"), ("base-lr", "0"), ("seed", "-1")])
def test_new_job_checks_trainer_settings_with_the_trainers_options(repo, flag, value):
    with pytest.raises(TrainerError) as trainer_says:
        resolve(OPTIONS, [f"--{flag}={value}"], environ={})
    line = refused(tool(repo, "new-job", "x", "--env", "dev", "--workers", "1", f"--{flag}={value}"))
    assert line == str(trainer_says.value)
    assert status(repo) == ""


def test_new_job_refuses_the_name_of_an_existing_mpijob(repo):
    line = refused(tool(repo, "new-job", "horovod-train", "--env", "dev", "--workers", "1"))
    assert line.startswith("NAME: 'horovod-train' ") and "/tmp" not in line, line
    assert status(repo) == ""


@pytest.mark.parametrize("flag, counted, most", [("--workers", "workers", 2), ("--gpus-per-worker", "GPUs", 1)])
def test_new_job_count_messages_name_what_is_counted(repo, flag, counted, most):
    args = ["x", "--env", "dev", "--workers", "1", flag, "0"]
    expected = f"{flag}: '0' is less than 1; give a number of {counted}, 1 to {most}"
    assert refused(tool(repo, "new-job", *args)) == expected


def test_gitignore_covers_what_make_setup_and_render_write(repo):
    (repo / ".venv/bin").mkdir(parents=True)  # make setup's virtual environment with the pinned tool
    (repo / ".venv/bin/eks-gpu-gitops").write_text("#!/bin/sh\n")
    (repo / "rendered/dev").mkdir(parents=True)
    (repo / "rendered/dev/training.yaml").write_text("---\n")
    assert status(repo) == ""


def test_new_job_benchmark_runs_the_synthetic_benchmark_without_data(repo, tmp_path):
    result = tool(
        repo, "new-job", "bench", "--env", "prod", "--workers", "2", "--kind", "benchmark", "--mixed-precision"
    )
    assert result.returncode == 0, result.stderr
    assert errors_in(repo, "prod") == []
    job = rendered_mpijobs(repo, "prod", tmp_path / "rendered")["bench"]
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    worker = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    [container] = launcher["containers"]
    assert container["args"] == [
        "python",
        "-m",
        "horovod_trainer.synthetic_benchmark",
        "--model=resnet50",
        "--batch-size=64",
        "--mixed-precision",
    ]
    assert "-np" in container["command"] and container["command"][container["command"].index("-np") + 1] == "16"
    # No data: no prepare-data step and no FSx claim, so it runs as soon as the GPU nodes are up.
    assert "initContainers" not in launcher
    assert [v["name"] for v in worker["volumes"]] == ["dshm"]
    assert "volumes" not in launcher
    assert "volumeMounts" not in container
    assert (repo / "trainer/horovod_trainer/synthetic_benchmark.py").is_file()
    assert diff_objects(repo) == {"prod": [("added", "MPIJob/training/bench")]}


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--kind", "benchmark", "--epochs", "3"],
            "--epochs does not apply to --kind benchmark (it takes batch-size, model, width, image-size, num-iters)",
        ),
        (["--kind", "benchmark", "--num-iters", "1"], "--num-iters must be at least 2 (got 1)"),
        (["--model", "resnet50", "--width", "9"], "--width must be between 0.01 and 4.0 (got 9.0)"),
        (["--lr-schedule", "step"], "--lr-schedule step needs --lr-decay-epochs (e.g. 30,60,80)"),
    ],
    ids=["train-only-flag", "benchmark-range", "train-range", "train-combination"],
)
def test_new_job_kind_flags_are_checked_by_the_module_that_runs(repo, args, message):
    line = refused(tool(repo, "new-job", "x", "--env", "dev", "--workers", "1", *args))
    assert line == message
    assert status(repo) == ""


def test_new_job_on_imagenet_indexes_the_data_instead_of_writing_digits(repo, tmp_path):
    args = ["resnet", "--env", "prod", "--workers", "2", "--data-format", "imagenet", "--model", "resnet50"]
    result = tool(repo, "new-job", *args, "--data-dir", "/fsx/ilsvrc", "--mixed-precision")
    assert result.returncode == 0, result.stderr
    assert errors_in(repo, "prod") == []
    launcher = rendered_mpijobs(repo, "prod", tmp_path / "rendered")["resnet"]["spec"]["mpiReplicaSpecs"]["Launcher"]
    [init] = launcher["template"]["spec"]["initContainers"]
    assert (init["name"], init["command"], init["args"]) == (
        "index-data",
        ["python", "-m", "horovod_trainer.index_data"],
        ["--data-dir", "/fsx/ilsvrc", "--skip-existing"],
    )
    args = launcher["template"]["spec"]["containers"][0]["args"]
    assert args.count("--data-dir=/fsx/ilsvrc") == 1 and "--model=resnet50" in args and "--mixed-precision" in args
    assert (repo / "trainer/horovod_trainer/index_data.py").is_file()


def test_new_job_data_format_is_for_training_jobs_only(repo):
    args = ["x", "--env", "dev", "--workers", "1", "--kind", "benchmark", "--data-format", "imagenet"]
    assert (
        refused(tool(repo, "new-job", *args))
        == "--data-format applies to --kind train only (a benchmark job reads no data)"
    )
    assert status(repo) == ""


def test_new_job_nccl_tests_runs_all_reduce_on_every_gpu_node_over_efa(repo, tmp_path):
    result = tool(repo, "new-job", "fabric", "--env", "prod", "--kind", "nccl-tests")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1].startswith(
        "the job fails below 60 GB/s all_reduce busbw at 1073741824 B on p4d.24xlarge (p4de.24xlarge's, "
    )
    validated = tool(repo, "validate", "--env", "prod", "--format", "json")
    assert [f["rule"] for f in json.loads(validated.stdout)["findings"]] == []  # no error, no warning
    jobs = rendered_mpijobs(repo, "prod", tmp_path / "rendered")
    job = jobs["fabric"]
    workers = job["spec"]["mpiReplicaSpecs"]["Worker"]
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    [container] = launcher["containers"]
    # Every GPU node of prod (the gpu group's maxSize, 2 in this bake), every GPU, every EFA interface.
    assert workers["replicas"] == 2 and job["spec"]["slotsPerWorker"] == 8
    model = jobs["horovod-train"]["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    efa = workers["template"]["spec"]["containers"][0]["resources"]["limits"]["vpc.amazonaws.com/efa"]
    assert efa == model["resources"]["limits"]["vpc.amazonaws.com/efa"] > 0
    # bash -o pipefail -c "mpirun ... all_reduce_perf ... | python -m horovod_trainer.fabric_check ...": the job
    # fails when the fabric check does (tests/test_fabric_check_job.py runs it).
    assert container["command"][:4] == ["bash", "-o", "pipefail", "-c"] and "args" not in container
    # One run; its failed launcher pod stays, with the log and the verdict.
    assert job["spec"]["mpiReplicaSpecs"]["Launcher"]["restartPolicy"] == "Never"
    assert job["spec"]["runPolicy"]["backoffLimit"] == 0
    assert jobs["horovod-train"]["spec"]["runPolicy"]["backoffLimit"] > 0
    words = shlex.split(container["command"][4])
    command, check = words[: words.index("|")], words[words.index("|") + 1 :]
    assert command[command.index("-np") + 1] == "16"
    assert command[command.index("/opt/nccl-tests/build/all_reduce_perf") + 1 :][:2] == ["-b", "8"]
    assert check == [
        "python",
        "-m",
        "horovod_trainer.fabric_check",
        "--size",
        "1073741824",
        "--floor",
        "60",
        "--instance-type",
        "p4d.24xlarge",
    ]
    exported = [command[i + 1] for i, word in enumerate(command) if word == "-x"]
    assert {"FI_PROVIDER=efa", "NCCL_NET=Libfabric", "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS"} <= set(exported)
    assert {e["name"]: e["value"] for e in container["env"]} == {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}
    assert "initContainers" not in launcher and "volumes" not in launcher
    # The same image as horovod-train, which holds nccl-tests (trainer/Dockerfile).
    assert (
        container["image"]
        == jobs["horovod-train"]["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["image"]
    )


def test_new_job_nccl_tests_takes_no_trainer_flags(repo):
    line = refused(tool(repo, "new-job", "fabric", "--env", "prod", "--kind", "nccl-tests", "--mixed-precision"))
    assert line == "--mixed-precision does not apply to --kind nccl-tests (it takes no trainer flags)"
    line = refused(tool(repo, "new-job", "x", "--env", "prod"))
    assert line == "--workers is required for --kind train"
    assert status(repo) == ""


def launcher_script(repo: Path, name: str) -> list[str]:
    """The words of the bash script an nccl-tests job's launcher runs, as new-job wrote it."""
    job = yaml.safe_load((repo / f"overlays/prod/training/mpijob-{name}.yaml").read_text())
    [launcher] = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"]
    return shlex.split(launcher["command"][-1])


def test_new_job_nccl_tests_floor_overrides_the_published_one(repo):
    result = tool(repo, "new-job", "fabric", "--env", "prod", "--kind", "nccl-tests", "--floor", "72.5")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == (
        "the job fails below 72.5 GB/s all_reduce busbw at 1073741824 B on p4d.24xlarge (set by --floor)"
    )
    words = launcher_script(repo, "fabric")
    assert words[words.index("--floor") + 1] == "72.5"


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--workers", "1"], "one worker: the run does not cross the EFA fabric"),
        (["--gpus-per-worker", "4"], "its workers are not whole nodes on EFA, which the published figures are"),
    ],
)
def test_new_job_nccl_tests_off_the_fabric_has_no_floor(repo, args, why):
    result = tool(repo, "new-job", "fabric", "--env", "prod", "--kind", "nccl-tests", *args)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == (
        f"the job reports all_reduce busbw at 1073741824 B without a floor ({why}); --floor GBPS sets one"
    )
    words = launcher_script(repo, "fabric")
    assert "--floor" not in words and words[-4:] == ["--size", "1073741824", "--instance-type", "p4d.24xlarge"]


@pytest.mark.parametrize("value", ["0", "-5", "fast", "nan", "inf", "60\nx"])
def test_new_job_floor_must_be_a_positive_number(repo, value):
    line = refused(tool(repo, "new-job", "fabric", "--env", "prod", "--kind", "nccl-tests", "--floor", value))
    assert line == f"--floor: {value!r} is not a positive number of GB/s"
    assert status(repo) == ""


def test_new_job_floor_is_for_nccl_tests_only(repo):
    line = refused(tool(repo, "new-job", "x", "--env", "prod", "--workers", "1", "--floor", "50"))
    assert line == "--floor applies to --kind nccl-tests only (the fabric check's pass mark), not train"
    assert status(repo) == ""


def test_a_new_job_follows_the_environments_nccl_log_level(repo, tmp_path):
    assert tool(repo, "new-job", "second", "--env", "prod", "--workers", "1").returncode == 0
    settings = repo / "overlays/prod/settings.yaml"
    settings.write_text(settings.read_text().replace("ncclDebug: WARN", "ncclDebug: INFO"))
    jobs = rendered_mpijobs(repo, "prod", tmp_path / "rendered")
    for name in ("horovod-train", "second"):
        [container] = jobs[name]["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"]
        assert container["env"] == [{"name": "NCCL_DEBUG", "value": "INFO"}], name


def test_new_environment_refuses_blackwell_types_the_image_cannot_drive(repo):
    line = refused(tool(repo, "new-environment", "b200", "--instance-type", "p6-b200.48xlarge", "--nodes", "1"))
    assert line == (
        "--instance-type: 'p6-b200.48xlarge' has B200 (Blackwell) GPUs, which need CUDA 12.8 or later; the trainer "
        "image is TensorFlow 2.15 on CUDA 12.2; choose a Hopper or older type such as p5.48xlarge, p5en.48xlarge "
        "or p4d.24xlarge"
    )
    assert status(repo) == ""


def test_new_environment_takes_the_efa_plugin_from_its_regions_registry(repo, tmp_path):
    # ap-east-1 is one of the regions whose Amazon EKS images live in an account of their own.
    args = ("hk", "--instance-type", "p4d.24xlarge", "--nodes", "1", "--region", "ap-east-1")
    result = tool(repo, "new-environment", *args)
    assert result.returncode == 0, result.stderr
    assert errors_in(repo, "hk") == []
    out = tmp_path / "rendered"
    assert tool(repo, "render", "--env", "hk", "--out", str(out)).returncode == 0
    objects = list(yaml.safe_load_all((out / "hk" / "infrastructure.yaml").read_text()))
    [plugin] = [o for o in objects if o["kind"] == "DaemonSet" and o["metadata"]["name"] == "aws-efa-k8s-device-plugin"]
    [container] = plugin["spec"]["template"]["spec"]["containers"]
    assert container["image"].startswith("800184023465.dkr.ecr.ap-east-1.amazonaws.com/eks/aws-efa-k8s-device-plugin:")


def test_new_job_joins_the_queue_and_one_above_the_quota_is_refused(repo, tmp_path):
    result = tool(repo, "new-job", "second", "--env", "prod", "--workers", "2")
    assert result.returncode == 0, result.stderr
    jobs = rendered_mpijobs(repo, "prod", tmp_path / "rendered")
    # Both jobs need every GPU node: they queue, one after the other, and validate is content.
    assert {name: job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] for name, job in jobs.items()} == {
        "horovod-train": "training",
        "second": "training",
    }
    assert errors_in(repo, "prod") == []
    commit(repo, "second job")
    settings = repo / "overlays/prod/settings.yaml"
    settings.write_text(settings.read_text().replace("nominalQuota: 16\n", "nominalQuota: 8\n"))
    commit(repo, "smaller quota")
    line = refused(tool(repo, "new-job", "third", "--env", "prod", "--workers", "2"))
    assert line.startswith("queue-quota-exceeded: 2 Worker pods need 16 nvidia.com/gpu"), line
    assert status(repo) == ""


def rendered_gpu_group(repo: Path, env: str, out: Path) -> dict:
    assert tool(repo, "render", "--env", env, "--out", str(out)).returncode == 0
    config = yaml.safe_load((out / env / "eksctl.yaml").read_text())
    return next(g for g in config["managedNodeGroups"] if g["name"] == "gpu")


def test_new_environment_on_a_capacity_block(repo, tmp_path):
    args = ("cb", "--instance-type", "p5.48xlarge", "--nodes", "2", "--capacity-reservation", "cr-0123456789abcdef0")
    result = tool(repo, "new-environment", *args, "--capacity-block")
    assert result.returncode == 0, result.stderr
    assert errors_in(repo, "cb") == []
    group = rendered_gpu_group(repo, "cb", tmp_path / "rendered")
    target = {"capacityReservationID": "cr-0123456789abcdef0"}
    assert group["capacityReservation"] == {"capacityReservationTarget": target}
    assert group["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert (group["minSize"], group["desiredCapacity"], group["maxSize"]) == (0, 0, 2)


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ("lab", "--instance-type", "p4d.24xlarge", "--nodes", "1", "--spot"),
            "--spot: 'lab' would run EFA nodes on Spot; give --no-efa with --spot, or drop --spot",
        ),
        (
            ("prod-eu", "--instance-type", "g5.xlarge", "--nodes", "1", "--spot"),
            "--spot: 'prod-eu' is a production environment; use Spot for development environments only",
        ),
        (
            ("lab", "--instance-type", "g5.xlarge", "--nodes", "1", "--capacity-block"),
            "--capacity-block: 'yes' needs the Capacity Block's reservation id; give --capacity-reservation "
            "(cr-...) or answer no",
        ),
    ],
    ids=["spot-with-efa", "spot-in-production", "block-without-reservation"],
)
def test_new_environment_refuses_capacity_that_cannot_work(repo, args, message):
    assert refused(tool(repo, "new-environment", *args)) == message
    assert status(repo) == ""


def test_new_environment_on_spot_for_development(repo, tmp_path):
    result = tool(repo, "new-environment", "lab", "--instance-type", "g5.xlarge", "--nodes", "2", "--spot")
    assert result.returncode == 0, result.stderr
    assert errors_in(repo, "lab") == []
    group = rendered_gpu_group(repo, "lab", tmp_path / "rendered")
    assert group["spot"] is True and group.get("efaEnabled") is False
