"""Is the cluster the kubeconfig points at ready for an environment?"""

from __future__ import annotations

import os
from pathlib import Path

from ..live.cluster import connect
from ..live.status import FAIL, choose_environment, report, run_checks
from ..render.repository import render_repository, repository_root
from . import conventions as cli

VERB = "status"


def build_parser() -> cli.Parser:
    parser = cli.Parser(prog=f"{cli.PROG} {VERB}", description=__doc__.splitlines()[0])
    parser.add_argument("--env", help="the environment (default: the only one)")
    parser.add_argument("--context", help="kubeconfig context (default: the current one)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    return parser


def _status(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    root = repository_root(Path.cwd())
    env = choose_environment(root, args.env)
    # The client reads $KUBECONFIG once, when it is imported: name the file(s) now.
    cluster = connect(args.context, os.environ.get("KUBECONFIG") or None)
    environment = render_repository(root, [env])[0]
    checks = run_checks(cluster, environment)
    print(report(checks, args.format))
    return 1 if any(c.status == FAIL for c in checks) else 0


def main(argv: list[str] | None = None) -> int:
    return cli.run(VERB, _status, argv)
