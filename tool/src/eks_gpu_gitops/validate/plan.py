"""What to read, decided before anything is rendered: the repository's environments, or the
kustomization folders and plain files named on the command line."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import InputError
from ..core.yaml_file import read_ahead
from ..model import relative
from ..render import helper
from ..render import repository as render

YAML_SUFFIXES = (".yaml", ".yml")
_SKIPPED_FOLDERS = (".git", ".venv", "node_modules", "__pycache__")


@dataclass
class Plan:
    root: Path  # repository root, or the working folder outside one
    repository: bool  # render clusters/<env> (True) or read the paths (False)
    envs: list[str] | None = None
    builds: list[Path] = field(default_factory=list)  # kustomization folders
    files: list[Path] = field(default_factory=list)  # plain manifest files
    sources: list[Path] = field(default_factory=list)  # YAML sources for yamllint
    env: str = ""  # environment name guessed from the paths


def find_root(start: Path) -> Path | None:
    try:
        return render.repository_root(start.resolve())
    except (InputError, OSError, RuntimeError):  # RuntimeError: a symlink loop on the way up
        return None


def yaml_files(folder: Path) -> list[Path]:
    found = []
    for current, folders, files in os.walk(folder):
        folders[:] = sorted(f for f in folders if f not in _SKIPPED_FOLDERS and not f.startswith("."))
        found.extend(Path(current) / f for f in sorted(files) if f.endswith(YAML_SUFFIXES) and not f.startswith("."))
    return found


def check_readable(path: Path) -> None:
    try:
        path.stat()
    except FileNotFoundError:
        raise InputError(f"{path}: no such file or directory") from None
    except OSError as error:  # ELOOP (a symlink loop), EACCES on the way, ...
        raise InputError(f"{path}: cannot read: {error.strerror}") from None
    if not os.access(path, os.R_OK | (os.X_OK if path.is_dir() else 0)):
        raise InputError(f"{path}: cannot read: permission denied")


def source_folders(root: Path) -> list[str]:
    """The top folders yamllint reads in a repository: clusters/, overlays/ where there is one, and each
    top folder a Flux Kustomization in clusters/ points into (infrastructure/, apps/, ...)."""
    folders = {"clusters"} | ({"overlays"} if (root / "overlays").is_dir() else set())
    for file in yaml_files(root / "clusters"):
        for doc in read_ahead(file, file.relative_to(root)):
            spec = doc.get("spec") if isinstance(doc, dict) else None
            path = str(spec.get("path") or "") if isinstance(spec, dict) else ""
            top = Path(os.path.normpath(path.lstrip("/") or ".")).parts[:1]
            if top and top[0] != ".." and (root / top[0]).is_dir():
                folders.add(top[0])
    return sorted(folders)


def _guess_env(paths: list[Path], root: Path) -> str:
    names = set()
    for path in paths:
        parts = Path(relative(path, root)).parts
        for marker in ("overlays", "clusters", "rendered"):
            if marker in parts and parts.index(marker) + 1 < len(parts):
                names.add(parts[parts.index(marker) + 1])
                break
        else:
            names.add("")
    names.discard("base")
    return names.pop() if len(names) == 1 else ""


def plan(paths: list[Path], envs: list[str] | None) -> Plan:
    cwd = Path.cwd()
    if not paths:
        root = find_root(cwd)
        if root is None:
            raise InputError(
                f"{cwd}: not inside a Flux repository (no clusters/<env>/ folder above it); "
                "name the files or folders to validate"
            )
        paths = [root]
    for path in paths:
        check_readable(path)
    first = paths[0].resolve()
    root = find_root(first) or find_root(cwd) or cwd
    # The repository root, or clusters/<env>: render environments.
    if len(paths) == 1 and first.is_dir() and (first == root or first.parent == (root / "clusters").resolve()):
        chosen = envs or ([first.name] if first != root else None)
        sources = [p for top in source_folders(root) for p in yaml_files(root / top)]
        return Plan(root, True, chosen, sources=sources)
    if envs:
        raise InputError("--env selects environments of a repository; it does not go with file or folder paths")
    result = Plan(root, False, env=_guess_env(paths, root))
    for path in paths:
        if path.is_file():
            if path.name in helper.KUSTOMIZATION_FILES:
                result.builds.append(path.parent)
            else:
                result.files.append(path)
            result.sources.append(path)
        elif helper.has_kustomization(path):
            result.builds.append(path)
            result.sources.extend(yaml_files(path))
        else:
            _plan_folder(path, result)
    return result


def _plan_folder(path: Path, result: Plan) -> None:
    """A folder without a kustomization: its kustomizations as builds (components only apply inside
    one), every other YAML file as a plain manifest."""
    added = False
    for file in yaml_files(path):
        folder = file.parent
        if helper.has_kustomization(folder):
            if folder not in result.builds and not helper.is_component(folder):
                result.builds.append(folder)
                added = True
        elif not any(folder.is_relative_to(b) for b in result.builds):
            result.files.append(file)
            added = True
        result.sources.append(file)
    if not added:
        raise InputError(f"{path}: no YAML files to validate")
