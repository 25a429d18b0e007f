"""File names made from names a pull request controls (an environment's folder, a Flux Kustomization's or a
HelmRelease's name): one plain file name inside a given folder, or a one-line refusal."""

from __future__ import annotations

import re
from pathlib import Path

from .errors import InputError

# Letters, digits, `.`, `_` and `-`, starting with a letter or digit: every Kubernetes object name (a DNS
# subdomain) is one, and none of them is `.`, `..` or holds a separator.
_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,199}")


def file_in(folder: Path, name: str, suffix: str, what: str) -> Path:
    """`folder/<name><suffix>`, refused in one line unless `name` is one plain file name."""
    if not isinstance(name, str) or not _PLAIN.fullmatch(name) or name.strip(".") == "":
        shown = repr(name)[:80]
        raise InputError(
            f"{what} {shown} cannot be a file name: it must hold only letters, digits, '.', '_' and '-', as "
            "Kubernetes names do"
        )
    path = folder / f"{name}{suffix}"
    if path.parent != folder:
        raise InputError(f"{what} {name!r} leads out of {folder}")
    return path
