"""Write files and directories so that a reader sees all of them or nothing.

The content goes to a temporary name in the same directory, is flushed to disk, and is then renamed to
its final name. rename(2) within one file system is atomic on POSIX file systems, Lustre (FSx) included,
so a crash leaves at worst a `*.tmp-<pid>` leftover that no reader looks for.
"""

import os

TEMP_MARK = ".tmp-"


def temp_name(path):
    return f"{path}{TEMP_MARK}{os.getpid()}"


def is_temp_name(name):
    return TEMP_MARK in name


def fsync_path(path):
    flags = os.O_RDONLY | (os.O_DIRECTORY if os.path.isdir(path) else 0)
    descriptor = os.open(path, flags)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def publish(temporary, final):
    """Flush `temporary` (a file, or a directory and the files in it) and rename it to `final`."""
    if os.path.isdir(temporary):
        for name in os.listdir(temporary):
            fsync_path(os.path.join(temporary, name))
    fsync_path(temporary)
    os.replace(temporary, final)
    fsync_path(os.path.dirname(os.path.abspath(final)))


def write_file(path, write_to):
    """Call write_to(temporary_path), then publish the result as `path`."""
    temporary = temp_name(path)
    write_to(temporary)
    publish(temporary, path)


def write_text(path, text):
    def write_to(temporary):
        with open(temporary, "w", encoding="utf-8") as handle:
            handle.write(text)

    write_file(path, write_to)
