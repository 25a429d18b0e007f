"""Add an environment: its Flux entry points, settings and overlays, shaped like the existing ones.

    scripts/new-environment NAME --instance-type T --nodes N [--efa|--no-efa] [--region R]
        [--availability-zone AZ] [--fsx-deployment-type D] [--fsx-capacity-gib G]
        [--fsx-s3-import-path P] [--delete-fsx-with-claim]
        [--capacity-reservation cr-... [--capacity-block]] [--spot]

Options are checked by the same code as the template's questions (generate/answers.py), with the
same messages except that they name the option (`--nodes`, not gpu_node_count); defaults come from
platform.yaml (new_environment). --nodes is at most EKS's default quota of nodes per managed node group,
450, or 64 with --capacity-block (facts/limits.py). The new environment is rendered in a scratch copy
first; a refusal, or an environment that does not render, writes nothing.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from ..core.errors import InputError
from ..render import platform
from ..render.repository import render_repository
from . import answers
from .environment import EnvironmentSpec

README = "README.md"
# What a render of one environment reads.
RENDERED_FROM = ("clusters", "overlays")
# The option each template question is asked as here.
OPTIONS = {
    "aws_region": "--region",
    "availability_zone": "--availability-zone",
    "gpu_instance_type": "--instance-type",
    "gpu_node_count": "--nodes",
    "efa": "--efa",
    "fsx_deployment_type": "--fsx-deployment-type",
    "fsx_capacity_gib": "--fsx-capacity-gib",
    "fsx_s3_import_path": "--fsx-s3-import-path",
    "gpu_capacity_reservation": "--capacity-reservation",
    "gpu_capacity_block": "--capacity-block",
}


def plan(root: Path, args) -> EnvironmentSpec:
    problem = answers.check_line(args.name, "NAME")
    if problem:
        raise InputError(problem)
    defaults = platform.new_environment_defaults(root)
    prefix = defaults["cluster_name_prefix"]
    problem = answers.check_cluster_name(prefix)
    if problem:
        problem = problem.replace("cluster_name", "cluster_name_prefix", 1)
        raise InputError(f"{platform.FILE}: new_environment.{problem}")
    problem = answers.check_environment_name(args.name, prefix)
    if problem:
        raise InputError(problem)
    for existing in (root / "clusters" / args.name, root / "overlays" / args.name):
        if existing.exists() or existing.is_symlink():  # a link that leads nowhere is taken too
            raise InputError(
                f"NAME: environment {args.name!r} already exists ({existing.relative_to(root)}); "
                "choose another name or edit its overlays"
            )
    region = args.region or defaults["region"]
    zone = args.availability_zone or (defaults["availability_zone"] if region == defaults["region"] else f"{region}a")
    given = {
        "aws_region": region,
        "availability_zone": zone,
        "gpu_instance_type": args.instance_type,
        "gpu_node_count": args.nodes,
        "efa": args.efa,
        "fsx_deployment_type": args.fsx_deployment_type,
        "fsx_capacity_gib": args.fsx_capacity_gib,
        "fsx_s3_import_path": args.fsx_s3_import_path,
        "gpu_capacity_reservation": args.capacity_reservation,
        "gpu_capacity_block": "yes" if args.capacity_block else "no",
    }
    problems = answers.check_environment_answers(given)
    if problems:
        raise InputError(answers.as_option(problems[0], OPTIONS))
    if args.spot:
        efa = answers.parse_efa(args.efa, args.instance_type)[0]
        problem = answers.check_spot(args.name, bool(efa), args.capacity_reservation)
        if problem:
            raise InputError(problem)
    given["spot"] = args.spot
    return EnvironmentSpec.from_answers(args.name, given, prefix, args.delete_fsx_with_claim)


def check_renders(root: Path, spec: EnvironmentSpec, files: dict[str, str]) -> None:
    """Render the new environment in a scratch copy, so bases it cannot use refuse it now."""
    with tempfile.TemporaryDirectory(prefix="new-environment-") as scratch:
        copy = Path(scratch)
        try:
            for name in RENDERED_FROM:
                shutil.copytree(root / name, copy / name, symlinks=True)
        except OSError as error:
            raise InputError(f"cannot copy the repository to check the new environment: {error}") from None
        for path, text in files.items():
            (copy / path).parent.mkdir(parents=True, exist_ok=True)
            (copy / path).write_text(text)
        try:
            render_repository(copy, [spec.name])
        except InputError as error:
            message = str(error).replace(f"{copy}/", "")
            raise InputError(f"environment {spec.name!r} would not render: {message}; nothing was written") from None
