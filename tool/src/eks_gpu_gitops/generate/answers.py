"""Checks of the template's answers and of the generators' options: one set, shared by the pre-generation hook
and the generators (scripts/new-environment, scripts/new-job), so that nothing either writes is nonsense that
eksctl, EKS, EC2, the API server, Flux or the job would refuse later.

Each check returns None when the answer is good, or one line that names the question (or option) and says how to
fix it. `check_answers` runs them all in question order. Every pattern is matched whole (`fullmatch`): a `$`
also matches before a final newline. Bounds come from facts/limits.py and facts/catalog.py, with their sources.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata

from ..facts import catalog, eks, fsx, limits
from ..model.scope import is_production

_DNS_1123_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
# What the MPI operator needs of an MPIJob's name (kubeflow/mpi-operator v0.8.2,
# pkg/apis/kubeflow/validation/validation.go validateMPIJobName): `<name>-worker-<replicas-1>`, the last worker's
# host name, must be a DNS-1035 label (k8s.io/apimachinery pkg/util/validation IsDNS1035Label): at most 63
# characters, a lowercase letter first.
_DNS_1035_LABEL = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
DNS_LABEL_MAX = 63
_CLUSTER_NAME = re.compile(r"[a-zA-Z][-a-zA-Z0-9]*")
_IMAGE_REPOSITORY = re.compile(r"[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)+")
# The registries the image workflow can push to without static keys (.github/workflows/image.yaml):
# GHCR with the workflow's token, ECR through an IAM role assumed with GitHub's OIDC token.
_REPOSITORY_PATH = r"[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*"
_GHCR = re.compile(rf"ghcr\.io/{_REPOSITORY_PATH}/{_REPOSITORY_PATH}")
_ECR = re.compile(
    rf"[0-9]{{12}}\.dkr\.ecr\.(?P<region>[a-z]{{2}}(?:-[a-z]+)+-[0-9])\.amazonaws\.com/{_REPOSITORY_PATH}"
)
PUSHABLE_REPOSITORIES = "ghcr.io/<owner>/<name> or <account>.dkr.ecr.<region>.amazonaws.com/<name> (lowercase, no tag)"
_IMAGE_TAG = re.compile(limits.TAG)
_GIT_URL = re.compile(r"(https://|ssh://)[^\s]+")
_GIT_BRANCH = re.compile(r"(?!/)(?!.*(\.\.|//|@\{))[A-Za-z0-9._/-]+(?<![./])")
_WHOLE_NUMBER = re.compile("[0-9]+")
# Unicode categories no answer may hold: control, format (zero-width and bidirectional marks), surrogate,
# private-use and unassigned characters, and the line and paragraph separators.
_NOT_TEXT = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")
# The longest environment suffix the template adds to names ("-prod"), plus room for new ones.
ENV_SUFFIX_ROOM = 12
EKS_CLUSTER_NAME_LIMIT = 100
# The only answers to the efa question: auto (on where the instance type has EFA), on, off.
EFA_CHOICES = ("auto", "on", "off")


# The longest value a message repeats in full; a longer one is cut, so the line stays readable.
_SHOWN = 80


def _bad(question: str, value: object, problem: str, fix: str) -> str:
    shown = repr(value)
    if len(shown) > _SHOWN:
        shown = f"{shown[: _SHOWN - 20]}... ({len(str(value))} characters)"
    return f"{question}: {shown} {problem}; {fix}"


def check_line(value: object, question: str) -> str | None:
    """Free text: one line of printable characters (it lands in YAML, comments, READMEs and file names)."""
    if not isinstance(value, str) or any(unicodedata.category(c) in _NOT_TEXT for c in value):
        return _bad(question, value, "is not one line of plain text", "remove line breaks and control characters")
    return None


def check_slug(slug: str, question: str = "project_slug") -> str | None:
    if len(slug) > DNS_LABEL_MAX or not _DNS_1123_LABEL.fullmatch(slug):
        return _bad(
            question,
            slug,
            "is not a DNS-1123 label",
            "use at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit",
        )
    return None


def check_region(region: str) -> str | None:
    if region not in eks.REGIONS:
        return _bad(
            "aws_region", region, "is not an AWS commercial region", "use a region code such as us-west-2 or eu-west-1"
        )
    return None


def check_availability_zone(az: str, region: str) -> str | None:
    if check_line(az, "availability_zone") or not eks.az_in_region(az, region):
        return _bad(
            "availability_zone",
            az,
            f"is not an availability zone of {region}",
            f"use {region} followed by a zone letter, e.g. {region}a",
        )
    return None


def check_kubernetes_version(version: str) -> str | None:
    if version not in eks.SUPPORTED_KUBERNETES_VERSIONS:
        return _bad(
            "kubernetes_version",
            version,
            "is not a Kubernetes version EKS supports",
            "use one of " + ", ".join(eks.SUPPORTED_KUBERNETES_VERSIONS),
        )
    return None


def check_cluster_name(name: str) -> str | None:
    if len(name) + ENV_SUFFIX_ROOM > EKS_CLUSTER_NAME_LIMIT or not _CLUSTER_NAME.fullmatch(name):
        return _bad(
            "cluster_name",
            name,
            "is not a valid EKS cluster name prefix",
            "start with a letter, use letters, digits and '-', "
            f"at most {EKS_CLUSTER_NAME_LIMIT - ENV_SUFFIX_ROOM} characters",
        )
    return None


def check_environment_name(name: str, cluster_prefix: str) -> str | None:
    """A new environment's NAME: a DNS-1123 label that keeps `<prefix>-<name>` a valid EKS cluster name."""
    problem = check_slug(name, question="NAME")
    if problem:
        return problem
    longest = EKS_CLUSTER_NAME_LIMIT - len(cluster_prefix) - 1
    if len(name) > longest:
        return _bad(
            "NAME",
            name,
            f"makes the EKS cluster name {cluster_prefix}-{name} longer than {EKS_CLUSTER_NAME_LIMIT} characters",
            f"use at most {longest} characters",
        )
    return None


def check_gpu_instance_type(name: str, question: str = "gpu_instance_type") -> str | None:
    known = catalog.lookup(name)
    if known is None:
        return _bad(
            question,
            name,
            "is not a known instance type",
            "choose a GPU type such as g5.xlarge, g6.12xlarge, p4d.24xlarge or p5.48xlarge",
        )
    if known.gpus == 0:
        return _bad(question, name, "has no GPU", "choose a GPU type such as g5.xlarge or p4d.24xlarge")
    if not known.trainer_image_supported:
        return _bad(
            question,
            name,
            f"has {known.gpu_model} (Blackwell) GPUs, which need CUDA 12.8 or later; the trainer image is "
            "TensorFlow 2.15 on CUDA 12.2",
            "choose a Hopper or older type such as p5.48xlarge, p5en.48xlarge or p4d.24xlarge",
        )
    return None


def parse_count(
    value: object, question: str, counted: str = "nodes", most: int | None = None, bound: str = ""
) -> tuple[int | None, str | None]:
    """A positive whole number written in ASCII digits, at most `most` when given; `bound` says where that
    limit comes from, `counted` names what is counted in the message: nodes, workers, GPUs."""
    fix = f"give a number of {counted}, " + (f"1 to {most}" if most is not None else "1 or more")
    text = str(value)
    if not _WHOLE_NUMBER.fullmatch(text):
        if text.startswith("-") and _WHOLE_NUMBER.fullmatch(text[1:]):
            return None, _bad(question, value, "is less than 1", fix)
        return None, _bad(question, value, "is not a whole number", fix)
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(limits.API_INTEGER_MAX)):  # never made a number of (Python refuses 4300 digits)
        most, bound = (limits.API_INTEGER_MAX, "the largest number the APIs take") if most is None else (most, bound)
        return None, _bad(question, value, f"is more than {most}, {bound}", fix)
    count = int(digits)
    if count < 1:
        return None, _bad(question, value, "is less than 1", fix)
    if most is not None and count > most:
        return None, _bad(question, value, f"is more than {most}, {bound}", fix)
    return count, None


def node_count_limit(capacity_block: bool) -> tuple[int, str]:
    """The most GPU nodes one environment's gpu group may have, and why (facts/limits.py)."""
    if capacity_block:
        return limits.CAPACITY_BLOCK_MAX_INSTANCES, "the most instances a Capacity Block holds"
    return limits.MANAGED_NODE_GROUP_NODES, "EKS's default quota of nodes per managed node group"


def parse_node_count(value: object, capacity_block: bool, question: str = "gpu_node_count") -> tuple:
    most, bound = node_count_limit(capacity_block)
    return parse_count(value, question, "nodes", most, bound)


def parse_efa(value: object, instance_type: str) -> tuple[bool | None, str | None]:
    """'auto' means on where the type has EFA; 'on' on a type without EFA is refused."""
    if value not in EFA_CHOICES:
        return None, _bad("efa", value, "is not one of auto, on, off", "answer auto, on or off")
    known = catalog.lookup(instance_type)
    has_efa = bool(known and known.has_efa)
    if value == "on" and not has_efa:
        return None, _bad(
            "efa",
            value,
            f"is not possible: {instance_type} has no EFA interface",
            "answer 'off' or 'auto', or choose an EFA type such as p4d.24xlarge or g5.8xlarge",
        )
    return has_efa if value == "auto" else value == "on", None


YES_NO = ("no", "yes")


def check_capacity_reservation(reservation: str, capacity_block: str) -> str | None:
    """An On-Demand Capacity Reservation or Capacity Block for ML for the GPU nodes (one id, cr-...)."""
    if reservation and (check_line(reservation, "") or not eks.CAPACITY_RESERVATION_ID.match(reservation)):
        return _bad(
            "gpu_capacity_reservation",
            reservation,
            "is not a capacity reservation id",
            "give the id EC2 shows for it, cr- and 17 hex digits, or leave it empty",
        )
    if capacity_block not in YES_NO:
        return _bad("gpu_capacity_block", capacity_block, "is not yes or no", "answer yes or no")
    if capacity_block == "yes" and not reservation:
        return _bad(
            "gpu_capacity_block",
            capacity_block,
            "needs the Capacity Block's reservation id",
            "give gpu_capacity_reservation (cr-...) or answer no",
        )
    return None


def check_spot(env: str, efa: bool, reservation: str) -> str | None:
    """Spot GPU nodes may be reclaimed at two minutes' notice: for development environments only,
    never with EFA (a reclaimed node ends the whole MPI job) or a reservation."""
    if is_production(env):
        return _bad("--spot", env, "is a production environment", "use Spot for development environments only")
    if efa:
        return _bad("--spot", env, "would run EFA nodes on Spot", "give --no-efa with --spot, or drop --spot")
    if reservation:
        return _bad("--spot", env, "also has a capacity reservation", "give one of --spot and --capacity-reservation")
    return None


def check_dev_spot(choice: str) -> str | None:
    """The template's dev environment on Spot GPU nodes. Dev never has EFA or a reservation (generate/bake.py),
    so check_spot's refusals cannot apply; only the answer itself can be wrong."""
    if choice not in YES_NO:
        return _bad("dev_gpu_spot", choice, "is not yes or no", "answer yes or no")
    return None


def check_fsx(deployment_type: str, capacity: object, s3_import_path: str) -> str | None:
    if deployment_type not in fsx.DEPLOYMENT_TYPES:
        return _bad(
            "fsx_deployment_type",
            deployment_type,
            "is not an FSx for Lustre deployment type",
            "use one of " + ", ".join(fsx.DEPLOYMENT_TYPES),
        )
    if not _WHOLE_NUMBER.fullmatch(str(capacity)):
        return _bad("fsx_capacity_gib", capacity, "is not a whole number of GiB", "use e.g. 1200")
    digits = str(capacity).lstrip("0") or "0"
    most = limits.FSX_STORAGE_CAPACITY_MAX
    if len(digits) > len(str(most)) or int(digits) > most:
        return _bad("fsx_capacity_gib", capacity, f"is more than the FSx API takes ({most})", "use e.g. 1200")
    gib = int(digits)
    problem = fsx.capacity_error(deployment_type, gib)
    if problem:
        return _bad("fsx_capacity_gib", capacity, "is not a size FSx creates exactly", problem)
    if s3_import_path:
        if check_line(s3_import_path, "") or fsx.s3_bucket(s3_import_path) is None:
            return _bad(
                "fsx_s3_import_path",
                s3_import_path,
                "is not an S3 path",
                "use s3://bucket or s3://bucket/prefix, or leave it empty",
            )
        if not fsx.supports_s3_import(deployment_type):
            return _bad(
                "fsx_s3_import_path",
                s3_import_path,
                f"cannot be linked to a {deployment_type} file system",
                "leave it empty or use SCRATCH_1, SCRATCH_2 or PERSISTENT_1",
            )
    return None


def image_registry(repository: str) -> tuple[str, str] | None:
    """("ghcr", "") or ("ecr", region) for a repository the image workflow can push to, else None."""
    if _GHCR.fullmatch(repository):
        return "ghcr", ""
    ecr = _ECR.fullmatch(repository)
    return ("ecr", ecr["region"]) if ecr else None


def check_image(image: object, question: str = "--image") -> str | None:
    """An image reference the kubelet can pull (facts/limits.py: distribution/reference's grammar)."""
    problem = check_line(image, question)
    if problem:
        return problem
    problem = limits.parse_image(image)[1]
    if problem:
        return _bad(
            question,
            image,
            f"is not an image reference ({problem})",
            "use [registry/]repository[:tag][@sha256:digest] with a lowercase repository, "
            "e.g. ghcr.io/org/trainer:0.1.0",
        )
    return None


def check_mpijob_name(name: str, workers: int | None = None, question: str = "NAME") -> str | None:
    """An MPIJob's name; with `workers`, one that leaves the last worker's host name a DNS-1035 label."""
    if len(name) > DNS_LABEL_MAX or not _DNS_1035_LABEL.fullmatch(name):
        return _bad(
            question,
            name,
            "is not a DNS-1035 label",
            f"use at most {DNS_LABEL_MAX} lowercase letters, digits and '-', starting with a letter and ending with "
            "a letter or digit",
        )
    if workers is not None:
        host = f"{name}-worker-{workers - 1}"
        if len(host) > DNS_LABEL_MAX:
            return _bad(
                question,
                name,
                f"makes the last worker's host name {host} longer than {DNS_LABEL_MAX} characters",
                f"use at most {DNS_LABEL_MAX - len(host) + len(name)} characters",
            )
    return None


def check_inside(path: object, top: str, question: str) -> str | None:
    """A path inside the container folder `top` (a volume's mountPath), without `..` or repeated slashes."""
    problem = check_line(path, question)
    if problem:
        return problem
    inside = posixpath.isabs(path) and posixpath.normpath(path) == path.rstrip("/")
    if not inside or not (path == top or path.startswith(top.rstrip("/") + "/")):
        return _bad(question, path, f"is not a folder inside {top}", f"use an absolute path under {top}/ without '..'")
    return None


def as_option(problem: str | None, options: dict[str, str]) -> str | None:
    """A problem line that names questions, naming the generator options they are asked as instead: the one it
    is about, and those its fix names (after the last "; ")."""
    if problem is None:
        return None
    question, colon, rest = problem.partition(":")
    said, semicolon, fix = rest.rpartition("; ")
    for name, option in options.items():
        fix = re.sub(rf"\b{name}\b", option, fix)
    return options.get(question, question) + colon + said + semicolon + fix


def check_image_repository(repository: str) -> str | None:
    if not _IMAGE_REPOSITORY.fullmatch(repository):
        return _bad(
            "trainer_image_repository",
            repository,
            "is not an image repository",
            "use registry/path without a tag, e.g. 123456789012.dkr.ecr.us-west-2.amazonaws.com/trainer",
        )
    if image_registry(repository) is None:
        return _bad(
            "trainer_image_repository",
            repository,
            "is not a registry the image workflow can push to without static keys",
            f"use {PUSHABLE_REPOSITORIES}",
        )
    return None


def check_image_tag(tag: str) -> str | None:
    if not _IMAGE_TAG.fullmatch(tag) or tag == "latest":
        return _bad(
            "trainer_image_tag",
            tag,
            "is not a pinned image tag",
            "use a version such as 0.1.0 (not 'latest', which changes under a running job)",
        )
    return None


def check_git(url: str, branch: str) -> str | None:
    if check_line(url, "") or not _GIT_URL.fullmatch(url):
        return _bad(
            "git_repository_url",
            url,
            "is not a Git URL Flux can sync from",
            "use https://github.com/<owner>/<repo> or ssh://git@<host>/<owner>/<repo>",
        )
    if not _GIT_BRANCH.fullmatch(branch):
        return _bad("git_branch", branch, "is not a branch name", "use e.g. main")
    return None


def check_environment_answers(answers: dict) -> list[str]:
    """Problems with the answers that shape one environment (the hook's and new-environment's)."""
    problems = [
        check_region(answers["aws_region"]),
        check_availability_zone(answers["availability_zone"], answers["aws_region"]),
        check_gpu_instance_type(answers["gpu_instance_type"]),
    ]
    type_ok = problems[-1] is None
    problems.append(parse_node_count(answers["gpu_node_count"], answers.get("gpu_capacity_block") == "yes")[1])
    if type_ok:  # EFA depends on a known instance type
        problems.append(parse_efa(answers["efa"], answers["gpu_instance_type"])[1])
    problems.append(
        check_fsx(answers["fsx_deployment_type"], answers["fsx_capacity_gib"], answers["fsx_s3_import_path"])
    )
    problems.append(
        check_capacity_reservation(answers.get("gpu_capacity_reservation", ""), answers.get("gpu_capacity_block", "no"))
    )
    return [p for p in problems if p]


def check_answers(answers: dict) -> list[str]:
    """All problems with a complete set of template answers, in question order."""
    problems = [
        check_line(answers.get("project_name", ""), "project_name"),
        check_slug(answers["project_slug"]),
        check_kubernetes_version(answers["kubernetes_version"]),
        check_cluster_name(answers["cluster_name"]),
    ]
    problems += check_environment_answers(answers)
    problems += [
        check_dev_spot(answers.get("dev_gpu_spot", "no")),
        check_image_repository(answers["trainer_image_repository"]),
        check_image_tag(answers["_trainer_image_tag"]),
        check_git(answers["git_repository_url"], answers["git_branch"]),
    ]
    return [p for p in problems if p]
