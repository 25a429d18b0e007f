"""Write a set of new files all at once, or none of them."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from ..errors import InputError


def write_new(root: Path, files: dict[str, str]) -> None:
    """Create every file in `files` (paths relative to root); refuse if any exists."""
    existing = [path for path in files if (root / path).exists()]
    if existing:
        raise InputError(f"{existing[0]} already exists; nothing was written")
    staging = Path(tempfile.mkdtemp(prefix=".generate-", dir=root))
    try:
        for path, text in files.items():
            target = staging / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        for path in files:
            destination = root / path
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(staging / path), destination)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
