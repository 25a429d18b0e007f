"""Add an environment: its Flux entry points, settings and overlays, shaped like the existing ones.

    scripts/new-environment NAME --instance-type T --nodes N [--efa|--no-efa] [--region R]
        [--availability-zone AZ] [--fsx-deployment-type D] [--fsx-capacity-gib G]
        [--fsx-s3-import-path P] [--delete-fsx-with-claim]
        [--capacity-reservation cr-... [--capacity-block]] [--spot]

Answers are checked by the same code as the template's questions (gitops_tools.answers), with the
same messages; defaults come from platform.yaml (new_environment). The new environment is rendered
in a scratch copy first; a refusal, or an environment that does not render, writes nothing.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from . import answers, cli, platform
from .errors import InputError
from .generate import readme
from .generate.environment import EnvironmentSpec, environment_files, readme_row
from .generate.files import write_all
from .render import render_repository, repository_root

VERB = "new-environment"
README = "README.md"
# What a render of one environment reads.
RENDERED_FROM = ("clusters", "overlays")


def parse_args(argv):
    parser = cli.Parser(prog=VERB, description=__doc__.splitlines()[0])
    parser.add_argument("name", help="environment name (a DNS-1123 label, e.g. staging)")
    parser.add_argument("--instance-type", required=True, help="GPU instance type of the environment")
    parser.add_argument("--nodes", required=True, help="GPU nodes (= MPI workers)")
    efa = parser.add_mutually_exclusive_group()
    efa.add_argument("--efa", dest="efa", action="store_const", const="on", help="EFA on (refused without EFA)")
    efa.add_argument("--no-efa", dest="efa", action="store_const", const="off", help="EFA off")
    parser.add_argument("--region", help="AWS region (default: platform.yaml's)")
    parser.add_argument(
        "--availability-zone", help="zone of the GPU nodes and FSx (default: platform.yaml's, or <region>a)"
    )
    parser.add_argument("--fsx-deployment-type", default="SCRATCH_2")
    parser.add_argument("--fsx-capacity-gib", default="1200")
    parser.add_argument("--fsx-s3-import-path", default="")
    parser.add_argument(
        "--delete-fsx-with-claim",
        action="store_true",
        help="reclaimPolicy Delete: deleting the claim deletes the file system (throwaway environments)",
    )
    parser.add_argument(
        "--capacity-reservation", default="", help="an On-Demand Capacity Reservation or Capacity Block id (cr-...)"
    )
    parser.add_argument("--capacity-block", action="store_true", help="the reservation is a Capacity Block for ML")
    parser.add_argument("--spot", action="store_true", help="Spot GPU nodes: development only, never with EFA")
    parser.set_defaults(efa="auto")
    return parser.parse_args(argv)


def plan(root: Path, args) -> EnvironmentSpec:
    defaults = platform.new_environment_defaults(root)
    prefix = defaults["cluster_name_prefix"]
    problem = answers.check_environment_name(args.name, prefix)
    if problem:
        raise InputError(problem)
    for existing in (root / "clusters" / args.name, root / "overlays" / args.name):
        if existing.exists():
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
        raise InputError(problems[0])
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


def _new_environment(argv: list[str] | None) -> int:
    args = parse_args(argv)
    root = repository_root(Path.cwd())
    spec = plan(root, args)
    files = environment_files(spec)
    check_renders(root, spec, files)
    table = None
    if (root / README).is_file():
        table = readme.with_rows((root / README).read_text(), [readme_row(spec)])
    write_all(root, {**files, **({README: table} if table else {})})
    for path in files:
        print(f"wrote {path}")
    if table:
        print(f"added {spec.name} to the table of environments in {README}")
    else:
        print(f"{README} has no table of environments (its marker comments are gone); add {spec.name} by hand")
    print(
        f"next: `scripts/render --env {spec.name}`, `eksctl create cluster -f rendered/{spec.name}/eksctl.yaml`, "
        f"`scripts/cluster-settings --env {spec.name}`, then `flux bootstrap ... --path=clusters/{spec.name}`",
        file=sys.stdout,
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    return cli.run(VERB, _new_environment, argv)


if __name__ == "__main__":
    cli.exit_with(main)
