"""Renders kept by what their builds read.

A build (helper/flux.go) reports every read it made through the file system it is confined to (helper/deps.go):
a file's content, whether a path exists or is a folder, a folder's listing, everything below a folder the
generator walked. Run again where every read gives the same value, it builds the same objects. So a build is
kept with its reads, under an identity that says which build it is (the helper, the folder, the Flux spec),
and reused only after the helper has observed every read again, on the checkout being rendered, and found
the same values. No second reader of kustomization files decides what a build depends on: a file named in a
generator's or transformer's configuration is a read like any other.

- `BuildCache`: outputs, in memory for one run and on disk across runs (`$GITOPS_RENDER_CACHE`, default
  `~/.cache/gitops-tools/renders`, which CI keeps with actions/cache). `get_or_build_by_reads` for builds;
  `get_or_build` for what is keyed by its whole input already (a yamllint result by its text, a HelmRelease
  render).
- `remember_environment` / `environment_fingerprints`: every read of an environment's render, kept when it
  renders, so diff can leave out environments whose reads give the same values on both sides, and validate can
  reuse the results of one whose reads still hold, without rendering.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from concurrent.futures import Future
from contextlib import suppress
from pathlib import Path

from ..core.files import read_regular
from . import helper

CACHE_VARIABLE = "GITOPS_RENDER_CACHE"
# Values of GITOPS_RENDER_CACHE that turn caching off: every build runs, every diff renders all.
_OFF = ("off", "0", "false", "no")
# Bump when what is cached changes shape, so older entries are never read.
_FORMAT = "3"
# Kept builds per identity: diff's two sides, and the branches a CI cache sees, each keep theirs.
_CANDIDATES = 8

Read = tuple[str, str, str]  # kind, path relative to the checkout, value (helper/deps.go)


def default_cache_dir() -> Path:
    configured = os.environ.get(CACHE_VARIABLE, "").strip()
    if configured and configured.lower() not in _OFF:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "gitops-tools" / "renders"


def as_reads(raw) -> frozenset[Read]:
    """A helper's reads (a list of [kind, path, value]) as a set; malformed entries are a ValueError."""
    reads = set()
    for entry in raw or []:
        if not (isinstance(entry, list) and len(entry) == 3 and all(isinstance(part, str) for part in entry)):
            raise ValueError(f"not a read: {entry!r}")
        reads.add((entry[0], entry[1], entry[2]))
    return frozenset(reads)


def observe(root: Path, probes: set[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """What each (kind, path) read gives on `root` now, in one question to the helper; {} when it cannot
    say (every kept build then counts as changed)."""
    ordered = sorted(probes)
    if not ordered:
        return {}
    reply = helper.ask({"op": "observe", "root": str(root), "reads": [list(p) for p in ordered]}, "render cache")
    values = reply.get("values")
    if not isinstance(values, list) or len(values) != len(ordered):
        return {}
    return dict(zip(ordered, values, strict=True))


def hold(reads: frozenset[Read], now: dict[tuple[str, str], str]) -> bool:
    """Whether every read gives, in `now` (observe's answer), the value it gave."""
    return all(now.get((kind, path)) == value for kind, path, value in reads)


def holding(root: Path, candidates: list[frozenset[Read]]) -> int | None:
    """The index of the first of `candidates` whose every read gives the same value on `root` now, or None."""
    now = observe(root, {(kind, path) for reads in candidates for kind, path, _ in reads})
    return next((index for index, reads in enumerate(candidates) if hold(reads, now)), None)


def _reads_digest(reads: frozenset[Read]) -> str:
    return hashlib.sha256(json.dumps(sorted(reads)).encode()).hexdigest()


def _identity_key(kind: str, identity: str) -> str:
    return hashlib.sha256(f"{_FORMAT}\0{kind}\0{helper.builder()}\0{identity}".encode()).hexdigest()


class BuildCache:
    """Build outputs: in memory for one run (a build asked for twice at once runs once), and on disk across
    runs. Writes are atomic, and each entry carries the hash of its text, so neither a concurrent run nor a
    damaged file is ever read as an output."""

    def __init__(self, folder: Path | None = None, disk: bool = True):
        self.folder = folder or default_cache_dir()
        self.disk = disk
        self._lock = threading.Lock()
        self._running: dict[str, Future] = {}
        self._identities: dict[str, threading.Lock] = {}
        self._memory: dict[str, str] = {}
        self.hits = 0
        self.builds = 0

    def get_or_build_by_reads(self, identity: str, root: Path, build) -> tuple[str, frozenset[Read]]:
        """The output of the build `identity` names on the checkout `root`, with its reads: a kept one whose
        every read gives the same value on `root` now, else `build()`'s (it returns the output and the reads).
        Builds of one identity run one at a time, so the second of two alike (diff's two sides, two
        environments sharing an overlay) observes the first's reads instead of building again."""
        key = _identity_key("build", identity)
        with self._lock:
            lock = self._identities.setdefault(key, threading.Lock())
        with lock:
            candidates = self._candidates(key)
            index = holding(root, [reads for reads, _ in candidates]) if candidates else None
            if index is not None:
                reads, output = candidates[index]
                text = self._output(output)
                if text is not None:
                    with self._lock:
                        self.hits += 1
                    return text, reads
            text, reads = build()
            with self._lock:
                self.builds += 1
            output = hashlib.sha256(f"{key}\0{_reads_digest(reads)}".encode()).hexdigest()
            self._memory[output] = text
            self._write(output, text)
            kept = [(reads, output)] + [c for c in candidates if c[1] != output]
            self._write_candidates(key, kept[:_CANDIDATES])
            return text, reads

    def environments(self, name: str) -> list[dict[str, frozenset[Read]]]:
        """The reads of an environment's earlier renders, newest first: each a map from the checkout they were
        made on (repository.py) to its reads."""
        stored = self._json(_identity_key("environment", name))
        found = []
        for candidate in stored if isinstance(stored, list) else []:
            try:
                found.append({str(part): as_reads(reads) for part, reads in candidate.items()})
            except (AttributeError, ValueError):
                return []  # damaged: the environment is rendered, and kept again
        return found

    def remember_environment(self, name: str, reads: dict[str, frozenset[Read]]) -> None:
        """Keep what rendering `name` read, newest first (see `environments`)."""
        key = _identity_key("environment", name)
        with self._lock:
            kept = [c for c in self.environments(name) if c != reads]
            record = [{part: sorted(r) for part, r in candidate.items()} for candidate in [reads, *kept]]
            text = self._memory[key] = json.dumps(record[:_CANDIDATES], separators=(",", ":"))
            self._write(key, text)

    def _candidates(self, key: str) -> list[tuple[frozenset[Read], str]]:
        stored = self._json(key)
        found = []
        for candidate in stored if isinstance(stored, list) else []:
            try:
                found.append((as_reads(candidate["reads"]), str(candidate["output"])))
            except (KeyError, TypeError, ValueError):
                return []  # damaged: built again, and replaced
        return found

    def _write_candidates(self, key: str, candidates: list[tuple[frozenset[Read], str]]) -> None:
        record = [{"reads": sorted(reads), "output": output} for reads, output in candidates]
        text = json.dumps(record, separators=(",", ":"))
        self._memory[key] = text
        self._write(key, text)

    def _json(self, key: str):
        text = self._memory.get(key)
        if text is None:
            text = self._read(key)
        if text is None:
            return None
        try:
            return json.loads(text)
        except ValueError:
            return None

    def _output(self, key: str) -> str | None:
        text = self._memory.get(key)
        return text if text is not None else self._read(key)

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
