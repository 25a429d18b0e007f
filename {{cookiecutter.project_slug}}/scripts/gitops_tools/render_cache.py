"""What a build reads, and renders kept by a hash of it.

kustomize's output depends only on the files a kustomization reaches (its folder, the resources,
components, patches, generator files and replacements it names, recursively), the kustomize
binary, and what the caller adds on top (Flux's transforms). `inputs` lists those files without
running kustomize; `fingerprint` hashes them. Two uses:

- `BuildCache`: the output of a build, looked up by that hash in memory (diff's base and head share
  most overlays, and a build both sides ask for at once runs once) and on disk
  (`$GITOPS_RENDER_CACHE`, default `~/.cache/gitops-tools/renders`, which CI keeps with
  actions/cache), so an unchanged overlay is not built again.
- `environment_fingerprint`: one hash for everything an environment's render reads, so diff can
  leave out environments that are the same on both sides without rendering them.

Anything this cannot follow offline (a remote base, a Helm chart) has no fingerprint: such a
build is never cached and such an environment is always rendered.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
from concurrent.futures import Future
from pathlib import Path

import yaml

from .flux_build import named_paths
from .kustomize import KUSTOMIZATION_FILES, command

CACHE_VARIABLE = "GITOPS_RENDER_CACHE"
# Bump when what is cached changes shape, so older entries are never read.
_FORMAT = "1"
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_REMOTE_PREFIXES = ("github.com/", "git@", "gitlab.com/", "bitbucket.org/")
_SKIPPED_FOLDERS = (".git", ".venv", "node_modules", "__pycache__")


class Unfollowable(Exception):
    """A build reads something that cannot be hashed offline."""


def default_cache_dir() -> Path:
    configured = os.environ.get(CACHE_VARIABLE)
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "gitops-tools" / "renders"


def _config(folder: Path) -> dict | None:
    for name in KUSTOMIZATION_FILES:
        file = folder / name
        if file.is_file():
            try:
                loaded = yaml.load(file.read_text(), Loader=_LOADER)
            except (OSError, UnicodeDecodeError, yaml.YAMLError):
                return {}  # kustomize fails on it; the folder's files are still the inputs
            return loaded if isinstance(loaded, dict) else {}
    return None


def _walk(path: Path, found: set[Path], seen: set[Path]) -> None:
    if path in seen:
        return
    seen.add(path)
    if path.is_file():
        found.add(path)
        return
    if not path.is_dir():
        found.add(path)  # missing: its absence is part of the input (the build fails on it)
        return
    config = _config(path)
    if config is None:
        # No kustomization: Flux generates one from every manifest below the folder.
        for current, folders, files in os.walk(path):
            folders[:] = [f for f in folders if f not in _SKIPPED_FOLDERS]
            found.update(Path(current) / name for name in files)
        return
    if config.get("helmCharts") or config.get("helmChartInflationGenerator"):
        raise Unfollowable(f"{path}: Helm charts are fetched at build time")
    found.update(entry for entry in path.iterdir() if entry.is_file())
    for _, named in named_paths(config):
        if "://" in named or named.startswith(_REMOTE_PREFIXES):
            raise Unfollowable(f"{path}: remote base {named}")
        _walk(Path(os.path.normpath(path / named)), found, seen)


def inputs(folders: list[Path]) -> list[Path]:
    """Every file the builds of `folders` read, sorted; raises Unfollowable."""
    found: set[Path] = set()
    seen: set[Path] = set()
    for folder in folders:
        _walk(Path(os.path.normpath(folder)), found, seen)
    return sorted(found)


def _tool() -> str:
    """The kustomize that builds: its path, size and modification time (a new version changes them)."""
    binary = shutil.which(command()[0]) or command()[0]
    try:
        stat = os.stat(binary)
        return f"{' '.join(command())} {binary} {stat.st_size} {stat.st_mtime_ns}"
    except OSError:
        return " ".join(command())


def fingerprint(root: Path, folders: list[Path], extra: str = "") -> str | None:
    """A hash of everything building `folders` reads, relative to `root`, with `extra` (the caller's own
    inputs, e.g. Flux's transforms); None when a build reads something that cannot be hashed offline."""
    try:
        files = inputs(folders)
    except Unfollowable:
        return None
    digest = hashlib.sha256(f"{_FORMAT}\0{_tool()}\0{extra}\0".encode())
    for file in files:
        try:
            name = str(file.relative_to(root))
        except ValueError:
            name = str(file)
        digest.update(name.encode() + b"\0")
        try:
            digest.update(hashlib.sha256(file.read_bytes()).digest())
        except OSError:
            digest.update(b"missing")
    return digest.hexdigest()


def _flux_paths(files: list[Path]) -> list[str] | None:
    """spec.path of every Flux Kustomization written in `files`; None when one is not literal."""
    paths = []
    for file in files:
        if file.suffix not in (".yaml", ".yml") or not file.is_file():
            continue
        try:
            text = file.read_text()
            if "kustomize.toolkit.fluxcd.io" not in text:
                continue
            documents = list(yaml.load_all(text, Loader=_LOADER))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        for doc in documents:
            if not isinstance(doc, dict) or doc.get("kind") != "Kustomization":
                continue
            if not str(doc.get("apiVersion", "")).startswith("kustomize.toolkit.fluxcd.io/"):
                continue
            path = str((doc.get("spec") or {}).get("path", "") if isinstance(doc.get("spec"), dict) else "")
            if "$" in path:
                return None  # substituted at build time: only a render knows it
            paths.append(path)
    return paths


def environment_fingerprint(root: Path, entry: Path, extra_folders: list[Path] = ()) -> str | None:
    """One hash for everything rendering an environment reads: its Flux entry folder, every path a Flux
    Kustomization reachable from it names (followed until no new one appears) and `extra_folders` (the
    eksctl overlay). None when that cannot be told without rendering."""
    folders = [entry, *extra_folders]
    try:
        while True:
            files = inputs(folders)
            named = _flux_paths(files)
            if named is None:
                return None
            more = [root / p.removeprefix("./") for p in named if not p.startswith("/")]
            more = [Path(os.path.normpath(f)) for f in more]
            new = [f for f in more if f not in folders]
            if not new:
                break
            folders += new
    except Unfollowable:
        return None
    return fingerprint(root, folders)


class BuildCache:
    """Build outputs by fingerprint: in memory for one run (a build asked for twice at once runs once),
    and on disk across runs. Writes are atomic, so concurrent runs never read half an entry."""

    def __init__(self, folder: Path | None = None, disk: bool = True):
        self.folder = folder or default_cache_dir()
        self.disk = disk
        self._lock = threading.Lock()
        self._running: dict[str, Future] = {}
        self.hits = 0
        self.builds = 0

    def get_or_build(self, key: str | None, build) -> str:
        if key is None:
            return build()
        with self._lock:
            future = self._running.get(key)
            owner = future is None
            if owner:
                future = self._running[key] = Future()
        if not owner:
            self.hits += 1
            return future.result()
        try:
            text = self._read(key)
            if text is None:
                text = build()
                self.builds += 1
                self._write(key, text)
            else:
                self.hits += 1
        except BaseException as error:
            future.set_exception(error)
            with self._lock:
                del self._running[key]  # a failed build is not remembered
            raise
        future.set_result(text)
        return text

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.yaml"

    def _read(self, key: str) -> str | None:
        if not self.disk:
            return None
        try:
            return self._path(key).read_text()
        except (OSError, UnicodeDecodeError):
            return None

    def _write(self, key: str, text: str) -> None:
        if not self.disk:
            return
        target = self._path(key)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{key[:12]}-", suffix=".part")
        except OSError:
            return  # a cache that cannot be written only costs time
        try:
            with os.fdopen(handle, "w") as out:
                out.write(text)
            os.replace(temporary, target)
        except OSError:
            Path(temporary).unlink(missing_ok=True)
