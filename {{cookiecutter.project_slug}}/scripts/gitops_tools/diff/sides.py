"""Render the two sides of a diff: a git ref in a temporary worktree, or the working tree.

Each side is rendered once with `render_repository`, the same render validate uses; the two
sides run at the same time. A base without clusters/ (the change that adds the GitOps layout)
has no environments, so everything shows as added.

An environment that does not render on one side does not hide the others: when a side fails,
each of its environments is rendered on its own (in parallel) to find the broken ones. Those are
left out of both sides (a missing environment would read as removed) and reported by the command,
one line each on stderr, after the diff of the others is written, with exit status 2. A side where
no environment renders, or whose failure is not one environment's, is one error as before.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from ..model import Environment
from ..render import environment_names, render_repository
from . import gitrefs
from .model import Side


@dataclass
class Broken:
    env: str
    line: str  # "<side> does not render: <one-line error> (environment <env>; ...)"


@dataclass
class Rendered:
    base: list[Environment]
    head: list[Environment]
    broken: list[Broken] = field(default_factory=list)  # left out of both sides


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


def _shown(error: InputError, tree: Path) -> str:
    return str(error).replace(f"{tree}/", "").replace(str(tree), ".")


def _render_one(tree: Path, name: str) -> list[Environment] | InputError:
    try:
        return render_repository(tree, [name])
    except InputError as error:
        return error


def render_tree(
    tree: Path, wanted: list[str] | None, label: str, is_base: bool = False
) -> tuple[list[Environment], list[Broken]]:
    names = present(tree, wanted)
    if names == [] or (is_base and not (tree / "clusters").is_dir()):
        return [], []
    try:
        return render_repository(tree, names), []
    except InputError as error:
        whole = InputError(f"{label} does not render: {_shown(error, tree)}")
    try:
        candidates = names if names is not None else environment_names(tree)
    except InputError:
        raise whole from None
    if len(candidates) < 2:
        raise whole
    with ThreadPoolExecutor(max_workers=min(len(candidates), os.cpu_count() or 1)) as pool:
        results = list(pool.map(lambda name: _render_one(tree, name), candidates))
    good = [env for result in results if not isinstance(result, InputError) for env in result]
    broken = [
        Broken(name, f"{label} does not render: {_shown(result, tree)} (environment {name}; its diff is left out)")
        for name, result in zip(candidates, results, strict=True)
        if isinstance(result, InputError)
    ]
    if not good or not broken:  # not one environment's fault
        raise whole
    return good, broken


def render_side(
    which: Side, root: Path, wanted: list[str] | None, is_base: bool = False
) -> tuple[list[Environment], list[Broken]]:
    if not which.commit:
        return render_tree(root, wanted, which.label, is_base)
    with gitrefs.worktree(which.commit, root) as tree:
        return render_tree(tree, wanted, which.label, is_base)


def render_sides(base: Side, head: Side, root: Path, wanted: list[str] | None) -> Rendered:
    """Both sides, without the environments that do not render on either (listed in `broken`)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        base_job = pool.submit(render_side, base, root, wanted, True)
        head_job = pool.submit(render_side, head, root, wanted)
        (base_envs, base_broken), (head_envs, head_broken) = base_job.result(), head_job.result()
    broken = base_broken + head_broken
    if wanted:
        known = {e.name for e in base_envs} | {e.name for e in head_envs} | {b.env for b in broken}
        missing = [name for name in wanted if name not in known]
        if missing:
            raise InputError(f"unknown environment {missing[0]!r}: not in clusters/ on either side")
    left_out = {b.env for b in broken}
    return Rendered(
        [e for e in base_envs if e.name not in left_out], [e for e in head_envs if e.name not in left_out], broken
    )


def render_both(
    base: Side, head: Side, root: Path, wanted: list[str] | None
) -> tuple[list[Environment], list[Environment]]:
    """Both sides, or the first broken environment's error."""
    rendered = render_sides(base, head, root, wanted)
    if rendered.broken:
        raise InputError(rendered.broken[0].line)
    return rendered.base, rendered.head
