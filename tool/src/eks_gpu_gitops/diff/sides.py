"""Render the two sides of a diff: a git ref in a temporary worktree, or the working tree.

Each side is rendered once with `render_repository`, the same render validate uses; the two
sides run at the same time. A base without clusters/ (the change that adds the GitOps layout)
has no environments, so everything shows as added.

An environment whose inputs are the same on both sides is not rendered at all: it is listed as unchanged.
Its inputs are what an earlier render of it read (render_cache.py, repository.environment_fingerprints:
every file, listing and path test its builds made, named relative to the tree), when they give the same
values on both sides now; an environment no earlier render is known for is rendered. GITOPS_RENDER_CACHE=off
renders every environment.

An environment that does not render on one side does not hide the others: when a side fails,
each of its environments is rendered on its own (in parallel) to find the broken ones. Those are
left out of both sides (a missing environment would read as removed) and reported by the command,
one line each on stderr, after the diff of the others is written, with exit status 2. A side where
no environment renders, or whose failure is not one environment's, is one error as before.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import InputError
from ..model import Environment
from ..render import render_cache
from ..render.repository import environment_fingerprints, environment_names, render_repository
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
    unchanged: list[str] = field(default_factory=list)  # same inputs on both sides: not rendered


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
    tree: Path, wanted: list[str] | None, label: str, is_base: bool = False, unchanged: int = 0
) -> tuple[list[Environment], list[Broken]]:
    """`unchanged`: how many other environments were left out as the same on both sides (they count as
    environments that render when telling one broken environment from a broken side)."""
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
    if len(candidates) + unchanged < 2:
        raise whole
    with ThreadPoolExecutor(max_workers=min(len(candidates), os.cpu_count() or 1)) as pool:
        results = list(pool.map(lambda name: _render_one(tree, name), candidates))
    good = [env for result in results if not isinstance(result, InputError) for env in result]
    broken = [
        Broken(name, f"{label} does not render: {_shown(result, tree)} (environment {name}; its diff is left out)")
        for name, result in zip(candidates, results, strict=True)
        if isinstance(result, InputError)
    ]
    if not (good or unchanged) or not broken:  # not one environment's fault
        raise whole
    return good, broken


def _tree(which: Side, root: Path, stack: ExitStack) -> Path:
    if not which.commit:
        return root
    return stack.enter_context(gitrefs.worktree(which.commit, root))


def _names(tree: Path) -> list[str]:
    try:
        return environment_names(tree)
    except InputError:
        return []  # no clusters/ (a base before the GitOps layout): rendering says the rest


def unchanged(base_tree: Path, head_tree: Path, names: list[str]) -> list[str]:
    """The environments an earlier render's reads hold for on both sides, alike (never one that cannot be
    told: it is rendered)."""
    if not render_cache.enabled() or not names:
        return []
    with ThreadPoolExecutor(max_workers=2) as pool:
        base, head = pool.map(lambda tree: environment_fingerprints(tree, names), (base_tree, head_tree))
    return [n for n in names if base[n] is not None and base[n] == head[n]]


def render_sides(base: Side, head: Side, root: Path, wanted: list[str] | None) -> Rendered:
    """Both sides, without the environments that do not render on either (listed in `broken`) and without
    those whose inputs are the same on both (listed in `unchanged`)."""
    with ExitStack() as stack:
        base_tree, head_tree = _tree(base, root, stack), _tree(head, root, stack)
        base_names, head_names = _names(base_tree), _names(head_tree)
        both = [n for n in base_names if n in head_names and (wanted is None or n in wanted)]
        same = unchanged(base_tree, head_tree, both)
        chosen = wanted if wanted is not None else sorted({*base_names, *head_names})
        chosen = [n for n in chosen if n not in same]
        if same and not chosen:
            return Rendered([], [], unchanged=same)
        rest = chosen if same else wanted
        with ThreadPoolExecutor(max_workers=2) as pool:
            base_job = pool.submit(render_tree, base_tree, rest, base.label, True, len(same))
            head_job = pool.submit(render_tree, head_tree, rest, head.label, False, len(same))
            (base_envs, base_broken), (head_envs, head_broken) = base_job.result(), head_job.result()
    broken = base_broken + head_broken
    if wanted:
        known = {e.name for e in base_envs} | {e.name for e in head_envs} | {b.env for b in broken} | set(same)
        missing = [name for name in wanted if name not in known]
        if missing:
            raise InputError(f"unknown environment {missing[0]!r}: not in clusters/ on either side")
    left_out = {b.env for b in broken}
    return Rendered(
        [e for e in base_envs if e.name not in left_out],
        [e for e in head_envs if e.name not in left_out],
        broken,
        same,
    )


def render_both(
    base: Side, head: Side, root: Path, wanted: list[str] | None
) -> tuple[list[Environment], list[Environment]]:
    """Both sides, or the first broken environment's error."""
    rendered = render_sides(base, head, root, wanted)
    if rendered.broken:
        raise InputError(rendered.broken[0].line)
    return rendered.base, rendered.head
