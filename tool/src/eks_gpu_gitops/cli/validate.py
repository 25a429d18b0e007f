"""Validate manifests before Flux applies them: lint, render once, schemas, rules, report.

    eks-gpu-gitops validate [PATH ...] [--env ENV] [--format text|json|github] [--cluster-config FILE]
                            [--schema-dir DIR] [--kubernetes-version X.Y] [--strict] [--quiet]
    eks-gpu-gitops validate --list-rules [--format text|json|markdown]
    eks-gpu-gitops validate --server [--env ENV] [--context CTX] [--format text|json|github]

--server dry-run applies every rendered object against the cluster of the kubeconfig ($KUBECONFIG)
as Flux would (server-rejected, server-dropped-fields).

PATH is the repository root (the default: every environment), clusters/<env> (one environment),
a kustomization folder, a folder of plain manifests, or files. Exit status: 0 clean (warnings
allowed), 1 errors (or warnings with --strict), 2 usage or input error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..core.errors import InputError
from ..facts.eks import version_key
from ..rules import docs
from ..schemas.store import SCHEMA_DIR_VARIABLE
from ..validate import report
from ..validate.pipeline import Options, validate
from . import conventions as cli

VERB = "validate"


def build_parser() -> cli.Parser:
    parser = cli.Parser(
        prog=f"{cli.PROG} {VERB}",
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="\n".join(__doc__.splitlines()[2:]),
    )
    parser.add_argument(
        "paths", nargs="*", type=Path, metavar="PATH", help="what to validate (default: the repository)"
    )
    parser.add_argument("--env", action="append", help="environment of the repository to validate (repeatable)")
    parser.add_argument(
        "--format",
        default="text",
        choices=sorted({*report.FORMATS, *docs.FORMATS}),
        help="text (default), json or github; with --list-rules: text, json or markdown",
    )
    parser.add_argument(
        "--cluster-config", type=Path, metavar="FILE", help="eksctl ClusterConfig (a file, or a kustomization folder)"
    )
    parser.add_argument(
        "--schema-dir",
        type=Path,
        metavar="DIR",
        help=f"local copy of the pinned schemas (crds/, eksctl/); default ${SCHEMA_DIR_VARIABLE} or a download cache",
    )
    parser.add_argument("--kubernetes-version", metavar="X.Y", help="Kubernetes version when no ClusterConfig says it")
    parser.add_argument("--strict", action="store_true", help="warnings fail too (exit 1)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--list-rules", action="store_true", help="print the rule catalogue and exit")
    parser.add_argument("--server", action="store_true", help="server-side apply dry run against the cluster")
    parser.add_argument("--context", metavar="CTX", help="with --server: the kubeconfig context (default: current)")
    cli.add_offline(parser)
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    cli.apply_offline(args)
    if args.list_rules and args.format not in docs.FORMATS:
        parser.error(f"--list-rules prints text, json or markdown, not {args.format}")
    if not args.list_rules and args.format not in report.FORMATS:
        parser.error(f"--format {args.format} only goes with --list-rules")
    if args.kubernetes_version and not version_key(args.kubernetes_version):
        parser.error(f"--kubernetes-version {args.kubernetes_version}: expected a version such as 1.34")
    if args.schema_dir and not args.schema_dir.is_dir():
        raise InputError(f"{args.schema_dir}: --schema-dir is not a folder")
    if args.context and not args.server:
        parser.error("--context goes with --server")
    if args.server and args.paths:
        parser.error("--server validates environments (--env), not paths")
    return args


def _validate(argv: list[str] | None) -> int:
    args = parse_args(argv)
    if args.list_rules:
        sys.stdout.write(docs.document(args.format))
        return 0
    if args.server:
        from ..validate.server import validate_server

        result = validate_server(args.env, args.context, cli.progress(VERB, args.quiet))
        sys.stdout.write(report.FORMATS[args.format](result))
        return result.exit_code(args.strict)

    options = Options(args.paths, args.env, args.cluster_config, args.schema_dir, args.kubernetes_version)
    result = validate(options, cli.progress(VERB, args.quiet))
    sys.stdout.write(report.FORMATS[args.format](result))
    return result.exit_code(args.strict)


def main(argv: list[str] | None = None) -> int:
    return cli.run(VERB, _validate, argv)
