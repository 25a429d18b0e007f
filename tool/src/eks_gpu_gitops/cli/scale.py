"""Grow or shrink an environment's GPU node group, or change its instance type: every figure that follows, at once."""

from __future__ import annotations

from pathlib import Path

from ..core.errors import InputError
from ..facts import limits
from ..generate import scale
from ..render.repository import repository_root
from . import conventions as cli

VERB = "scale"
STALE = 1


def build_parser() -> cli.Parser:
    parser = cli.Parser(prog=f"{cli.PROG} {VERB}", description=__doc__.splitlines()[0])
    parser.add_argument("env", metavar="ENV", help="the environment (overlays/ENV/settings.yaml)")
    parser.add_argument(
        "--nodes",
        help=f"GPU nodes (= MPI workers of horovod-train): 1 to {limits.MANAGED_NODE_GROUP_NODES}, EKS's default quota "
        f"of nodes per managed node group ({limits.CAPACITY_BLOCK_MAX_INSTANCES} for a Capacity Block)",
    )
    parser.add_argument(
        "--instance-type",
        help="another GPU instance type (not where a capacity reservation fixes it; with EFA on, an EFA type)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 when the README's row of ENV is not what its settings.yaml says",
    )
    return parser


def next_steps(spec, changes: list) -> list[str]:
    """How the change reaches the cluster: Flux applies the quota and the jobs; the node group is eksctl's
    (v0.230.0: `scale nodegroup` with only --nodes-max changes a managed group's maxSize and nothing else,
    pkg/ctl/scale/nodegroup.go and pkg/actions/nodegroup/scale.go; an instance type needs a new group)."""
    where = f"--cluster {spec.cluster_name} --region {spec.region}"
    lines = ["next: `scripts/diff --base <branch>`, then a pull request; on merge Flux applies the quota and the jobs"]
    if any(change.where.endswith(".instanceType") for change in changes):
        lines.append(
            f"then the gpu group of the new type (a managed group's type cannot change in place), while no job runs: "
            f"`eksctl delete nodegroup {where} --name gpu`, `scripts/render --env {spec.name}`, "
            f"`eksctl create nodegroup -f rendered/{spec.name}/eksctl.yaml --include gpu`"
        )
    elif any(change.where.endswith(".maxSize") for change in changes):
        [size] = [change for change in changes if change.where.endswith(".maxSize")]
        when = f" once at most {spec.nodes} nodes run (EKS refuses a maxSize below them)" if size.new < size.old else ""
        command = f"eksctl scale nodegroup {where} --name gpu --nodes-max {spec.nodes}"
        lines.append(f"then the group's new maxSize{when}: `{command}`")
    return lines


def _check(root: Path, env: str) -> int:
    problem = scale.stale_row(root, env)
    if problem:
        cli.say(VERB, problem)
        return STALE
    if not scale.has_table(root):
        print(f"{scale.README} has no table of environments (its marker comments are gone); nothing to check")
        return 0
    print(f"{scale.README}'s row of {env} is what {scale.settings_file(env)} says")
    return 0


def _scale(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    root = repository_root(Path.cwd())
    if args.check:
        if args.nodes is not None or args.instance_type is not None:
            raise InputError("--check takes no --nodes or --instance-type (see --help)")
        return _check(root, args.env)
    if args.nodes is None:
        raise InputError("--nodes is required (see --help)")
    spec, changes = scale.scale(root, args.env, args.nodes, args.instance_type)
    if not changes:
        print(
            f"{spec.name} already has {spec.nodes} x {spec.instance_type} and every figure that follows; nothing to do"
        )
        return 0
    for change in changes:
        print(change.line())
    if not scale.has_table(root):
        print(
            f"{scale.README} has no table of environments (its marker comments are gone); change {spec.name}'s by hand"
        )
    if spec.capacity_reservation:
        print(
            f"note: {spec.name}'s GPU nodes launch into {spec.capacity_reservation}: "
            f"it must hold {spec.nodes} instances"
        )
    for line in next_steps(spec, changes):
        print(line)
    return 0


def main(argv: list[str] | None = None) -> int:
    return cli.run(VERB, _scale, argv)
