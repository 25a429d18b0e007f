"""Reading a file a pull request (or whoever can write a cache folder) may have made into something else: a FIFO
that never ends, a link to /dev/zero, a file of gigabytes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

# Larger than any manifest, kustomization or cached render of one build.
LIMIT = 256 << 20


def read_regular(path: Path, limit: int = LIMIT) -> bytes | None:
    """The bytes of `path` when it is a regular file (a symbolic link is not followed) of at most `limit`
    bytes; None otherwise, or when it cannot be read. Never blocks on a FIFO or a device."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        chunks, total = [], 0
        while True:
            chunk = os.read(descriptor, 1 << 20)
            if not chunk:
                return b"".join(chunks)
            total += len(chunk)
            if total > limit:
                return None
            chunks.append(chunk)
    except OSError:
        return None
    finally:
        os.close(descriptor)
