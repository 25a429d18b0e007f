"""Amazon EKS facts the template and the scripts share: Kubernetes versions and regions."""

from __future__ import annotations

import re

# Versions in EKS standard or extended support on the template's release date, oldest first.
# 1.31 leaves extended support on 2026-11-26; 1.36 is not confirmed generally available.
SUPPORTED_KUBERNETES_VERSIONS = ("1.32", "1.33", "1.34", "1.35")
# The version eksctl v0.230.0 creates when none is given (`DefaultVersion`).
DEFAULT_KUBERNETES_VERSION = "1.34"


def version_key(version: str) -> tuple[int, ...]:
    """(major, minor) of "1.34", "v1.34.2" or 1.34; () when there is no number."""
    return tuple(int(p) for p in re.findall(r"\d+", str(version))[:2])


# Commercial regions (not China or GovCloud, which need other partitions and image registries).
REGIONS = (
    "us-east-1",
    "us-east-2",
    "us-west-1",
    "us-west-2",
    "ca-central-1",
    "ca-west-1",
    "sa-east-1",
    "mx-central-1",
    "eu-west-1",
    "eu-west-2",
    "eu-west-3",
    "eu-central-1",
    "eu-central-2",
    "eu-north-1",
    "eu-south-1",
    "eu-south-2",
    "ap-east-1",
    "ap-south-1",
    "ap-south-2",
    "ap-northeast-1",
    "ap-northeast-2",
    "ap-northeast-3",
    "ap-southeast-1",
    "ap-southeast-2",
    "ap-southeast-3",
    "ap-southeast-4",
    "ap-southeast-5",
    "ap-southeast-7",
    "me-south-1",
    "me-central-1",
    "il-central-1",
    "af-south-1",
)

# Amazon EKS publishes its images (the EFA device plugin among them) from one account in most regions
# and from its own account in the others: eksctl v0.230.0, EKSResourceAccountID and the
# eksResourceAccount* constants in pkg/apis/eksctl.io/v1alpha5/types.go.
_EKS_IMAGE_ACCOUNT = "602401143452"
_EKS_IMAGE_ACCOUNTS = {
    "ap-east-1": "800184023465",
    "ca-west-1": "761377655185",
    "me-central-1": "759879836304",
    "me-south-1": "558608220178",
    "af-south-1": "877085696533",
    "eu-south-1": "590381155156",
    "eu-south-2": "455263428931",
    "eu-central-2": "900612956339",
    "ap-south-2": "900889452093",
    "ap-southeast-3": "296578399912",
    "ap-southeast-4": "491585149902",
    "ap-southeast-5": "151610086707",
    "ap-southeast-7": "121268973566",
    "il-central-1": "066635153087",
    "mx-central-1": "730335286997",
}


def eks_image_registry(region: str) -> str:
    """The registry of Amazon EKS's own images in `region`, e.g. 602401143452.dkr.ecr.us-west-2.amazonaws.com."""
    return f"{_EKS_IMAGE_ACCOUNTS.get(region, _EKS_IMAGE_ACCOUNT)}.dkr.ecr.{region}.amazonaws.com"


# An EC2 capacity reservation's id, which On-Demand Capacity Reservations and Capacity Blocks for ML share.
CAPACITY_RESERVATION_ID = re.compile(r"^cr-[0-9a-f]{17}$")


# An AZ name is its region followed by one zone letter (us-west-2a). Which letters exist
# differs per account, so the letter itself is only checked for shape.
_AZ_SUFFIX = re.compile(r"^[a-z]$")


def az_in_region(availability_zone: str, region: str) -> bool:
    return availability_zone.startswith(region) and bool(_AZ_SUFFIX.match(availability_zone[len(region) :]))


def second_zone(region: str, availability_zone: str) -> str:
    """Another zone of the region for the EKS control plane, which needs two."""
    return region + ("b" if availability_zone.endswith("a") else "a")
