"""Write a cluster's per-cluster values into its cluster-settings ConfigMap, which Flux substitutes.

The values, the AWS lookups and the checks before anything is written: live/cluster_settings.py."""

from __future__ import annotations

import sys
from pathlib import Path

from ..live.cluster_settings import NAMESPACE, VERB, Cluster, apply, check, check_context, describe, documents, look_up
from ..model.substitution import CLUSTER_SETTINGS
from ..render.repository import repository_root
from . import conventions as cli


def build_parser() -> cli.Parser:
    parser = cli.Parser(prog=f"{cli.PROG} {VERB}", description=__doc__.splitlines()[0])
    parser.add_argument("--env", required=True, help="the environment whose cluster this is")
    parser.add_argument("--subnet-id", help="FSX_SUBNET_ID (default: looked up with the AWS CLI)")
    parser.add_argument("--security-group-id", help="FSX_SECURITY_GROUP_ID (default: looked up with the AWS CLI)")
    parser.add_argument("--context", help="kubeconfig context to write to (default: the current one)")
    parser.add_argument("--print", action="store_true", help="print the ConfigMap instead of applying it")
    return parser


def parse_args(argv):
    parser = build_parser()
    return parser.parse_args(argv)


def _cluster_settings(argv: list[str] | None) -> int:
    args = parse_args(argv)
    root = repository_root(Path.cwd())
    cluster = Cluster(root, args.env)
    values = {"FSX_SUBNET_ID": args.subnet_id, "FSX_SECURITY_GROUP_ID": args.security_group_id}
    description = None
    if not all(values.values()):
        description = describe(cluster)
        found = look_up(cluster, description)
        values = {name: value or found[name] for name, value in values.items()}
    check(values)
    text = documents(args.env, values)
    if args.print:
        sys.stdout.write(text)
        return 0
    check_context(args.context, cluster, (description or describe(cluster))["endpoint"])
    apply(text, args.context)
    where = f"context {args.context}" if args.context else "the current context"
    print(f"wrote {NAMESPACE}/{CLUSTER_SETTINGS} for {args.env} ({cluster.name}) to {where}: {', '.join(values)}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return cli.run(VERB, _cluster_settings, argv)
