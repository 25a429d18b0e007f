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
import tempfile
import threading
from concurrent.futures import Future
from contextlib import contextmanager, suppress
from pathlib import Path

import yaml

from ..core.files import LIMIT, read_regular
from .helper import KUSTOMIZATION_FILES, builder
from .kustomization import named_paths

CACHE_VARIABLE = "GITOPS_RENDER_CACHE"
# Values of GITOPS_RENDER_CACHE that turn caching off: every build runs kustomize, every diff renders all.
_OFF = ("off", "0", "false", "no")
# Bump when what is cached changes shape, so older entries are never read.
_FORMAT = "2"
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_REMOTE_PREFIXES = ("github.com/", "git@", "gitlab.com/", "bitbucket.org/")
_SKIPPED_FOLDERS = (".git", ".venv", "node_modules", "__pycache__")


class Unfollowable(Exception):
    """A build reads something that cannot be hashed offline."""


def default_cache_dir() -> Path:
    configured = os.environ.get(CACHE_VARIABLE, "").strip()
    if configured and configured.lower() not in _OFF:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "gitops-tools" / "renders"


# Files read while the tree is known not to change (`reading_once`): each is read once, whichever of an
# environment's fingerprint and its neighbours' asks (every environment reads the same bases).
_READS: dict[Path, bytes] | None = None


@contextmanager
def reading_once():
    """A block in which no input file changes: fingerprints read each file once."""
    global _READS
    outer = _READS
    _READS = {} if outer is None else outer
    try:
        yield
    finally:
        _READS = outer


def _read(file: Path) -> bytes:
    """A file's bytes; an OSError for one that is no regular file (a FIFO would never end) or too large."""
    reads = _READS
    data = reads.get(file) if reads is not None else None
    if data is None:
        data = read_regular(file)
        if data is None:
            raise OSError(f"{file}: not a regular file of at most {LIMIT} bytes")  # not kept: raised again each time
        if reads is not None:
            reads[file] = data
    return data


def _config(folder: Path) -> dict | None:
    for name in KUSTOMIZATION_FILES:
        file = folder / name
        if file.is_file():
            try:
                return _parsed(_read(file))
            except OSError:
                return {}  # kustomize fails on it; the folder's files are still the inputs
    return None


# Parsed kustomization files by content: every overlay reads the same bases, and a fingerprint
# reads them for each build and each environment. Callers only read what is returned.
_PARSED: dict[bytes, dict] = {}


def _parsed(content: bytes) -> dict:
    key = hashlib.sha256(content).digest()
    found = _PARSED.get(key)
    if found is None:
        try:
            loaded = yaml.load(content.decode(), Loader=_LOADER)
        except (UnicodeDecodeError, yaml.YAMLError):
            loaded = {}
        found = _PARSED[key] = loaded if isinstance(loaded, dict) else {}
    return found


def _walk(path: Path, found: set[Path], seen: set[Path], inside: Path | None = None) -> None:
    if path in seen:
        return
    seen.add(path)
    if inside is not None and not path.resolve().is_relative_to(inside):
        raise Unfollowable(f"{path}: leads out of the repository")  # the render refuses it; nothing is read
    if path.is_file():
        found.add(path)
        return
    if not path.is_dir():
        found.add(path)  # missing: its absence is part of the input (the build fails on it)
        return
    config = _config(path)
    if config is None:
        # No kustomization: Flux generates one from every manifest below the folder, and lists each
        # sub-folder that has a kustomization file as a whole (which may read outside the folder).
        for current, folders, files in os.walk(path):
            here = Path(current)
            if here != path and _config(here) is not None:
                folders.clear()
                _walk(here, found, seen, inside)
                continue
            folders[:] = [f for f in folders if f not in _SKIPPED_FOLDERS]
            found.update(here / name for name in files)
        return
    if config.get("helmCharts") or config.get("helmChartInflationGenerator"):
        raise Unfollowable(f"{path}: Helm charts are fetched at build time")
    found.update(entry for entry in path.iterdir() if entry.is_file())
    for _, named in named_paths(config):
        if "://" in named or named.startswith(_REMOTE_PREFIXES):
            raise Unfollowable(f"{path}: remote base {named}")
        _walk(Path(os.path.normpath(path / named)), found, seen, inside)


def inputs(folders: list[Path]) -> list[Path]:
    """Every file the builds of `folders` read, sorted; raises Unfollowable."""
    found: set[Path] = set()
    seen: set[Path] = set()
    for folder in folders:
        _walk(Path(os.path.normpath(folder)), found, seen)
    return sorted(found)


def fingerprint(root: Path, folders: list[Path], extra: str = "") -> str | None:
    """A hash of everything building `folders` reads, relative to `root`, with `extra` (the caller's own
    inputs, e.g. Flux's transforms); None when a build reads something that cannot be hashed offline."""
    try:
        files = inputs(folders)
    except Unfollowable:
        return None
    return _digest(root, files, extra)


def _digest(root: Path, files: list[Path], extra: str, listed: frozenset[str] | None = None) -> str:
    digest = hashlib.sha256(f"{_FORMAT}\0{builder()}\0{extra}\0".encode())
    for file in files:
        try:
            name = str(file.relative_to(root))
        except ValueError:
            name = str(file)
        digest.update(name.encode() + b"\0")
        if listed is not None and name not in listed:
            digest.update(b"not copied")  # git ignores it: the render does not see it
            continue
        if file.is_symlink():  # a render keeps a link only when it stays inside the repository
            digest.update(b"link " + os.fsencode(os.readlink(file)) + b"\0")
        try:
            # A device or a pipe is never read (/dev/zero would not end): its absence as a file is the input.
            digest.update(hashlib.sha256(_read(file)).digest() if file.is_file() else b"not a file")
        except OSError:
            digest.update(b"missing")
    return digest.hexdigest()


def _flux_paths(files: list[Path]) -> list[str] | None:
    """spec.path of every Flux Kustomization written in `files`, in a document or in a patch written
    inline; None when one may be set at build time (a `${VAR}` path, a JSON patch of /spec/path)."""
    paths = []
    for file in files:
        if file.suffix not in (".yaml", ".yml") and file.name != "Kustomization":
            continue
        try:
            text = _read(file).decode()
            if "kustomize.toolkit.fluxcd.io" not in text and "/spec/path" not in text:
                continue
            if "/spec/path" in text:
                return None
            documents = list(yaml.load_all(text, Loader=_LOADER))
        except (OSError, UnicodeDecodeError, yaml.YAMLError):
            continue
        for doc in documents:
            found = _kustomization_paths(doc)
            if found is None:
                return None
            paths += found
    return paths


def _kustomization_paths(doc, depth: int = 0) -> list[str] | None:
    """spec.path of a Flux Kustomization document, and of those in the patches written inside it."""
    paths = []
    if not isinstance(doc, dict) or depth > 3:
        return paths
    if doc.get("kind") == "Kustomization" and str(doc.get("apiVersion", "")).startswith("kustomize.toolkit.fluxcd.io/"):
        spec = doc.get("spec") if isinstance(doc.get("spec"), dict) else {}
        path = str(spec.get("path", ""))
        if "$" in path:
            return None  # substituted at build time: only a render knows it
        paths.append(path)
        # Flux appends spec.components to the kustomization at the path (flux_build.py); read from the path.
        for component in spec.get("components") or []:
            if isinstance(component, str):
                paths += [os.path.join(path, component), component]
    for patch in _inline_patches(doc):
        try:
            patched = list(yaml.load_all(patch, Loader=_LOADER))
        except yaml.YAMLError:
            continue
        for inner in patched:
            found = _kustomization_paths(inner, depth + 1)
            if found is None:
                return None
            paths += [p for p in found if p]
    return paths


def _inline_patches(doc: dict) -> list[str]:
    """Patches written as text inside a kustomization file or a Flux Kustomization's spec."""
    holders = [doc, doc.get("spec") if isinstance(doc.get("spec"), dict) else {}]
    found = []
    for holder in holders:
        for item in holder.get("patches") or []:
            if isinstance(item, dict) and isinstance(item.get("patch"), str):
                found.append(item["patch"])
            elif isinstance(item, str):
                found.append(item)  # patchesStrategicMerge-style text
        for item in holder.get("patchesStrategicMerge") or []:
            if isinstance(item, str) and "\n" in item:
                found.append(item)
    return found


def environment_fingerprint(
    root: Path, entry: Path, extra_folders: list[Path] = (), listed: frozenset[str] | None = None
) -> str | None:
    """One hash for everything rendering an environment reads: its Flux entry folder, every path a Flux
    Kustomization reachable from it names (followed until no new one appears) and `extra_folders` (the
    eksctl overlay). None when that cannot be told without rendering, or when a path leads out of the
    repository. `listed`: the files the render copies (flux_build.listed_files); another file counts as
    absent, whatever it holds, as it does for the render."""
    inside = root.resolve()
    found: set[Path] = set()
    seen: set[Path] = set()
    read: set[Path] = set()
    folders = [Path(os.path.normpath(f)) for f in (entry, *extra_folders)]
    pending = list(folders)
    try:
        while pending:
            for folder in pending:
                _walk(folder, found, seen, inside)
            new_files = sorted(found - read)
            read.update(new_files)
            named = _flux_paths(new_files)
            if named is None:
                return None
            more = [Path(os.path.normpath(root / p.removeprefix("./"))) for p in named if not p.startswith("/")]
            more = [f for f in more if f.is_relative_to(root)]  # a path out of the repository fails the render
            pending = [f for f in dict.fromkeys(more) if f not in folders]
            folders += pending
    except Unfollowable:
        return None
    return _digest(root, sorted(found), "", listed)


class BuildCache:
    """Build outputs by fingerprint: in memory for one run (a build asked for twice at once runs once),
    and on disk across runs. Writes are atomic, and each entry carries the hash of its text, so neither
    a concurrent run nor a damaged file is ever read as an output."""

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
            else:
                self.hits += 1
        if not owner:
            return future.result()
        try:
            text = self._read(key)
            if text is None:
                text = build()
                with self._lock:
                    self.builds += 1
                self._write(key, text)
            else:
                with self._lock:
                    self.hits += 1
        except BaseException as error:
            future.set_exception(error)
            with self._lock:
                del self._running[key]  # a failed build is not remembered
            raise
        future.set_result(text)
        return text

    def read(self, key: str) -> str | None:
        """The text kept under `key` on disk (a validate result, say), or None."""
        return self._read(key)

    def write(self, key: str, text: str) -> None:
        """Keep `text` under `key` on disk (atomically; a cache that cannot be written only costs time)."""
        self._write(key, text)

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.yaml"

    def _read(self, key: str) -> str | None:
        if not self.disk:
            return None
        stored = read_regular(self._path(key))  # an entry made a FIFO or a link to /dev/zero is a miss
        if stored is None:
            return None
        header, newline, body = stored.partition(b"\n")
        if not newline or header != _header(body):
            return None  # damaged or from another format: built again and replaced
        try:
            text = body.decode()
        except UnicodeDecodeError:
            return None
        with suppress(OSError):
            os.utime(self._path(key))  # read now: CI drops entries no run has read for a while
        return text

    def _write(self, key: str, text: str) -> None:
        if not self.disk:
            return
        target = self._path(key)
        body = text.encode()
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{key[:12]}-", suffix=".part")
        except OSError:
            return  # a cache that cannot be written only costs time
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(_header(body) + b"\n" + body)
            os.replace(temporary, target)
        except OSError:
            Path(temporary).unlink(missing_ok=True)


def _header(body: bytes) -> bytes:
    return f"# gitops-tools render cache {_FORMAT} sha256={hashlib.sha256(body).hexdigest()}".encode()


_SHARED: dict[str, BuildCache] = {}
_SHARED_LOCK = threading.Lock()


def enabled() -> bool:
    return os.environ.get(CACHE_VARIABLE, "").strip().lower() not in _OFF


def shared() -> BuildCache | None:
    """The process's cache for the folder GITOPS_RENDER_CACHE names (one per folder, so every render of
    a run, diff's two sides included, shares it); None when the variable is `off`."""
    if not enabled():
        return None
    folder = default_cache_dir()
    with _SHARED_LOCK:
        cache = _SHARED.get(str(folder))
        if cache is None:
            cache = _SHARED[str(folder)] = BuildCache(folder)
        return cache
