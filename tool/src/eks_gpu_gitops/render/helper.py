"""The helper, eks-gpu-gitops-helper: what renders, with Flux's and Helm's own code.

The tool's helper/ (Go), built into every platform wheel as eks_gpu_gitops/_helper/, links kustomize and
fluxcd/pkg/kustomize at the versions kustomize-controller v1.9.5 links, and the Helm SDK with helm-controller
v1.6.4's post-renderers (the two controllers of Flux v2.9.5). It answers JSON requests on stdin, one per line
(helper/main.go lists them); this module keeps one process per core and sends them. GITOPS_HELPER names
another build of it.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import json
import os
import queue
import re
import subprocess
import threading
from functools import lru_cache
from pathlib import Path

from ..core import interrupts
from ..core.credentials import mask_text
from ..core.errors import InputError

HELPER_VARIABLE = "GITOPS_HELPER"
# The file names kustomize reads a folder's kustomization from.
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
# The helper a wheel carries (hatch_build.py), or that `make` in the template builds for an editable install.
HELPER = Path(__file__).resolve().parent.parent / "_helper" / "eks-gpu-gitops-helper"
# A replacement's source field is gone: a guard of an environment component tripped.
_REPLACEMENT_SOURCE_MISSING = re.compile(r"is missing for replacement source|nothing selected by")


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
# (kustomize/v5.5.0, the version in kubectl 1.32, and v5.8.1):
# - api/internal/target/kusttarget.go's `trouble configuring builtin <plugin> with config: `<yaml>`: <cause>`, whose
#   cause may repeat the configuration again (PatchTransformer's "patch and path can't be set at the same
#   time\n<yaml>", "unable to parse SM or JSON patch from [patch: ...]"): cut from `with config` to the end, one of
#   the builtins' fixed causes (_CONFIG_CAUSES) named when it is there, never any text of the echo itself (a
#   secret may hold "`: " or a cause's words, so no position inside the echo is trusted);
# - kyaml/yaml/fns.go's `: node contents:\n<yaml>`: cut to the end;
# - api/kv/kv.go's literal sources (`literal sources [<every literal>]: invalid literal source <literal>, expected
#   key=value`, the literals with newlines or brackets in them as well): cut to the end, and env-file lines
#   (`line %d has invalid utf8 bytes : %v`).
_WITH_CONFIG = re.compile(r"[ \t]*\bwith config\b.*", re.DOTALL)
_CONFIG_CAUSES = (
    "must specify one of patch and path",
    "patch and path can't be set at the same time",
    "failed to get the patch file from path",
    "illegally qualifies as both an SM and JSON patch",
    "unable to parse SM or JSON patch",
    "empty file path and empty patch content",
    "patch appears to be empty",
    "must specify the target name",
    "empty file path and empty jsonOp",
    "must specify a file path or jsonOp, not both",
    "cannot specify both path and inline replacement",
    "unsupported replacement type encountered within replacement path",
    "must specify at least one target",
    "fieldSpecs is not expected to be nil",
    "must specify --enable-helm",
    "must specify --helm-command",
)
_ECHOES = (
    (re.compile(r":? *node contents:.*", re.DOTALL), ""),
    (re.compile(r"literal sources \[.*", re.DOTALL), "invalid literal source (value not shown), expected key=value"),
    (re.compile(r"(has invalid utf8 bytes) : .*", re.DOTALL), r"\1"),
)


def masked_error(message: str) -> str:
    """A build's error without the configuration kustomize echoes (it may hold secrets), credential
    shapes masked."""
    return mask_text(_without_echoes(message))


def _without_echoes(message: str) -> str:
    echo = _WITH_CONFIG.search(message)
    if echo:
        found = [(echo.group().find(cause), cause) for cause in _CONFIG_CAUSES if cause in echo.group()]
        cause = f": {min(found)[1]}" if found else ""
        message = f"{message[: echo.start()]} (its configuration not shown){cause}"
    for pattern, replacement in _ECHOES:
        message = pattern.sub(replacement, message)
    return message.strip()


def binary() -> Path:
    """The helper that renders: GITOPS_HELPER's, else the one this install carries; a one-line error when
    there is none."""
    configured = os.environ.get(HELPER_VARIABLE, "").strip()
    candidate = Path(configured) if configured else HELPER
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return candidate
    if configured:
        raise InputError(f"{HELPER_VARIABLE}={configured}: no such executable; unset it to use the tool's own")
    raise InputError(
        "this install of eks-gpu-gitops has no helper (a source install built without Go): install a platform "
        "wheel from PyPI, or install Go and reinstall"
    )


class _Pool:
    """Helper processes, one per core, started as requests need them; each answers one request at a time."""

    def __init__(self, path: Path):
        self.binary = path
        self.limit = os.cpu_count() or 1
        self.idle: queue.SimpleQueue = queue.SimpleQueue()
        self.started: list[subprocess.Popen] = []
        self.lock = threading.Lock()

    def ask(self, request: dict, about: str) -> dict:
        """The helper's answer to one request; `about` names what it is for, in an error."""
        process = self._take()
        while process.poll() is not None:  # ended while idle (killed, out of memory): another one
            self._drop(process)
            process = self._take()
        try:
            process.stdin.write(json.dumps(request) + "\n")
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
            raise InputError(f"{about}: {self.binary.name} stopped answering (exit status {process.poll()})")
        self.idle.put(process)
        return reply

    def _drop(self, process: subprocess.Popen) -> None:
        """Stop a process that is out of step or gone, and make room for another (counted out first, so an
        interrupt in the middle never leaves a place taken by nothing)."""
        with interrupts.shielded():
            with self.lock:
                if process in self.started:
                    self.started.remove(process)
            process.kill()
            process.wait()
            interrupts.discard_process(process)

    def _take(self) -> subprocess.Popen:
        """An idle process, a new one while fewer than one per core run, else the next one freed (a process
        dropped meanwhile makes room for a new one). After an interrupt, none: KeyboardInterrupt (the run is
        ending; its helpers are being killed, core/interrupts.py)."""
        while True:
            interrupts.check()
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
        """A new helper process, counted and registered to be killed when a signal comes (core/interrupts.py)
        before an interrupt can come between."""
        with interrupts.shielded():
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
            interrupts.add_process(process)
        return process

    def close(self) -> None:
        """End every process: each finishes when its input closes; one still busy after 5 s (or at once after an
        interrupt) is killed. Each is waited for: none is left running."""
        with self.lock:
            processes, self.started[:] = list(self.started), []
        interrupted = interrupts.signalled() is not None
        for process in processes:
            try:
                if interrupted:
                    process.kill()
                process.stdin.close()
                process.wait(timeout=5)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                process.kill()
                with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                    process.wait(timeout=5)
            interrupts.discard_process(process)


_POOLS: dict[Path, _Pool] = {}
_POOLS_LOCK = threading.Lock()


def ask(request: dict, about: str) -> dict:
    """Send one request to a helper process; its answer (which may be {"error": ...})."""
    path = binary()
    with _POOLS_LOCK:
        if path not in _POOLS:
            _POOLS[path] = _Pool(path)
        pool = _POOLS[path]
    return pool.ask(request, about)


@atexit.register
def _close_pools() -> None:
    for pool in _POOLS.values():
        pool.close()


def builder() -> str:
    """What renders, for the caches' keys: the helper by the hash of its content (a fresh install writes the
    same binary with a new modification time, and must still find the renders of the last one)."""
    path = binary()
    try:
        stat = os.stat(path)
        return f"{path.name} sha256:{_content_hash(str(path), stat.st_size, stat.st_mtime_ns)}"
    except OSError:
        return str(path)


@lru_cache(maxsize=4)
def _content_hash(path: str, size: int, mtime_ns: int) -> str:
    """sha256 of a file, once per process for each (path, size, modification time)."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def build(path: Path, root: Path | None = None) -> str:
    """`kustomize build` of the kustomization in `path` (the eksctl overlays, a folder given to validate);
    nothing outside `root` is read."""
    if not has_kustomization(path):
        raise InputError(f"{path}: no kustomization.yaml")
    target = path.resolve()
    request = {"op": "build", "root": str(Path(root).resolve() if root else Path(target.anchor)), "path": str(target)}
    reply = ask(request, str(path))
    if "error" in reply:
        fail(path, masked_error(str(reply["error"])) or "the build failed")
    return str(reply.get("yaml", ""))


def fail(path, cause: str) -> None:
    if _REPLACEMENT_SOURCE_MISSING.search(cause):
        cause += (
            " (the environment components, overlays/base/*/environment, copy overlays/<env>/settings.yaml "
            "into the bases by name and stop when the settings or a named item they fill in is gone)"
        )
    raise InputError(f"{path}: kustomize build failed: {cause}")


def check_cel(crds: list[dict], checks: list[dict]) -> list[dict]:
    """Each check ({"crd": index into crds, "object": ...}) against its CRD's x-kubernetes-validations rules
    as the API server evaluates them (helper/cel.go): per check, {"violations": [...]} or {"skipped": why}.
    One request for all of them: the CRDs' rules compile once."""
    reply = ask({"op": "cel", "crds": crds, "checks": checks}, "the CEL rules of the CRDs")
    if "error" in reply:
        raise InputError(f"the CEL rules of the CRDs: {mask_text(str(reply['error']))}")
    results = reply.get("cel") or []
    if len(results) != len(checks):
        raise InputError("the CEL rules of the CRDs: the helper answered for a different number of objects")
    return results
