"""Git plumbing for diff: resolve a ref, check it out in a temporary worktree, clean up.

The user's checkout, index and branches are never touched: a ref is checked out with
`git worktree add --detach` into a temporary folder that is removed again, also when the
render fails or the user interrupts.
"""

from __future__ import annotations

import fcntl
import shutil
import subprocess
from contextlib import contextmanager
from pathlib import Path

from ..core import interrupts
from ..core.errors import InputError


def git(args: list[str], cwd: Path) -> str:
    """git's output, or its error in one line. Git runs in a session of its own: a terminal's Ctrl-C reaches the
    tool alone, which stops git when it is interrupted (subprocess.run kills it) and never when it cleans up (a
    second Ctrl-C does not kill the `git worktree remove` of the clean-up)."""
    try:
        result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, start_new_session=True)
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


def _common_dir(root: Path) -> Path:
    """The repository's .git folder (the main one, from a worktree too)."""
    common = Path(git(["rev-parse", "--git-common-dir"], root))
    return common if common.is_absolute() else root / common


@contextmanager
def _worktree_lock(common: Path):
    """One `git worktree add` or `remove` at a time in a repository (its .git folder: `common`), across
    processes: each of them reads every entry of .git/worktrees/, and fails on one that another is writing
    ("failed to read .git/worktrees/<name>/commondir"), unique names or not."""
    lock_file = common / "gitops-tools-worktree.lock"
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
    """A temporary checkout of `commit`; yields the folder that corresponds to `root`.

    The folder is registered as it is made, and the worktree's removal before `git worktree add` starts
    (core/interrupts.py): whatever moment an interrupt comes, the checkout (one cut short too) and its metadata
    in .git/worktrees/ are removed, here or by the command's clean-up at its end, and a second Ctrl-C does not
    cut the removal short."""
    where = prefix(root)
    common = _common_dir(root)
    holder = interrupts.temporary_folder("gitops-diff-")
    # Git names the worktree after the folder (.git/worktrees/<name>): a name of its own per checkout, as
    # two at once (the two sides of a diff, or two diffs) under one name race on that metadata folder.
    tree = holder / f"tree-{holder.name.removeprefix('gitops-diff-')}"
    removal = interrupts.track(lambda: _remove_worktree(tree, root, common))
    try:
        # No hooks: a user's post-checkout hook has no business running in a throwaway tree.
        with _worktree_lock(common):
            git(["-c", "core.hooksPath=/dev/null", "worktree", "add", "--detach", "--quiet", str(tree), commit], root)
        yield tree / where
    finally:
        with interrupts.shielded():
            interrupts.run_clean_up(removal)
            interrupts.remove(holder)


def _remove_worktree(tree: Path, root: Path, common: Path) -> None:
    """Remove a worktree and its metadata (`--force` twice: one that `git worktree add` was cut short in is still
    locked as "initializing"); what an add cut shorter still left, or one that never began, is removed as
    folders: the checkout, and .git/worktrees/<its name> (a name no other worktree has)."""
    with _worktree_lock(common):
        try:
            git(["worktree", "remove", "--force", "--force", str(tree)], root)
        except InputError:
            shutil.rmtree(tree, ignore_errors=True)
            shutil.rmtree(common / "worktrees" / tree.name, ignore_errors=True)
