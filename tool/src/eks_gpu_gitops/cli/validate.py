"""Validate manifests before Flux applies them: lint, render once, schemas, rules, report.

    eks-gpu-gitops validate [PATH ...] [--env ENV] [--format text|json|github|sarif] [--sarif FILE]
                            [--config FILE] [--cluster-config FILE] [--schema-dir DIR]
                            [--kubernetes-version X.Y] [--strict] [--quiet]
    eks-gpu-gitops validate --list-rules [--format text|json|markdown]
    eks-gpu-gitops validate --server [--env ENV] [--context CTX] [--format text|json|github|sarif]

--server dry-run applies every rendered object against the cluster of the kubeconfig ($KUBECONFIG)
as Flux would (server-rejected, server-dropped-fields).

PATH is the repository root (the default: every environment), clusters/<env> (one environment),
a kustomization folder, a folder of plain manifests, or files. Exit status: 0 clean (warnings
allowed), 1 errors (or warnings with --strict), 2 usage or input error.

The configuration file (--config FILE, or the first .eks-gpu-gitops.yaml found in the repository's root or
above it, then in the current folder or above it) turns rules off, sets their severity (per file and per
environment too) and ignores paths; the report's notes say what it changed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..core.errors import InputError
from ..core.files import write_atomically
from ..facts.eks import version_key
from ..rules import docs
from ..schemas.store import SCHEMA_DIR_VARIABLE
from ..validate import config, report
from ..validate.pipeline import Options, validate
from ..validate.plan import find_root
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
        help="text (default), json, github or sarif (SARIF 2.1.0); with --list-rules: text, json or markdown",
    )
    parser.add_argument(
        "--sarif", type=Path, metavar="FILE", help="also write the report as SARIF 2.1.0 to FILE (for code scanning)"
    )
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="the configuration file (default: .eks-gpu-gitops.yaml of the repository or above, or of the current "
        "folder or above)",
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
    if args.list_rules and (args.sarif or args.config):
        parser.error("--sarif and --config go with a validation, not --list-rules")
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

        root = find_root(Path.cwd()) or Path.cwd()
        configuration = config.configured(args.config, root)
        result = validate_server(args.env, args.context, cli.progress(VERB, args.quiet))
        return _report(configuration.apply(result) if configuration else result, args)

    options = Options(args.paths, args.env, args.cluster_config, args.schema_dir, args.kubernetes_version, args.config)
    return _report(validate(options, cli.progress(VERB, args.quiet)), args)


def _report(result, args: argparse.Namespace) -> int:
    if args.sarif:
        _write(args.sarif, report.FORMATS["sarif"](result))
    sys.stdout.write(report.FORMATS[args.format](result))
    return result.exit_code(args.strict)


def _write(path: Path, text: str) -> None:
    """The SARIF report, whole or not at all (core/files.write_atomically): the upload sees the whole report or none."""
    try:
        write_atomically(path, text.encode(), mode=0o644)
    except OSError as error:
        raise InputError(f"{path}: cannot write: {error.strerror}") from None


def main(argv: list[str] | None = None) -> int:
    return cli.run(VERB, _validate, argv)
