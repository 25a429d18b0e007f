"""Run Kustomize: the helper, kustomize-batch, when this install has it (many builds per process, as
kustomize-controller builds), else a process per build of the standalone `kustomize` binary, or of
`kubectl kustomize`.

kustomize-batch (the tool's helper/, built into every platform wheel as eks_gpu_gitops/_helper/) links the
kustomize that kustomize-controller v1.9.4 links (fluxcd/pkg/kustomize v1.35.4, kustomize v5.8.1) and builds
the way it does. A build process, by contrast, spends most of its time starting up: on a fleet,
kustomize-batch renders several times faster. GITOPS_KUSTOMIZE_BATCH names another binary, or `off`.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import os
import queue
import re
import shutil
import subprocess
import threading
from functools import lru_cache
from pathlib import Path

from ..core.credentials import mask_text
from ..core.errors import InputError

# kustomize-controller builds with this restrictor, so a render here matches what Flux applies; and without
# sorting (its krusty options leave Reorder unset, which krusty's applySortOrder takes as no sort), so the
# objects come in the order Flux applies them in, the order kustomize-batch gives too.
FLAGS = ["--load-restrictor", "LoadRestrictionsNone", "--reorder", "none"]
BATCH_VARIABLE = "GITOPS_KUSTOMIZE_BATCH"
_OFF = ("off", "0", "false", "no")
# The file names kustomize reads a folder's kustomization from.
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
# The helper a wheel carries (hatch_build.py), or that `make` in the template builds for an editable install.
HELPER = Path(__file__).resolve().parent.parent / "_helper" / "kustomize-batch"
# kubectl logs its error through klog: `E1123 01:54:05.362503  32540 run.go:72] "command failed" err="..."`,
# or `err=<` followed by indented lines and `>` when the message has several lines.
# A replacement's source field is gone: a guard of an environment component tripped.
_REPLACEMENT_SOURCE_MISSING = re.compile(r"is missing for replacement source|nothing selected by")
_KLOG_ERROR = re.compile(r'^[EWIF]\d{4} \S+\s+\d+ \S+\] "command failed" err=(.*)$')


@lru_cache(maxsize=1)
def command() -> tuple[str, ...]:
    if shutil.which("kustomize"):
        return ("kustomize", "build")
    if shutil.which("kubectl"):
        return ("kubectl", "kustomize")
    why = (
        f"{BATCH_VARIABLE} turns the helper off"
        if os.environ.get(BATCH_VARIABLE, "").strip()
        else "this install of eks-gpu-gitops has no helper (built from source without Go)"
    )
    raise InputError(
        f"{why}, and neither kustomize nor kubectl is installed; install one of them (kubectl includes kustomize)"
    )


def has_kustomization(folder: Path) -> bool:
    return any((folder / name).is_file() for name in KUSTOMIZATION_FILES)


def is_component(folder: Path) -> bool:
    """Whether the folder's kustomization is a Component, which only builds inside another one."""
    for name in KUSTOMIZATION_FILES:
        try:
            text = (folder / name).read_text()
        except (OSError, UnicodeDecodeError):
            continue
        return bool(re.search(r"^kind:\s*Component\s*$", text, re.MULTILINE))
    return False


# Where kustomize repeats the configuration it read (secrets included) in an error, and what is kept
# (kustomize/v5.5.0, the version in kubectl 1.32, and v5.8.1): kyaml/yaml/fns.go's `: node contents:\n<yaml>`,
# and api/kv/kv.go's literal sources (`literal sources [...]`, `invalid literal source %v, expected
# key=value`) and env-file lines (`line %d has invalid utf8 bytes : %v`).
_ECHOES = (
    (re.compile(r":? *node contents:.*", re.DOTALL), ""),
    (re.compile(r"literal sources \[.*?\]: invalid literal source .*?, expected key=value"),
     "invalid literal source (value not shown), expected key=value"),
    (re.compile(r"(has invalid utf8 bytes) : .*"), r"\1"),
)  # fmt: skip


def error_cause(stderr: str) -> str:
    """The message of a failed build, without kubectl's log prefix and quoting, without the
    configuration kustomize echoes (it may hold secrets) and with credential shapes masked."""
    return mask_text(_without_echoes(_logged_cause(stderr)))


def _without_echoes(message: str) -> str:
    for pattern, replacement in _ECHOES:
        message = pattern.sub(replacement, message)
    return message.strip()


def _logged_cause(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    for index, line in enumerate(lines):
        logged = _KLOG_ERROR.match(line)
        if not logged:
            continue
        value = logged.group(1)
        if value == "<":
            return " ".join(part.strip() for part in lines[index + 1 :] if part.strip() != ">")
        try:
            return str(json.loads(value))
        except ValueError:
            return value.strip('"')
    errors = [line for line in lines if line.startswith("Error: ")]  # the standalone kustomize binary
    return (errors[0] if errors else lines[-1] if lines else "").removeprefix("Error: ")


def batch_binary() -> Path | None:
    """The kustomize-batch that builds, or None (GITOPS_KUSTOMIZE_BATCH=off, or none installed)."""
    configured = os.environ.get(BATCH_VARIABLE, "").strip()
    if configured.lower() in _OFF and configured:
        return None
    candidate = Path(configured) if configured else HELPER
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return candidate
    if configured:
        raise InputError(f"{BATCH_VARIABLE}={configured}: no such executable; unset it, or set it to off")
    return None


class _Batch:
    """kustomize-batch processes, one per core, started as builds need them; each builds one at a time."""

    def __init__(self, binary: Path):
        self.binary = binary
        self.limit = os.cpu_count() or 1
        self.idle: queue.SimpleQueue = queue.SimpleQueue()
        self.started: list[subprocess.Popen] = []
        self.lock = threading.Lock()

    def build(self, root: Path, path: Path) -> tuple[str | None, str]:
        """(the YAML stream, or None; kustomize's error)."""
        process = self._take()
        while process.poll() is not None:  # ended while idle (killed, out of memory): another one
            self._drop(process)
            process = self._take()
        try:
            process.stdin.write(json.dumps({"root": str(root), "path": str(path)}) + "\n")
            process.stdin.flush()
            line = process.stdout.readline()
            reply = json.loads(line) if line else None
        except (OSError, ValueError):
            reply = None
        except BaseException:  # interrupted between a request and its answer: the process is out of step
            self._drop(process)
            raise
        if not isinstance(reply, dict):
            self._drop(process)
            raise InputError(
                f"{path}: {self.binary.name} stopped answering (exit status {process.poll()}); "
                f"set {BATCH_VARIABLE}=off to build with one kustomize process per folder"
            )
        self.idle.put(process)
        return (None, str(reply["error"])) if "error" in reply else (str(reply.get("yaml", "")), "")

    def _drop(self, process: subprocess.Popen) -> None:
        process.kill()
        process.wait()
        with self.lock:
            self.started.remove(process)

    def _take(self) -> subprocess.Popen:
        """An idle process, a new one while fewer than one per core run, else the next one freed (a process
        dropped meanwhile makes room for a new one)."""
        while True:
            with self.lock:
                try:
                    return self.idle.get_nowait()
                except queue.Empty:
                    if len(self.started) < self.limit:
                        return self._start()
            try:
                return self.idle.get(timeout=0.05)
            except queue.Empty:
                continue

    def _start(self) -> subprocess.Popen:
        try:
            process = subprocess.Popen(
                [str(self.binary)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                encoding="utf-8",
                errors="surrogateescape",
                bufsize=1,
            )
        except OSError as error:
            raise InputError(f"cannot run {self.binary}: {error.strerror}") from None
        self.started.append(process)
        return process

    def close(self) -> None:
        for process in self.started:
            try:
                process.stdin.close()
                process.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                process.kill()
        self.started.clear()


_BATCHES: dict[Path, _Batch] = {}
_BATCHES_LOCK = threading.Lock()


def _batch(binary: Path) -> _Batch:
    with _BATCHES_LOCK:
        if binary not in _BATCHES:
            _BATCHES[binary] = _Batch(binary)
        return _BATCHES[binary]


@atexit.register
def _close_batches() -> None:
    for batch in _BATCHES.values():
        batch.close()


def builder() -> str:
    """What builds, for the render cache's key: kustomize-batch, by the hash of its content (a fresh install
    writes the same binary with a new modification time, and must still find the renders of the last one), or
    the kustomize command with its flags, path, size and modification time (a new version changes them)."""
    binary = batch_binary()
    if binary is not None:
        try:
            stat = os.stat(binary)
            return f"{binary.name} (batch) sha256:{_content_hash(str(binary), stat.st_size, stat.st_mtime_ns)}"
        except OSError:
            return f"{binary} (batch)"
    called, path = " ".join([*command(), *FLAGS]), shutil.which(command()[0]) or command()[0]
    try:
        stat = os.stat(path)
        return f"{called} {path} {stat.st_size} {stat.st_mtime_ns}"
    except OSError:
        return called


@lru_cache(maxsize=4)
def _content_hash(path: str, size: int, mtime_ns: int) -> str:
    """sha256 of a file, once per process for each (path, size, modification time)."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def build(path: Path, root: Path | None = None) -> str:
    """The rendered YAML stream of the kustomization in `path`; with kustomize-batch, nothing outside
    `root` is read (Flux's builds pass the repository's copy)."""
    if not has_kustomization(path):
        raise InputError(f"{path}: no kustomization.yaml")
    binary = batch_binary()
    if binary is not None:
        target = path.resolve()
        text, error = _batch(binary).build(Path(root).resolve() if root else Path(target.anchor), target)
        if text is not None:
            return text
        _fail(path, mask_text(_without_echoes(error)) or f"{binary.name} failed")
    try:
        result = subprocess.run([*command(), *FLAGS, str(path)], capture_output=True, text=True)
    except OSError as error:
        raise InputError(f"{path}: cannot run {command()[0]}: {error.strerror}") from None
    if result.returncode != 0:
        _fail(path, error_cause(result.stderr) or f"{command()[0]} exited with status {result.returncode}")
    return result.stdout


def _fail(path: Path, cause: str) -> None:
    if _REPLACEMENT_SOURCE_MISSING.search(cause):
        cause += (
            " (the environment components, overlays/base/*/environment, copy overlays/<env>/settings.yaml "
            "into the bases by name and stop when the settings or a named item they fill in is gone)"
        )
    raise InputError(f"{path}: kustomize build failed: {cause}")
