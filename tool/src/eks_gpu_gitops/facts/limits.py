"""What the outside world accepts, for the two sides that check it: the generators' options and the template's
answers (generate/answers.py), and the validator's rules over files written by hand (rules/capacity.py).

Image references: the grammar of github.com/distribution/reference v0.6.0 (regexp.go, reference.go Parse,
normalize.go ParseNormalizedNamed and splitDockerDomain) with the digest check of github.com/opencontainers/go-digest
v1.0.0 (digest.go Validate, algorithm.go). The kubelet parses every container's image with it before pulling:
k8s.io/kubernetes v1.34.4 pkg/util/parsers/parsers.go ParseImageName calls ParseNormalizedNamed, and
pkg/kubelet/images/image_manager.go EnsureImageExists turns its error into the container's InvalidImageName state,
so the pod never starts. The regular expressions are Go's RE2 ones, matched whole (Go's `$` never matches before
a final newline, Python's does) and ASCII only (RE2's `\\w`).

Node group sizes: eksctl v0.230.0 checks minSize <= desiredCapacity <= maxSize (pkg/apis/eksctl.io/v1alpha5/
validation.go ValidateManagedNodeGroup for managed groups, pkg/cfn/builder/nodegroup.go for the others), filling in
a missing minSize from desiredCapacity or DefaultNodeCount (2, types.go); EC2 Auto Scaling keeps the desired
capacity between the two (EC2 Auto Scaling User Guide, "Set scaling limits for your Auto Scaling group"); the EKS
API takes minSize and desiredSize from 0 and maxSize from 1, as 32-bit integers (botocore's EKS model 2017-11-01,
NodegroupScalingConfig: ZeroCapacity and Capacity); and a managed node group holds at most 450 nodes unless the
account's quota is raised (Amazon EKS User Guide, "Amazon EKS service quotas": Nodes per managed node group, 450,
adjustable).

Standard library only: the template's pre-generation hook imports this through generate/answers.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# --- image references -----------------------------------------------------------------------------

_ALPHANUMERIC = "[a-z0-9]+"
_SEPARATOR = "(?:[._]|__|[-]+)"
_PATH_COMPONENT = f"{_ALPHANUMERIC}(?:{_SEPARATOR}{_ALPHANUMERIC})*"
_REMOTE_NAME = f"{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*"
_DOMAIN_COMPONENT = "(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN_NAME = rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*"
_HOST = rf"(?:{_DOMAIN_NAME}|\[(?:[a-fA-F0-9:]+)\])"
_DOMAIN_AND_PORT = f"{_HOST}(?::[0-9]+)?"
_NAME = f"(?:{_DOMAIN_AND_PORT}/)?{_REMOTE_NAME}"
TAG = "[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = "[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*[:][0-9a-fA-F]{32,}"
_REFERENCE = re.compile(f"({_NAME})(?::({TAG}))?(?:@({_DIGEST}))?")
_ANCHORED_NAME = re.compile(f"(?:({_DOMAIN_AND_PORT})/)?({_REMOTE_NAME})")
_IDENTIFIER = re.compile("[a-f0-9]{64}")
# go-digest's registered algorithms (the kubelet links crypto/sha256 and crypto/sha512) and their hex lengths.
_DIGEST_HEX_LENGTHS = {"sha256": 64, "sha384": 96, "sha512": 128}
REPOSITORY_NAME_MAX = 255
_DEFAULT_DOMAIN, _LEGACY_DOMAIN, _OFFICIAL_PREFIX = "docker.io", "index.docker.io", "library/"


@dataclass(frozen=True)
class ImageReference:
    domain: str  # docker.io for a familiar name such as ubuntu
    path: str  # library/ubuntu
    tag: str  # "" when none
    digest: str  # "" when none, else algorithm:hex


def _split_docker_domain(name: str) -> tuple[str, str]:
    maybe_domain, slash, maybe_remote = name.partition("/")
    if not slash:
        return _DEFAULT_DOMAIN, _OFFICIAL_PREFIX + name
    if maybe_domain == _LEGACY_DOMAIN:
        domain, remote = _DEFAULT_DOMAIN, maybe_remote
    elif maybe_domain == "localhost" or any(c in maybe_domain for c in ".:") or maybe_domain.lower() != maybe_domain:
        domain, remote = maybe_domain, maybe_remote
    else:
        domain, remote = _DEFAULT_DOMAIN, name
    if domain == _DEFAULT_DOMAIN and "/" not in remote:
        remote = _OFFICIAL_PREFIX + remote
    return domain, remote


def _digest_problem(digest: str) -> str | None:
    algorithm, _, encoded = digest.partition(":")
    length = _DIGEST_HEX_LENGTHS.get(algorithm)
    if length is None:
        return f"unsupported digest algorithm {algorithm}"
    if len(encoded) != length:
        return "invalid checksum digest length"
    if not re.fullmatch("[a-f0-9]+", encoded):
        return "invalid checksum digest format"
    return None


def parse_image(image: str) -> tuple[ImageReference | None, str | None]:
    """(the reference, None), or (None, why the kubelet refuses it) as ParseNormalizedNamed says it."""
    if _IDENTIFIER.fullmatch(image):
        return None, "a 64-digit hexadecimal string is an image id, not a name"
    domain, remainder = _split_docker_domain(image)
    remote = remainder.partition(":")[0]
    if remote.lower() != remote:
        return None, f"repository name {remote} must be lowercase"
    match = _REFERENCE.fullmatch(f"{domain}/{remainder}")
    if match is None:
        return None, "invalid reference format"
    name = _ANCHORED_NAME.fullmatch(match[1])
    if len(name[2]) > REPOSITORY_NAME_MAX:
        return None, f"repository name must not be more than {REPOSITORY_NAME_MAX} characters"
    if match[3]:
        problem = _digest_problem(match[3])
        if problem:
            return None, problem
    return ImageReference(name[1] or "", name[2], match[2] or "", match[3] or ""), None


# --- node group sizes -----------------------------------------------------------------------------

SIZE_FIELDS = ("minSize", "desiredCapacity", "maxSize")
# eksctl v0.230.0 pkg/apis/eksctl.io/v1alpha5/types.go: a group with neither minSize nor desiredCapacity gets 2.
EKSCTL_DEFAULT_NODE_COUNT = 2
# The EKS and EC2 Auto Scaling APIs take sizes as 32-bit integers.
API_INTEGER_MAX = 2**31 - 1
# Amazon EKS service quota "Nodes per managed node group": the default, which an account can have raised.
MANAGED_NODE_GROUP_NODES = 450
# A Capacity Block holds 1 to 64 instances (Amazon EC2 User Guide, "Capacity Blocks for ML").
CAPACITY_BLOCK_MAX_INSTANCES = 64
# The FSx API's StorageCapacity, in GiB (botocore's FSx model 2018-03-01, CreateFileSystemRequest: 0 to 2**31-1).
FSX_STORAGE_CAPACITY_MAX = 2**31 - 1


def node_group_size_problems(group: dict, managed: bool) -> list[tuple[str, str]]:
    """(field, why eksctl, EKS or EC2 Auto Scaling refuses it) for a node group's minSize, desiredCapacity and
    maxSize; sizes that are not integers are the schema check's."""
    sizes = {f: group[f] for f in SIZE_FIELDS if type(group.get(f)) is int}
    problems = []
    for field, size in sizes.items():
        if size < 0:
            problems.append((field, f"{field} {size} is negative"))
        elif size > API_INTEGER_MAX:
            problems.append((field, f"{field} {size} is more than the EKS and Auto Scaling APIs take"))
    if problems:
        return problems
    low, desired, high = (sizes.get(f) for f in SIZE_FIELDS)
    if low is not None and desired is not None and desired < low:
        problems.append(("desiredCapacity", f"desiredCapacity {desired} is less than minSize {low}"))
    if high is not None:
        least = low if low is not None else desired if desired is not None else EKSCTL_DEFAULT_NODE_COUNT
        if desired is not None and desired > high:
            problems.append(("desiredCapacity", f"desiredCapacity {desired} is more than maxSize {high}"))
        elif high < least:
            given = "minSize" if low is not None else "the minSize eksctl fills in"
            problems.append(("maxSize", f"maxSize {high} is less than {given} ({least})"))
        elif managed and high == 0:
            problems.append(("maxSize", "maxSize 0: EKS takes a managed node group's maxSize from 1"))
    return problems
