"""Render every environment: each Flux Kustomization's path and the eksctl overlay, once.

Writes DIR/<env>/<kustomization>.yaml, DIR/<env>/helmrelease-<name>.yaml and DIR/<env>/eksctl.yaml (--out DIR,
default rendered/), all at once or nothing; an existing DIR is replaced only when it holds an earlier render."""

from __future__ import annotations

from pathlib import Path

from ..render import helm_release
from ..render.output import check_output, write_rendered
from ..render.repository import render_repository, repository_root
from . import conventions as cli

VERB = "render"


def build_parser() -> cli.Parser:
    parser = cli.Parser(prog=f"{cli.PROG} {VERB}", description=__doc__.splitlines()[0])
    parser.add_argument("--env", action="append", help="environment to render (repeatable; default: all)")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: rendered/)")
    cli.add_offline(parser)
    return parser


def _render(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    cli.apply_offline(args)
    root = repository_root(Path.cwd())
    out = args.out or root / "rendered"
    check_output(out)
    environments = render_repository(root, args.env, progress=cli.progress(VERB))
    write_rendered(environments, out)
    for environment in environments:
        for note in helm_release.notes(environment):
            cli.say(VERB, f"note: {note}")
        counts = ", ".join(f"{k.name} {len(k.objects)}" for k in environment.kustomizations)
        releases = ", ".join(f"{r.name} {'not rendered' if r.note else len(r.objects)}" for r in environment.releases)
        charts = f"; HelmReleases {releases}" if releases else ""
        eksctl = "yes" if environment.cluster_config else "no"
        print(f"{environment.name}: {counts}; eksctl {eksctl}{charts} -> {out / environment.name}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return cli.run(VERB, _render, argv)
