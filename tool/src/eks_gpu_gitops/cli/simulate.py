"""Place an environment's MPIJobs on a simulated cluster before paying for one."""

from __future__ import annotations

import sys
from pathlib import Path

from ..live.simulate import DEFAULT_TIMEOUT, json_report, simulate, text_report
from ..render import repository as render
from . import conventions as cli

VERB = "simulate"


def build_parser() -> cli.Parser:
    parser = cli.Parser(prog=f"{cli.PROG} {VERB}", description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="prod", help="environment to simulate (default: prod)")
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help="seconds for the whole run, control plane start included (default 60)",
    )
    return parser


def _simulate(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    root = render.repository_root(Path.cwd())
    simulation = simulate(root, args.env, args.timeout, progress=cli.progress(VERB))
    print(json_report(simulation) if args.format == "json" else text_report(simulation))
    sys.stdout.flush()
    return 0 if simulation.fits else 1


def main(argv: list[str] | None = None) -> int:
    return cli.run(VERB, _simulate, argv)
