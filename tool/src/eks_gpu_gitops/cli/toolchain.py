"""The binaries scripts/simulate and the local GitOps loop run: list where each is, or build the missing ones.

`list` prints each binary (what it is, its pinned version, where it is found: $GITOPS_CONTROL_PLANE_BIN, the
toolchain cache, PATH) and exits 1 when one is missing. `build` builds the missing ones from the Go module proxy
(Go needed) into the toolchain cache, or --into a folder; one already there at its pinned version is kept, so a
second run is instant. It exits 1 when a build fails, 2 without Go. NAMES are binaries, or the groups
control-plane and controllers; all of them when none is named.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..core.errors import InputError
from ..live import toolchain
from . import conventions as cli

VERB = "toolchain"


def build_parser() -> cli.Parser:
    parser = cli.Parser(
        prog=f"{cli.PROG} {VERB}",
        description=__doc__.splitlines()[0],
        epilog=(
            f"binaries: {', '.join(toolchain.BY_NAME)}; groups: "
            + "; ".join(f"{group} ({', '.join(names)})" for group, names in toolchain.GROUPS.items())
            + f". Cache: ${toolchain.DIR_VARIABLE}, by default ~/.cache/gitops-tools/toolchain/<os>-<arch>."
        ),
    )
    actions = parser.add_subparsers(dest="action", metavar="{list,build}", parser_class=cli.Parser)
    listing = actions.add_parser(
        "list", help="[NAMES...]: each binary, its pinned version and where it is found (exit 1: one is missing)"
    )
    listing.add_argument("names", nargs="*", metavar="NAMES", help="binaries or groups (default: all)")
    building = actions.add_parser(
        "build",
        help="[--into DIR] [NAMES...]: build the missing ones from the Go module proxy (Go needed), into the toolchain"
        f" cache (${toolchain.DIR_VARIABLE}) or DIR; exit 1 when a build fails",
    )
    building.add_argument("names", nargs="*", metavar="NAMES", help="binaries or groups (default: all)")
    building.add_argument(
        "--into", type=Path, help=f"the folder to build into (default: the toolchain cache, ${toolchain.DIR_VARIABLE})"
    )
    return parser


def _list(args: argparse.Namespace) -> int:
    found = toolchain.statuses(toolchain.select(args.names))
    print(toolchain.list_report(found))
    return 1 if any(status.located is None for status in found) else 0


def _build(args: argparse.Namespace) -> int:
    try:
        toolchain.build(args.names, args.into, progress=cli.progress(VERB))
    except toolchain.BuildFailed as error:
        cli.say(VERB, str(error))
        return 1
    return 0


def _toolchain(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    if args.action is None:
        raise InputError("name an action, list or build (see --help)")
    return _list(args) if args.action == "list" else _build(args)


def main(argv: list[str] | None = None) -> int:
    return cli.run(VERB, _toolchain, argv)
