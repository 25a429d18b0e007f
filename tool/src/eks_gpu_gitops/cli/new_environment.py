"""Add an environment: its Flux entry points, settings and overlays, shaped like the existing ones."""

from __future__ import annotations

import sys
from pathlib import Path

from ..facts import limits
from ..generate import readme
from ..generate.environment import environment_files, readme_row
from ..generate.files import write_all
from ..generate.new_environment import README, check_renders, plan
from ..render.repository import repository_root
from . import conventions as cli

VERB = "new-environment"


def build_parser() -> cli.Parser:
    parser = cli.Parser(prog=f"{cli.PROG} {VERB}", description=__doc__.splitlines()[0])
    parser.add_argument("name", help="environment name (a DNS-1123 label, e.g. staging)")
    parser.add_argument("--instance-type", required=True, help="GPU instance type of the environment")
    parser.add_argument(
        "--nodes",
        required=True,
        help=f"GPU nodes (= MPI workers): 1 to {limits.MANAGED_NODE_GROUP_NODES}, EKS's default quota of nodes per "
        f"managed node group ({limits.CAPACITY_BLOCK_MAX_INSTANCES} with --capacity-block)",
    )
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
    return parser


def parse_args(argv):
    parser = build_parser()
    return parser.parse_args(argv)


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
