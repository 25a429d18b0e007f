"""Add an environment: its Flux entry points and overlays, shaped like the existing ones.

    scripts/new-environment NAME --instance-type T --nodes N [--efa|--no-efa] [--region R]
        [--availability-zone AZ] [--fsx-deployment-type D] [--fsx-capacity-gib G]
        [--fsx-s3-import-path P] [--delete-fsx-with-claim]

Answers are checked by the same code as the template's questions (gitops_tools.answers), with
the same messages; a refusal writes nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import answers
from .errors import InputError
from .generate.environment import EnvironmentSpec, environment_files
from .generate.files import write_new
from .manifests import read_file
from .render import repository_root


def base_cluster(root: Path) -> dict:
    """Cluster name prefix, region and GPU zone of overlays/base/eksctl (what the template wrote)."""
    path = root / "overlays" / "base" / "eksctl" / "cluster.yaml"
    config = read_file(path, root)[0].doc
    gpu = next(g for g in config["managedNodeGroups"] if g.get("name") == "gpu")
    return {"prefix": config["metadata"]["name"], "region": config["metadata"]["region"],
            "zone": gpu["availabilityZones"][0]}


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="new-environment", description=__doc__.splitlines()[0])
    parser.add_argument("name", help="environment name (a DNS-1123 label, e.g. staging)")
    parser.add_argument("--instance-type", required=True, help="GPU instance type of the environment")
    parser.add_argument("--nodes", required=True, help="GPU nodes (= MPI workers)")
    efa = parser.add_mutually_exclusive_group()
    efa.add_argument("--efa", dest="efa", action="store_const", const="on", help="EFA on (refused without EFA)")
    efa.add_argument("--no-efa", dest="efa", action="store_const", const="off", help="EFA off")
    parser.add_argument("--region", help="AWS region (default: the base ClusterConfig's)")
    parser.add_argument("--availability-zone", help="zone of the GPU nodes and FSx (default: the base's, or <region>a)")
    parser.add_argument("--fsx-deployment-type", default="SCRATCH_2")
    parser.add_argument("--fsx-capacity-gib", default="1200")
    parser.add_argument("--fsx-s3-import-path", default="")
    parser.add_argument("--delete-fsx-with-claim", action="store_true",
                        help="reclaimPolicy Delete: deleting the claim deletes the file system (throwaway environments)")
    parser.set_defaults(efa="auto")
    return parser.parse_args(argv)


def plan(root: Path, args) -> EnvironmentSpec:
    base = base_cluster(root)
    problem = answers.check_environment_name(args.name, base["prefix"])
    if problem:
        raise InputError(problem)
    for existing in (root / "clusters" / args.name, root / "overlays" / args.name):
        if existing.exists():
            raise InputError(f"NAME: environment {args.name!r} already exists ({existing.relative_to(root)}); "
                             "choose another name or edit its overlays")
    region = args.region or base["region"]
    zone = args.availability_zone or (base["zone"] if region == base["region"] else f"{region}a")
    given = {"aws_region": region, "availability_zone": zone, "gpu_instance_type": args.instance_type,
             "gpu_node_count": args.nodes, "efa": args.efa, "fsx_deployment_type": args.fsx_deployment_type,
             "fsx_capacity_gib": args.fsx_capacity_gib, "fsx_s3_import_path": args.fsx_s3_import_path}
    problems = answers.check_environment_answers(given)
    if problems:
        raise InputError(problems[0])
    efa, _ = answers.parse_efa(args.efa, args.instance_type)
    return EnvironmentSpec(
        name=args.name, cluster_prefix=base["prefix"], instance_type=args.instance_type,
        nodes=int(args.nodes), efa=bool(efa), region=region, availability_zone=zone, base_region=base["region"],
        fsx_deployment_type=args.fsx_deployment_type, fsx_capacity_gib=int(args.fsx_capacity_gib),
        fsx_s3_import_path=args.fsx_s3_import_path, delete_fsx_with_claim=args.delete_fsx_with_claim)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        root = repository_root(Path.cwd())
        spec = plan(root, args)
        files = environment_files(spec)
        write_new(root, files)
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for path in files:
        print(f"wrote {path}")
    print(f"next: fill in overlays/{spec.name}/infrastructure/storageclass.yaml, then "
          f"`eksctl create cluster -f rendered/{spec.name}/eksctl.yaml` (after scripts/render) and "
          f"`flux bootstrap ... --path=clusters/{spec.name}`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
