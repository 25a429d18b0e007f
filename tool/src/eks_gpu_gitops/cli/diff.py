"""Show what a change does to the rendered manifests, per environment.

    eks-gpu-gitops diff --base REF [--head REF] [--format text|markdown|json] [--env ENV]...
                        [--output FILE] [--markdown-output FILE] [--exit-code]
    eks-gpu-gitops diff --list-notices [--format text|markdown|json]
    eks-gpu-gitops diff --live [--env ENV]... [--kube-context CTX] [--format text|markdown|json]

--live: what applying the working tree's environments would change on the cluster of the kubeconfig
($KUBECONFIG): each object's server-side apply dry run against the live object, and what Flux would
prune; --kube-context names the kubeconfig context (default: its current one). --context is the
number of unchanged lines around each change, as without --live.

--markdown-output also writes the markdown (the pull-request comment) from the same render, so
CI gets the comment and a full text diff for its log while rendering each ref once.

Exit status: 0 no changes (or changes without --exit-code), 1 changes with --exit-code,
2 a usage or input error (not a git repository, unknown ref, a side that does not render), in
one line; also when an environment does not render while others do: every format names each
broken environment with its one-line error first (markdown: a "Not rendered" section of the
comment, json: `broken`), then the others' diff; stderr gets one line per broken environment.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..core.credentials import mask_text
from ..core.errors import InputError
from ..diff import gitrefs
from ..diff.formats import FORMATS, Options
from ..diff.formats.markdown import DEFAULT_LIMIT, GITHUB_LIMIT
from ..diff.model import BrokenEnvironment
from ..diff.notices import catalogue
from ..diff.report import build_report
from ..diff.sides import render_sides, side
from ..render.repository import repository_root
from . import conventions as cli

VERB = "diff"
_SMALLEST_LIMIT = 10_000


def build_parser() -> cli.Parser:
    parser = cli.Parser(
        prog=f"{cli.PROG} {VERB}", description="Show what a change does to the rendered manifests, per environment."
    )
    parser.add_argument("--base", metavar="REF", help="git ref to compare against (e.g. main); required")
    parser.add_argument("--head", metavar="REF", help="git ref to compare (default: the working tree)")
    parser.add_argument(
        "--format",
        choices=sorted({*FORMATS, *catalogue.FORMATS}),
        default="text",
        help="output format: text (default), markdown or json",
    )
    parser.add_argument("--list-notices", action="store_true", help="print the catalogue of notices and exit")
    parser.add_argument("--env", action="append", metavar="ENV", help="only this environment (repeatable)")
    parser.add_argument("--output", type=Path, metavar="FILE", help="write to FILE instead of standard output")
    parser.add_argument(
        "--markdown-output",
        type=Path,
        metavar="FILE",
        help="also write the markdown report to FILE (e.g. text on standard output for a CI log)",
    )
    parser.add_argument("--exit-code", action="store_true", help="exit with 1 when anything changes")
    parser.add_argument("--live", action="store_true", help="compare with the cluster instead of a git ref")
    parser.add_argument(
        "--context",
        default=None,
        metavar="N",
        help="unchanged lines around each change (default 3)",
    )
    parser.add_argument(
        "--kube-context", metavar="CTX", help="with --live: the kubeconfig context (default: the current one)"
    )
    parser.add_argument(
        "--max-chars",
        type=int,
        default=DEFAULT_LIMIT,
        metavar="N",
        help=f"markdown: longest comment (default {DEFAULT_LIMIT}; GitHub allows {GITHUB_LIMIT})",
    )
    parser.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="text: colours (auto: only on a terminal, and not with NO_COLOR)",
    )
    cli.add_offline(parser)
    return parser


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    cli.apply_offline(args)
    if args.list_notices:
        return args
    if args.live:
        if args.base or args.head:
            parser.error("--live compares with the cluster, not with --base/--head")
    elif args.kube_context:
        parser.error("--kube-context goes with --live")
    try:
        args.context = 3 if args.context is None else int(args.context)
    except ValueError:
        parser.error(f"--context {args.context}: expected a number of lines")
    if not args.base and not args.live:
        parser.error("the following arguments are required: --base")
    if args.context < 0:
        parser.error("--context must be 0 or more")
    if not _SMALLEST_LIMIT <= args.max_chars <= GITHUB_LIMIT:
        parser.error(f"--max-chars must be between {_SMALLEST_LIMIT} and {GITHUB_LIMIT}")
    return args


def use_color(choice: str, output: Path | None) -> bool:
    if choice != "auto":
        return choice == "always"
    return output is None and sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def write(text: str, output: Path | None) -> None:
    if output is None:
        sys.stdout.write(text)
        return
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text)
    except OSError as error:
        raise InputError(f"{output}: cannot write: {error.strerror}") from None


def full_diff_hint(base_commit: str, head_commit: str) -> str:
    command = f"scripts/diff --base {base_commit[:12]}"
    if head_commit:
        command += f" --head {head_commit[:12]}"
    return f"Run `{command}` for the full diff."


def run(args: argparse.Namespace) -> int:
    if args.list_notices:
        write(catalogue.document(args.format), args.output)
        return 0
    if args.live:
        return run_live(args)
    root = repository_root(Path.cwd())
    gitrefs.prefix(root)  # outside a git repository: one clear line, before any ref is resolved
    base, head = side(args.base, root), side(args.head, root)
    rendered = render_sides(base, head, root, args.env)
    report = build_report(base, rendered.base, head, rendered.head, args.context, rendered.unchanged)
    report.broken = [BrokenEnvironment(broken.env, mask_text(broken.line)) for broken in rendered.broken]
    options = Options(
        color=use_color(args.color, args.output),
        max_chars=args.max_chars,
        full_diff_hint=full_diff_hint(base.commit, head.commit),
    )
    if args.markdown_output is not None:
        write(FORMATS["markdown"](report, options), args.markdown_output)
    write(FORMATS[args.format](report, options), args.output)
    files = [str(path) for path in (args.markdown_output, args.output) if path is not None]
    if files:
        changed = ", ".join(env.name for env in report.changed) or "none"
        cli.say(VERB, f"environments with changes: {changed}; wrote {', '.join(files)}")
    for broken in rendered.broken:  # after the diff of the others is written
        cli.say(VERB, broken.line)
    if rendered.broken:
        return 2
    return 1 if args.exit_code and report.has_changes else 0


def run_live(args: argparse.Namespace) -> int:
    from ..diff.live import live_report

    report, problems, notes = live_report(args.env, args.kube_context, args.context)
    options = Options(
        color=use_color(args.color, args.output),
        max_chars=args.max_chars,
        full_diff_hint="Run `scripts/diff --live` for the full diff.",
    )
    write(FORMATS[args.format](report, options), args.output)
    for note in notes:  # objects not tried, variables compared before Flux's substitution
        cli.say(VERB, note)
    for problem in problems:  # objects the server refuses: validate --server explains them
        cli.say(VERB, f"the server refuses {problem}")
    if problems:
        return 2
    return 1 if args.exit_code and report.has_changes else 0


def main(argv: list[str] | None = None) -> int:
    # SIGTERM (a cancelled CI job) and SIGHUP unwind like Ctrl-C (cli.run), so the temporary worktree
    # is removed once the render that is running finishes.
    return cli.run(VERB, lambda: run(parse_args(argv)))
