"""image-repository tells the image workflow where to push the trainer image and how to
log in: GHCR or ECR (with its region), from newName in overlays/base/training/kustomization.yaml;
anything else is one error line and no output."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import REPO

from eks_gpu_gitops.core.errors import InputError
from eks_gpu_gitops.generate.image_repository import KUSTOMIZATION, configured, resolve

ECR = "123456789012.dkr.ecr.us-west-2.amazonaws.com/x-trainer"


def test_ghcr():
    assert resolve("ghcr.io/example-org/x-trainer") == {
        "image": "ghcr.io/example-org/x-trainer",
        "registry": "ghcr",
        "aws-region": "",
    }


def test_ecr_with_its_region():
    assert resolve(ECR) == {"image": ECR, "registry": "ecr", "aws-region": "us-west-2"}
    assert resolve("210987654321.dkr.ecr.ap-southeast-2.amazonaws.com/team/trainer")["aws-region"] == "ap-southeast-2"


@pytest.mark.parametrize(
    "image",
    [
        "docker.io/example-org/trainer",  # a registry the workflow cannot log in to without static keys
        "ghcr.io/example-org/trainer:1.0",  # a tag
        "ghcr.io/trainer",  # no owner
        "ghcr.io/Example-Org/trainer",  # GHCR names are lowercase
        "12345.dkr.ecr.us-west-2.amazonaws.com/trainer",  # not a 12-digit account
        "123456789012.dkr.ecr.us-west-2.amazonaws.com",  # no repository
        "123456789012.dkr.ecr.us-west-2.amazonaws.com.evil.example/trainer",
    ],
)
def test_anything_else_is_refused(image):
    with pytest.raises(InputError, match=re.escape(f"newName {image!r}, which the image workflow cannot push to")):
        resolve(image)


def test_this_repository_names_a_repository_the_workflow_pushes_to():
    assert resolve(configured(REPO))["registry"] in ("ghcr", "ecr")


def image_repository(root) -> subprocess.CompletedProcess:
    """The module as the workflow runs it, on the repository at `root`."""
    return subprocess.run(
        [sys.executable, "-m", "eks_gpu_gitops", "image-repository", "--root", str(root)],
        env=os.environ,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def root(tmp_path):
    """A repository whose trainer image's newName a test sets."""
    shutil.copytree(REPO / KUSTOMIZATION.parent, tmp_path / KUSTOMIZATION.parent)
    return tmp_path


def set_new_name(root, new_name: str) -> None:
    path = root / KUSTOMIZATION
    text = path.read_text()
    old = next(line for line in text.splitlines() if line.strip().startswith("newName:"))
    path.write_text(text.replace(old, f"    newName: {new_name}"))


def test_prints_github_outputs(root):
    set_new_name(root, ECR)
    result = image_repository(root)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"image={ECR}\nregistry=ecr\naws-region=us-west-2\n"


def test_a_malformed_repository_is_one_line_and_no_output(root):
    set_new_name(root, "quay.io/example-org/trainer")
    result = image_repository(root)
    assert result.returncode == 2 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(f"image-repository: {KUSTOMIZATION}: image 'trainer' has newName 'quay.io/")


def test_a_kustomization_without_the_trainer_image_is_one_line(root):
    (root / KUSTOMIZATION).write_text("resources: [mpijob.yaml]\n")
    result = image_repository(root)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        f"image-repository: {KUSTOMIZATION}: needs one `images` entry named 'trainer' with a newName\n"
    )
