"""Render the two sides of a diff: a git ref in a temporary worktree, or the working tree.

Each side is rendered once with `render_repository`, the same render validate uses; the two
sides run at the same time. A base without clusters/ (the change that adds the GitOps layout)
has no environments, so everything shows as added.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..errors import InputError
from ..model import Environment
from ..render import render_repository
from . import gitrefs
from .model import Side


def side(ref: str | None, root: Path) -> Side:
    """Resolve `ref` now, so an unknown ref fails before anything is rendered."""
    if ref is None:
        return Side(label="working tree", ref="", commit="")
    commit = gitrefs.resolve(ref, root)
    return Side(label=f"{ref} ({gitrefs.short(commit, root)})", ref=ref, commit=commit)


def present(root: Path, wanted: list[str] | None) -> list[str] | None:
    """The wanted environments this tree has (None: all of them)."""
    if wanted is None:
        return None
    return [name for name in wanted if (root / "clusters" / name).is_dir()]


def render_tree(tree: Path, wanted: list[str] | None, label: str, is_base: bool = False) -> list[Environment]:
    names = present(tree, wanted)
    if names == [] or (is_base and not (tree / "clusters").is_dir()):
        return []
    try:
        return render_repository(tree, names)
    except InputError as error:
        message = str(error).replace(f"{tree}/", "").replace(str(tree), ".")
        raise InputError(f"{label} does not render: {message}") from None


def render_side(which: Side, root: Path, wanted: list[str] | None, is_base: bool = False) -> list[Environment]:
    if not which.commit:
        return render_tree(root, wanted, which.label, is_base)
    with gitrefs.worktree(which.commit, root) as tree:
        return render_tree(tree, wanted, which.label, is_base)


def render_both(
    base: Side, head: Side, root: Path, wanted: list[str] | None
) -> tuple[list[Environment], list[Environment]]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        base_job = pool.submit(render_side, base, root, wanted, True)
        head_job = pool.submit(render_side, head, root, wanted)
        base_envs, head_envs = base_job.result(), head_job.result()
    if wanted:
        known = {e.name for e in base_envs} | {e.name for e in head_envs}
        missing = [name for name in wanted if name not in known]
        if missing:
            raise InputError(f"unknown environment {missing[0]!r}: not in clusters/ on either side")
    return base_envs, head_envs
