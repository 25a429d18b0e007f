"""The template as it would be committed: the files git tracks or would track (not ignored), so local virtual
environments, caches, built helpers and demo output never reach a bake. The tests of the tool and of the
template, and the benches, bake from such a copy."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


def committed_copy(source: Path, destination: Path) -> Path:
    """A copy of the files of `source` that git would commit; `source` itself outside a git checkout."""
    if not (source / ".git").exists():
        return source
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=source,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for name in filter(None, map(os.fsdecode, listed)):
        if (source / name).is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source / name, destination / name)
    return destination
