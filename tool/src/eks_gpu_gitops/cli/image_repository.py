"""Print where the image workflow pushes the trainer image, and how it logs in.

Prints `image=...`, `registry=ghcr|ecr` and `aws-region=...`, one a line, the format of $GITHUB_OUTPUT
(generate/image_repository.py)."""

from __future__ import annotations

from pathlib import Path

from ..generate.image_repository import configured, resolve
from . import conventions as cli

VERB = "image-repository"


def build_parser() -> cli.Parser:
    parser = cli.Parser(prog=f"{cli.PROG} {VERB}", description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="the repository (default: this folder)")
    return parser


def _image_repository(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    for key, value in resolve(configured(args.root)).items():
        print(f"{key}={value}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return cli.run(VERB, _image_repository, argv)
