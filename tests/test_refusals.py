"""Bad answers are refused by the pre-generation hook through the real cookiecutter CLI:
non-zero exit, one line on stderr naming the question and the fix, no project folder."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

COOKIECUTTER = Path(sys.executable).parent / "cookiecutter"

BAD_ANSWERS = {
    "slug-not-dns-label": ({"project_slug": "My_Project"}, "project_slug"),
    "slug-too-long": ({"project_slug": "a" * 64}, "project_slug"),
    "unknown-region": ({"aws_region": "us-middle-1", "availability_zone": "us-middle-1a"}, "aws_region"),
    "az-not-in-region": ({"aws_region": "us-west-2", "availability_zone": "us-east-1a"}, "availability_zone"),
    "unknown-instance-type": ({"gpu_instance_type": "p9.huge"}, "gpu_instance_type"),
    "non-gpu-instance-type": ({"gpu_instance_type": "m5.xlarge"}, "gpu_instance_type"),
    "efa-on-type-without-efa": ({"gpu_instance_type": "g5.xlarge", "efa": "on"}, "efa"),
    # The trainer image (TensorFlow 2.15 on CUDA 12.2) cannot drive Blackwell GPUs.
    "blackwell-b200": ({"gpu_instance_type": "p6-b200.48xlarge"}, "gpu_instance_type"),
    "blackwell-b300": ({"gpu_instance_type": "p6-b300.48xlarge"}, "gpu_instance_type"),
    "efa-nonsense": ({"efa": "maybe"}, "efa"),
    # efa takes auto, on or off only, nothing a boolean parser would read as one of them
    "efa-yes": ({"efa": "yes"}, "efa"),
    "efa-upper-case": ({"efa": "ON"}, "efa"),
    "zero-nodes": ({"gpu_node_count": "0"}, "gpu_node_count"),
    "nodes-not-a-number": ({"gpu_node_count": "two"}, "gpu_node_count"),
    "fsx-unknown-deployment-type": ({"fsx_deployment_type": "SCRATCH_3"}, "fsx_deployment_type"),
    "fsx-capacity-invalid-for-scratch2": ({"fsx_capacity_gib": "3600"}, "fsx_capacity_gib"),
    "fsx-capacity-invalid-for-scratch1": (
        {"fsx_deployment_type": "SCRATCH_1", "fsx_capacity_gib": "4800"},
        "fsx_capacity_gib",
    ),
    "s3-path-without-scheme": ({"fsx_s3_import_path": "my-bucket/data"}, "fsx_s3_import_path"),
    "s3-import-on-persistent2": (
        {"fsx_deployment_type": "PERSISTENT_2", "fsx_s3_import_path": "s3://bucket"},
        "fsx_s3_import_path",
    ),
    "kubernetes-version-unsupported": ({"kubernetes_version": "1.29"}, "kubernetes_version"),
    "image-repository-with-tag": (
        {"trainer_image_repository": "ghcr.io/org/trainer:latest"},
        "trainer_image_repository",
    ),
    # The image workflow pushes to GHCR (workflow token) or ECR (OIDC role) only, never with static keys.
    "image-repository-on-docker-hub": (
        {"trainer_image_repository": "docker.io/org/trainer"},
        "trainer_image_repository",
    ),
    "capacity-reservation-id-malformed": ({"gpu_capacity_reservation": "cr-123"}, "gpu_capacity_reservation"),
    "capacity-block-without-reservation": ({"gpu_capacity_block": "yes"}, "gpu_capacity_block"),
    "dev-spot-not-yes-or-no": ({"dev_gpu_spot": "true"}, "dev_gpu_spot"),
    "git-url-not-a-url": ({"git_repository_url": "github.com/org/repo"}, "git_repository_url"),
    "cluster-name-starts-with-digit": ({"cluster_name": "1cluster"}, "cluster_name"),
}


@pytest.mark.parametrize("answers, question", BAD_ANSWERS.values(), ids=BAD_ANSWERS.keys())
def test_bad_answer_refused_before_anything_is_written(template, tmp_path, answers, question):
    out = tmp_path / "out"
    out.mkdir()
    pairs = [f"{key}={value}" for key, value in answers.items()]
    result = subprocess.run(
        [str(COOKIECUTTER), "--no-input", str(template), "-o", str(out), *pairs],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    ours = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(ours) == 1, result.stderr
    assert ours[0].startswith(f"error: {question}: "), ours[0]
    assert "; " in ours[0], "the line must say how to fix it"
    assert list(out.iterdir()) == [], "a refused bake must leave no project folder"


def test_good_answers_pass_the_same_hook(template, tmp_path):
    result = subprocess.run(
        [
            str(COOKIECUTTER),
            "--no-input",
            str(template),
            "-o",
            str(tmp_path),
            "project_slug=x",
            "gpu_instance_type=g6.12xlarge",
            "efa=on",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "x" / "clusters" / "prod" / "training.yaml").is_file()
