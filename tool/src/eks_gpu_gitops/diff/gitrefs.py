"""Git plumbing for diff: resolve a ref, check it out in a temporary worktree, clean up.

The user's checkout, index and branches are never touched: a ref is checked out with
`git worktree add --detach` into a temporary folder that is removed again, also when the
render fails or the user interrupts.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
import tempfile
from contextlib import contextmanager, suppress
from pathlib import Path

from ..core.errors import InputError


def git(args: list[str], cwd: Path) -> str:
    try:
        result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    except OSError as error:
        raise InputError(f"cannot run git: {error.strerror}") from None
    if result.returncode != 0:
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        cause = lines[-1] if lines else f"git {args[0]} exited with status {result.returncode}"
        raise InputError(cause.removeprefix("fatal: ").removeprefix("error: "))
    return result.stdout.strip()


def prefix(root: Path) -> str:
    """Where `root` sits inside its Git checkout ("" at the top), e.g. "deploy/"."""
    try:
        return git(["rev-parse", "--show-prefix"], root)
    except InputError:
        raise InputError(f"{root} is not a git repository (nor inside one); diff compares git refs") from None


def resolve(ref: str, root: Path) -> str:
    """The full commit id `ref` names."""
    if not ref or ref.startswith("-"):
        raise InputError(f"unknown git ref {ref!r}")
    try:
        return git(["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"], root)
    except InputError:
        raise InputError(f"unknown git ref {ref!r}: no commit by that name (fetch it first?)") from None


def short(commit: str, root: Path) -> str:
    return git(["rev-parse", "--short", commit], root)


@contextmanager
def _worktree_lock(root: Path):
    """One `git worktree add` or `remove` at a time in a repository, across processes: each of them reads
    every entry of .git/worktrees/, and fails on one that another is writing ("failed to read
    .git/worktrees/<name>/commondir"), unique names or not."""
    common = Path(git(["rev-parse", "--git-common-dir"], root))
    lock_file = (common if common.is_absolute() else root / common) / "gitops-tools-worktree.lock"
    try:
        handle = open(lock_file, "a")  # noqa: SIM115 (held for the block below)
    except OSError:  # a read-only .git: go on without the lock, as before
        yield
        return
    with handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextmanager
def worktree(commit: str, root: Path):
    """A temporary checkout of `commit`; yields the folder that corresponds to `root`."""
    where = prefix(root)
    holder = Path(tempfile.mkdtemp(prefix="gitops-diff-"))
    # Git names the worktree after the folder (.git/worktrees/<name>): a name of its own per checkout, as
    # two at once (the two sides of a diff, or two diffs) under one name race on that metadata folder.
    tree = holder / f"tree-{holder.name.removeprefix('gitops-diff-')}"
    added = False
    try:
        # No hooks: a user's post-checkout hook has no business running in a throwaway tree.
        with _worktree_lock(root):
            git(["-c", "core.hooksPath=/dev/null", "worktree", "add", "--detach", "--quiet", str(tree), commit], root)
            added = True
        yield tree / where
    finally:
        if added:
            with _worktree_lock(root):
                try:
                    git(["worktree", "remove", "--force", str(tree)], root)
                except InputError:
                    shutil.rmtree(tree, ignore_errors=True)
                    git_quietly(["worktree", "prune"], root)
        shutil.rmtree(holder, ignore_errors=True)


def git_quietly(args: list[str], root: Path) -> None:
    with suppress(InputError):
        git(args, root)
