"""scripts/new-environment and scripts/new-job on a real copy of this repository in git:
what they write validates clean and diff shows exactly the new objects; every refusal leaves
the tree untouched; running one twice changes nothing the second time (or refuses clearly)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parent.parent
COPIED = ("clusters", "overlays", "scripts", "platform.yaml", ".yamllint")
sys.path.insert(0, str(REPOSITORY / "scripts"))

from gitops_tools import answers  # noqa: E402

GIT_IDENTITY = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
                "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True,
                          env={**os.environ, **GIT_IDENTITY}).stdout


@pytest.fixture
def repo(tmp_path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    for name in COPIED:
        source = REPOSITORY / name
        if source.is_dir():
            shutil.copytree(source, root / name, ignore=shutil.ignore_patterns("flux-system", "__pycache__"))
        else:
            shutil.copy2(source, root / name)
    git(root, "init", "--quiet", "--initial-branch=main")
    git(root, "add", "-A")
    git(root, "commit", "--quiet", "-m", "as generated")
    return root


def tool(repo: Path, name: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "GITOPS_PYTHON": sys.executable}
    return subprocess.run([str(repo / "scripts" / name), *args], cwd=repo, env=env, capture_output=True, text=True)


def status(repo: Path) -> str:
    return git(repo, "status", "--porcelain")


def errors_in(repo: Path, env: str) -> list[dict]:
    result = tool(repo, "validate", "--env", env, "--format", "json")
    assert result.returncode in (0, 1), result.stderr
    return [f for f in json.loads(result.stdout)["findings"] if f["severity"] == "error"]


def diff_objects(repo: Path) -> dict[str, list[tuple[str, str]]]:
    git(repo, "add", "-A")   # diff compares the working tree; untracked files count once added
    result = tool(repo, "diff", "--base", "HEAD", "--format", "json")
    assert result.returncode == 0, result.stderr
    def key(change: dict) -> str:
        return "/".join(part for part in (change["kind"], change["namespace"], change["name"]) if part)

    return {env["name"]: [(o["status"], key(o)) for o in env["objects"]]
            for env in json.loads(result.stdout)["environments"] if env["objects"]}


def test_new_environment_validates_clean_and_diff_shows_only_it(repo):
    result = tool(repo, "new-environment", "staging", "--instance-type", "g6.12xlarge", "--nodes", "3",
                  "--region", "eu-west-1", "--fsx-deployment-type", "PERSISTENT_2", "--fsx-capacity-gib", "2400")
    assert result.returncode == 0, result.stderr
    assert errors_in(repo, "staging") == []
    changes = diff_objects(repo)
    assert list(changes) == ["staging"]
    assert {status for status, _ in changes["staging"]} == {"added"}
    resources = {resource for _, resource in changes["staging"]}
    assert {"MPIJob/training/horovod-train", "StorageClass/fsx-lustre",
            "DaemonSet/kube-system/aws-efa-k8s-device-plugin-daemonset"} <= resources


def test_new_environment_twice_refuses_and_writes_nothing(repo):
    args = ("qa", "--instance-type", "g5.xlarge", "--nodes", "1")
    assert tool(repo, "new-environment", *args).returncode == 0
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "qa")
    second = tool(repo, "new-environment", *args)
    assert second.returncode == 2
    assert second.stderr.strip() == ("error: NAME: environment 'qa' already exists (clusters/qa); "
                                     "choose another name or edit its overlays")
    assert status(repo) == ""


REFUSED = {
    "existing-name": (["dev", "--instance-type", "g5.xlarge", "--nodes", "1"], None),
    "bad-name": (["Stage_1", "--instance-type", "g5.xlarge", "--nodes", "1"], answers.check_slug("Stage_1", "NAME")),
    "unknown-type": (["qa", "--instance-type", "p9.huge", "--nodes", "1"],
                     answers.check_gpu_instance_type("p9.huge")),
    "cpu-type": (["qa", "--instance-type", "m5.xlarge", "--nodes", "1"], answers.check_gpu_instance_type("m5.xlarge")),
    "efa-without-efa": (["qa", "--instance-type", "g5.xlarge", "--nodes", "1", "--efa"],
                        answers.parse_efa("on", "g5.xlarge")[1]),
    "zero-nodes": (["qa", "--instance-type", "g5.xlarge", "--nodes", "0"], answers.parse_count("0", "gpu_node_count")[1]),
    "az-elsewhere": (["qa", "--instance-type", "g5.xlarge", "--nodes", "1", "--region", "us-east-1",
                      "--availability-zone", "eu-west-1a"], answers.check_availability_zone("eu-west-1a", "us-east-1")),
    "fsx-size": (["qa", "--instance-type", "g5.xlarge", "--nodes", "1", "--fsx-capacity-gib", "1000"],
                 answers.check_fsx("SCRATCH_2", "1000", "")),
    "s3-on-persistent2": (["qa", "--instance-type", "g5.xlarge", "--nodes", "1", "--fsx-deployment-type",
                           "PERSISTENT_2", "--fsx-s3-import-path", "s3://bucket"],
                          answers.check_fsx("PERSISTENT_2", "1200", "s3://bucket")),
}


@pytest.mark.parametrize("args, message", REFUSED.values(), ids=REFUSED.keys())
def test_new_environment_refusals_match_the_template_and_touch_nothing(repo, args, message):
    result = tool(repo, "new-environment", *args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    if message is not None:
        assert lines[0] == f"error: {message}"   # the pre-generation hook prints the same line
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
    assert text.index("resources:") < text.index("patches:")
    assert "- mpijob-bert.yaml" in text
    git(repo, "add", "-A")
    git(repo, "commit", "--quiet", "-m", "bert")
    again = tool(repo, "new-job", *args)
    assert again.returncode == 0 and "nothing to do" in again.stdout
    assert status(repo) == ""
    other = tool(repo, "new-job", "bert", "--env", "prod", "--workers", "2")
    assert other.returncode == 2 and "already exists" in other.stderr
    assert status(repo) == ""


def test_new_job_impossible_request_refused_with_the_validators_message(repo):
    result = tool(repo, "new-job", "huge", "--env", "dev", "--workers", "50")
    assert result.returncode == 2
    line = result.stderr.strip()
    assert line.startswith("error: ") and "\n" not in line
    rule = line.removeprefix("error: ").split(":")[0]
    assert rule == "gpu-capacity-exceeded", line
    assert status(repo) == ""


def test_new_job_bad_arguments(repo):
    for args in (["x", "--env", "nowhere", "--workers", "1"], ["x", "--env", "dev", "--workers", "0"],
                 ["Bad_Name", "--env", "dev", "--workers", "1"]):
        result = tool(repo, "new-job", *args)
        assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert status(repo) == ""
