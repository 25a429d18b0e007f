"""The command reference (docs/commands.md of the tool), made from each verb's own argument parser, so it says
what `VERB --help` says. `python -m eks_gpu_gitops.cli.reference > docs/commands.md` writes it."""

from __future__ import annotations

import functools
import importlib
import sys

from .conventions import PROG
from .main import VERBS

WIDTH = 100  # help text wrapped at a fixed width, whatever the terminal


def document() -> str:
    lines = [
        f"# {PROG} command reference",
        "",
        "<!-- Generated from the verbs' argument parsers: python -m eks_gpu_gitops.cli.reference -->",
        "",
        f"One command, `{PROG} VERB [ARGS]`; a generated repository runs it as `scripts/VERB`. Every verb writes",
        "errors as one line on stderr (`VERB: message`), exits 2 on a usage or input error and, interrupted, 130",
        "(Ctrl-C) or 143 (SIGTERM); `validate` and `diff` say what 0 and 1 mean for them.",
        "",
    ]
    for verb, (module, _) in VERBS.items():
        parser = importlib.import_module(f"{__package__}.{module}").build_parser()
        parser.formatter_class = functools.partial(parser.formatter_class, width=WIDTH)
        lines += [f"## {verb}", "", "```text", parser.format_help().rstrip(), "```", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.stdout.write(document())
