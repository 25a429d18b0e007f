"""Where the image workflow pushes the trainer image: the `newName` of the `trainer` image in
overlays/base/training/kustomization.yaml, and the registry it names, which decides how the
workflow logs in (GHCR: the workflow's token; ECR: an IAM role assumed through GitHub's OIDC).

    eks-gpu-gitops image-repository [--root DIR]   (scripts/tool image-repository in the image workflow)

prints `image=...`, `registry=ghcr|ecr` and `aws-region=...` (empty for GHCR), one a line, the
format of $GITHUB_OUTPUT. Any other registry is an error: the workflow has no way to log in to it
without static credentials.
"""

from __future__ import annotations

from pathlib import Path

from ..core.errors import InputError
from ..core.yaml_file import load_mapping
from .answers import PUSHABLE_REPOSITORIES, image_registry

KUSTOMIZATION = Path("overlays") / "base" / "training" / "kustomization.yaml"
IMAGE = "trainer"


def resolve(image: str) -> dict[str, str]:
    """The workflow's outputs for an image repository (no tag)."""
    found = image_registry(image)
    if found is None:
        raise InputError(
            f"{KUSTOMIZATION}: image {IMAGE!r} has newName {image!r}, which the image workflow cannot push to; "
            f"use {PUSHABLE_REPOSITORIES}"
        )
    registry, region = found
    return {"image": image, "registry": registry, "aws-region": region}


def configured(root: Path) -> str:
    """The `newName` of the trainer image in the base training kustomization."""
    kustomization = load_mapping(root / KUSTOMIZATION, KUSTOMIZATION)
    images = kustomization.get("images")
    names = [i.get("newName") for i in images or [] if isinstance(i, dict) and i.get("name") == IMAGE]
    if len(names) != 1 or not isinstance(names[0], str):
        raise InputError(f"{KUSTOMIZATION}: needs one `images` entry named {IMAGE!r} with a newName")
    return names[0]
