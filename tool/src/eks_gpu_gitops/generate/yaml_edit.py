"""Edit a YAML file a person may have written (a kustomization.yaml, a manifest): only the change differs afterwards.

ruamel.yaml keeps comments, key order and quotes, but drops what comes before the document
start and re-indents sequences to its own settings; so the preamble (comments up to and
including the first `---` line) is kept verbatim and the indentation is learnt from the file.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

from ruamel.yaml import YAML
from ruamel.yaml.util import load_yaml_guess_indent

from ..core.errors import InputError


def split_preamble(text: str) -> tuple[str, str]:
    """(comments and blank lines up to and including the first `---` line, the rest)."""
    lines = text.splitlines(keepends=True)
    for index, line in enumerate(lines):
        if line.rstrip() == "---":
            return "".join(lines[: index + 1]), "".join(lines[index + 1 :])
        if line.strip() and not line.lstrip().startswith("#"):
            break
    return "", text


def mapping_indent(text: str) -> int:
    """Spaces a nested mapping is indented by: the first `key:` line followed by a deeper key."""
    parent = None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        depth = len(line) - len(line.lstrip(" "))
        if parent is not None and depth > parent and not stripped.startswith("-"):
            return depth - parent
        parent = depth if stripped.endswith(":") and not stripped.startswith("-") else None
    return 2


def edited(path: Path, change: Callable[[dict], None]) -> str:
    """The text of `path` after `change` modified its document in place, in the file's own style."""
    try:
        text = path.read_text()
    except OSError as error:
        raise InputError(f"{path}: cannot read: {error.strerror}") from None
    preamble, body = split_preamble(text)
    round_trip = YAML()
    round_trip.preserve_quotes = True
    round_trip.width = 4096  # never re-wrap a long line
    data, sequence, offset = load_yaml_guess_indent(body, yaml=round_trip)
    if offset is None:  # no block sequence to learn from: the style of the files the template writes
        sequence, offset = 4, 2
    round_trip.indent(mapping=mapping_indent(body), sequence=sequence, offset=offset)
    change(data)
    buffer = io.StringIO()
    round_trip.dump(data, buffer)
    return preamble + buffer.getvalue()


def edit(path: Path, change: Callable[[dict], None]) -> None:
    """Load `path`, let `change` modify the document in place, write it back in the file's own style."""
    path.write_text(edited(path, change))


def append_new(sequence: list, item) -> None:
    if item not in sequence:
        sequence.append(item)
