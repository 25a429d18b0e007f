"""Reading a file a pull request (or whoever can write a cache folder) may have made into something else: a FIFO
that never ends, a link to /dev/zero, a file of gigabytes; and writing a file whole or not at all."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

# Larger than any manifest, kustomization or cached render of one build.
LIMIT = 256 << 20


class Unreadable(Exception):
    """Why a file was not read (one line): not a regular file, larger than the limit, or an OS error."""


class TooLarge(Unreadable):
    """A regular file larger than the limit."""


def size_text(size: int) -> str:
    """A size as people read it: 256 MiB, 64 KiB, or in bytes when it is no whole number of either (1,048,577
    bytes, never a rounded "1.0 MiB" next to a limit of 1 MiB)."""
    for shift, unit in ((20, "MiB"), (10, "KiB")):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift:,} {unit}"
    return f"{size:,} bytes"


def read_bounded(path: Path, limit: int = LIMIT, follow_links: bool = False) -> bytes:
    """The bytes of `path` when it is a regular file (a symbolic link is not followed, unless `follow_links`) of
    at most `limit` bytes; Unreadable otherwise. Never blocks on a FIFO or a device, and never reads past `limit`
    (a file that grows while it is read is refused too)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | (0 if follow_links else os.O_NOFOLLOW)
    try:
        descriptor = os.open(path, flags)
    except OSError as error:
        if not follow_links and error.errno == errno.ELOOP and os.path.islink(path):
            raise Unreadable("a symbolic link, not a regular file") from None
        raise Unreadable(error.strerror or str(error)) from None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise Unreadable("not a regular file")
        if info.st_size > limit:
            raise TooLarge(f"larger than {size_text(limit)} ({size_text(info.st_size)})")
        chunks, total = [], 0
        while True:
            chunk = os.read(descriptor, min(1 << 20, limit + 1 - total))
            if not chunk:
                return b"".join(chunks)
            total += len(chunk)
            if total > limit:
                raise TooLarge(f"larger than {size_text(limit)}")
            chunks.append(chunk)
    except OSError as error:
        raise Unreadable(error.strerror or str(error)) from None
    finally:
        os.close(descriptor)


def read_regular(path: Path, limit: int = LIMIT) -> bytes | None:
    """The bytes of `path` when it is a regular file (a symbolic link is not followed) of at most `limit`
    bytes; None otherwise, or when it cannot be read. Never blocks on a FIFO or a device."""
    try:
        return read_bounded(path, limit)
    except Unreadable:
        return None


def write_atomically(path: Path, data: bytes, mode: int | None = None) -> None:
    """Put `data` at `path` through a temporary file of its own in the same folder: a reader (another run filling
    the same cache, the upload of a report) sees all of the file or none, and an interrupt or a full disk leaves
    nothing behind. Raises OSError."""
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data)
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:  # OSError, or Ctrl-C / SIGTERM (the CLI turns them into KeyboardInterrupt)
        Path(temporary).unlink(missing_ok=True)
        raise
