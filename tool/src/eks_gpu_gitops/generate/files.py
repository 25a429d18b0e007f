"""Write a set of files all at once, or none of them: what the generators change in a repository."""

from __future__ import annotations

import os
import signal
from contextlib import contextmanager, suppress
from pathlib import Path

from ..core.errors import InputError


@contextmanager
def _uninterrupted():
    """Hold Ctrl-C (and SIGTERM) back while files are put in place; deliver it afterwards."""
    caught = []

    def hold(signum, frame):
        caught.append(signum)

    previous = {}
    try:
        for number in (signal.SIGINT, signal.SIGTERM):
            previous[number] = signal.signal(number, hold)
    except ValueError:  # not the main thread
        pass
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        if caught:
            raise KeyboardInterrupt


def _refusal(root: Path, path: Path, error: OSError) -> InputError:
    shown = path.relative_to(root) if path.is_relative_to(root) else path
    return InputError(f"{shown}: cannot write: {error.strerror or error}; nothing was written")


def _outside(root: Path, path: str) -> bool:
    """Whether `path` leads out of root: absolute, through `..`, or through a symbolic link that points out."""
    relative = Path(path)
    if relative.is_absolute() or ".." in relative.parts:
        return True
    return not (root / relative).resolve().is_relative_to(root.resolve())


def write_all(root: Path, files: dict[str, str]) -> None:
    """Create or replace every file in `files` (paths relative to root), or leave the tree as it was. A path
    that leads out of root is refused before anything is written."""
    for path in files:
        if _outside(root, path):
            raise InputError(f"{path}: leads outside the repository; nothing was written")
    targets = {root / path: text for path, text in files.items()}
    for target in targets:
        if target.exists() and not os.access(target, os.W_OK):
            raise _refusal(root, target, PermissionError(13, "Permission denied"))
    created_folders: list[Path] = []
    staged: dict[Path, Path] = {}
    try:
        for target, text in targets.items():
            missing = [p for p in [target.parent, *target.parent.parents] if not p.exists()]
            for folder in reversed(missing):
                folder.mkdir()
                created_folders.append(folder)
            temporary = target.with_name(f".{target.name}.{os.getpid()}.new")
            staged[target] = temporary  # before writing: a write cut short is removed too
            temporary.write_text(text)
    except BaseException as error:  # OSError, or Ctrl-C / SIGTERM (cli turns it into KeyboardInterrupt)
        _undo({}, staged, created_folders)
        if isinstance(error, OSError):
            raise _refusal(root, target, error) from None
        raise
    with _uninterrupted():
        originals: dict[Path, bytes | None] = {}
        try:
            for target, temporary in staged.items():
                originals[target] = target.read_bytes() if target.exists() else None
                os.replace(temporary, target)
        except OSError as error:
            _undo(originals, staged, created_folders)
            raise _refusal(root, target, error) from None


def _undo(originals: dict[Path, bytes | None], staged: dict[Path, Path], created_folders: list[Path]) -> None:
    for target, content in originals.items():
        if content is None:
            target.unlink(missing_ok=True)
        else:
            target.write_bytes(content)
    for temporary in staged.values():
        temporary.unlink(missing_ok=True)
    for folder in reversed(created_folders):
        with suppress(OSError):
            folder.rmdir()


def write_new(root: Path, files: dict[str, str]) -> None:
    """Create every file in `files` (paths relative to root); refuse if any exists."""
    existing = [path for path in files if (root / path).exists()]
    if existing:
        raise InputError(f"{existing[0]} already exists; nothing was written")
    write_all(root, files)
