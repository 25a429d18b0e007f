"""Write a render into a folder (`render --out DIR`, default rendered/): DIR/<env>/<kustomization>.yaml,
DIR/<env>/helmrelease-<name>.yaml (what each HelmRelease installs) and DIR/<env>/eksctl.yaml, all at once or
nothing, replacing only an earlier render's output."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from ..core import interrupts
from ..core.errors import InputError
from ..core.paths import file_in
from ..model import Environment, dump
from .repository import repository_root

# Written into every render output: only a folder that holds it (and only what render writes) is replaced.
RENDER_MARKER = ".gitops-render"
_MARKER_TEXT = "Written by scripts/render; the next render replaces this whole folder.\n"
# Then the files it wrote, one per line: a folder holding anything else is not replaced.
_LISTED = "Files:\n"
# Top-level folders of the repository that hold what Flux, kustomize and the tools read: never an output.
_SOURCE_FOLDERS = ("clusters", "overlays", "scripts", "trainer", ".git", ".github")


def _is_render_output(folder: Path) -> bool:
    """Whether `folder` is empty, or an earlier render's output: its marker file and the files that marker
    lists (<env>/<name>.yaml) only, so replacing it loses nothing a person made."""
    entries = list(folder.iterdir())
    if not entries:
        return True
    marker = folder / RENDER_MARKER
    if not marker.is_file() or marker.is_symlink():
        return False
    text = marker.read_text(errors="replace")
    if _LISTED not in text:
        return False  # an older render's marker lists nothing: what is there cannot be told apart
    listed = set(text.split(_LISTED, 1)[1].splitlines())
    for entry in entries:
        if entry == marker:
            continue
        if not entry.is_dir() or entry.is_symlink():
            return False
        if any(f"{entry.name}/{f.name}" not in listed or not f.is_file() or f.is_symlink() for f in entry.iterdir()):
            return False
    return True


def _repository() -> Path | None:
    try:
        return repository_root(Path.cwd().resolve()).resolve()
    except InputError:
        return None


def _refuse_holders(out: Path, root: Path | None) -> None:
    """Refuse an --out that is the repository, the current folder or a folder that holds either."""
    target = out.resolve()
    for holder, what in ((root, "the repository"), (Path.cwd().resolve(), "the current folder")):
        if holder is not None and holder.is_relative_to(target):
            raise InputError(f"{out}: --out is {what} or a folder that holds it; choose a folder of its own")


def _refuse_sources(out: Path, root: Path | None) -> None:
    """Refuse an --out inside the folders that hold the repository's sources (a new, empty one too)."""
    target = out.resolve()
    if root is not None and target.is_relative_to(root) and target.relative_to(root).parts[0] in _SOURCE_FOLDERS:
        top = target.relative_to(root).parts[0]
        raise InputError(f"{out}: --out is inside {top}/, which holds the repository's sources; choose another")


def check_output(out: Path) -> None:
    """Refuse an output folder render must not replace, before any work is done."""
    try:
        if out.is_symlink() or (out.exists() and not out.is_dir()):
            raise InputError(f"{out}: --out must be a folder, and this is a file")
        root = _repository()
        _refuse_holders(out, root)
        if out.is_dir() and not _is_render_output(out):
            raise InputError(f"{out}: the folder holds files render did not write; choose another --out or empty it")
        _refuse_sources(out, root)
        out.parent.mkdir(parents=True, exist_ok=True)
        interrupts.remove(interrupts.temporary_folder(".render-", out.parent))  # where the output is staged
    except OSError as error:
        raise InputError(f"{out}: cannot write: {error.strerror}") from None


def write_rendered(environments: list[Environment], out: Path) -> None:
    """Write every file into a temporary folder beside `out`, then put it in place: a failure leaves
    no half-written output, and an existing `out` is only replaced when it is empty or an earlier render."""
    check_output(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        staging = interrupts.temporary_folder(".render-", out.parent)  # removed on any way out (core/interrupts.py)
    except OSError as error:
        raise InputError(f"{out}: cannot write: {error.strerror}") from None
    previous = staging.with_name(staging.name + "-previous")
    try:
        written = []
        for environment in environments:
            folder = file_in(staging, environment.name, "", "environment")
            folder.mkdir()
            outputs = [(k.name, "", "Flux Kustomization", k.objects) for k in environment.kustomizations]
            outputs += [(r.name, "helmrelease-", "HelmRelease", r.objects) for r in environment.releases if r.objects]
            if environment.cluster_config:
                outputs.append(("eksctl", "", "the eksctl overlay", [environment.cluster_config]))
            for name, prefix, what, objects in outputs:
                file = file_in(folder, f"{prefix}{name}", ".yaml", f"{environment.name}: {what}")
                if file.exists():
                    raise InputError(f"{environment.name}: two outputs would be written to {file.name}; rename one")
                file.write_text(dump(objects))
                written.append(f"{folder.name}/{file.name}")
        (staging / RENDER_MARKER).write_text(_MARKER_TEXT + _LISTED + "".join(f"{name}\n" for name in written))
        # The folder keeps the mode of the one it replaces, or gets the one a new folder gets (not mkdtemp's 0700).
        os.chmod(staging, stat.S_IMODE(out.stat().st_mode) if out.is_dir() else 0o777 & ~_umask())
        # The two renames happen both or neither, whenever a signal comes: never the earlier output put
        # aside and removed with no new one in its place.
        with interrupts.shielded():
            if out.exists():
                out.rename(previous)  # put aside, removed once the new output is in place
            try:
                staging.rename(out)
            except OSError:
                if previous.exists() and not out.exists():
                    previous.rename(out)
                raise
    except OSError as error:
        raise InputError(f"{out}: cannot write: {error.strerror}") from None
    finally:
        with interrupts.shielded():
            interrupts.remove(staging)
            shutil.rmtree(previous, ignore_errors=True)


def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current
