"""The binaries of the local control plane and of the GitOps loop it runs: where each is found, and their build
from the Go module proxy into the tool's cache (`eks-gpu-gitops toolchain build`, `scripts/toolchain build`).

A binary is found in $GITOPS_CONTROL_PLANE_BIN, then in the toolchain cache ($GITOPS_TOOLCHAIN_DIR, by default
~/.cache/gitops-tools/toolchain/<os>-<arch>), then on PATH. Kubernetes (kube-apiserver, kube-scheduler,
kube-controller-manager), etcd and kwok publish official release binaries, which work as well: put them in a
folder and point $GITOPS_CONTROL_PLANE_BIN at it. Flux's controllers, Kueue and the MPI operator publish only
container images, so the build makes them.

How each is built, from the pinned version:
- LOCAL: a small Go module shipped in this package (toolchain_modules/): k8s.io/kubernetes and etcd's root
  module replace their own staging or sibling modules with local folders, so `go install` refuses them; these
  modules carry the replace lines and a main package each, and pin the version in their go.mod. etcd is the
  version kubeadm pins for that Kubernetes (k8s.io/kubernetes v1.34.4 cmd/kubeadm/app/constants/constants.go,
  DefaultEtcdVersion 3.6.5).
- SOURCE: a copy of the module's zip, built inside it with -mod=mod: its go.mod has replace directives (Flux's
  controllers: a replace that points at a nested module, `./api`, which the zip leaves out, is dropped for the
  version required, the same tag), or the proxy here refuses the version list `go install` asks for (the MPI
  operator; Kueue's list here stops at v0.17.0). A dependency the proxy does not serve at the version required is
  replaced by the nearest one it serves (Binary.substitutes), which `toolchain list` and the build say.
- INSTALL: `go install module/package@version` (kwok).

A build writes each binary into a folder of its own inside the destination, then moves it into place and records
its version in the destination's .toolchain.json: a binary is there whole or not at all, and one whose recorded
version is the pin is not built again (a run with everything present is instant). One `go build` at a time (it
uses every core); the next SOURCE module is downloaded and its dependencies fetched meanwhile.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ..core import interrupts
from ..core.errors import InputError
from ..core.files import Unreadable, read_bounded, write_atomically
from ..facts.flux import CONTROLLERS, FLUX_VERSION
from ..facts.schemas import KUEUE, MPI_OPERATOR

BIN_VARIABLE = "GITOPS_CONTROL_PLANE_BIN"
DIR_VARIABLE = "GITOPS_TOOLCHAIN_DIR"
RECORD = ".toolchain.json"
MODULES = Path(__file__).resolve().parent / "toolchain_modules"
KWOK_VERSION = "v0.7.0"
BUILD_COMMAND = "`scripts/toolchain build` (`eks-gpu-gitops toolchain build` outside a generated repository)"

LOCAL, SOURCE, INSTALL = "local", "source", "install"


def _required(folder: str, module: str) -> str:
    """The version the shipped module `folder` requires of `module` (its go.mod is the one place it is pinned)."""
    text = (MODULES / folder / "go.mod").read_text()
    found = re.search(rf"^\s*(?:require\s+)?{re.escape(module)} (v\S+)", text, re.MULTILINE)
    if found is None:
        raise RuntimeError(f"toolchain_modules/{folder}/go.mod requires no {module}")
    return found.group(1)


KUBERNETES = _required("kubernetes", "k8s.io/kubernetes")
ETCD = _required("etcd", "go.etcd.io/etcd/server/v3")


def _kubernetes_stamp(version: str) -> str:
    """The version the servers report (/version, --version), as the release build stamps it."""
    major, minor = version.lstrip("v").split(".")[:2]
    package = "k8s.io/component-base/version"
    return f"-X {package}.gitVersion={version} -X {package}.gitMajor={major} -X {package}.gitMinor={minor}"


class BuildFailed(InputError):
    """A go build or download that failed (the others were built)."""


@dataclass(frozen=True)
class Binary:
    name: str
    what: str
    module: str  # the Go module it is built from
    version: str
    package: str  # its main package, in the module (LOCAL: in the shipped module)
    method: str  # LOCAL, SOURCE or INSTALL
    group: str
    folder: str = ""  # LOCAL: the shipped module's folder in toolchain_modules/
    ldflags: str = ""
    official: bool = False  # upstream publishes release binaries of it
    # (module, version): a dependency built at another version, because the Go module proxy here refuses the one
    # the pinned release requires (said by `toolchain list` and the build).
    substitutes: tuple[tuple[str, str], ...] = ()


def _kubernetes(name: str, what: str) -> Binary:
    return Binary(
        name,
        what,
        "k8s.io/kubernetes",
        KUBERNETES,
        f"./cmd/{name}",
        LOCAL,
        "control-plane",
        folder="kubernetes",
        ldflags=_kubernetes_stamp(KUBERNETES),
        official=True,
    )


def _flux(name: str, substitutes: tuple[tuple[str, str], ...] = ()) -> Binary:
    return Binary(
        name,
        f"Flux {FLUX_VERSION}'s {name}",
        f"github.com/fluxcd/{name}",
        CONTROLLERS[name],
        ".",
        SOURCE,
        "controllers",
        substitutes=substitutes,
    )


BINARIES = (
    Binary(
        "etcd",
        "the API server's store",
        "go.etcd.io/etcd/server/v3",
        ETCD,
        ".",
        LOCAL,
        "control-plane",
        "etcd",
        official=True,
    ),
    _kubernetes("kube-apiserver", "the Kubernetes API server"),
    _kubernetes("kube-scheduler", "places pods on nodes"),
    _kubernetes("kube-controller-manager", "Deployments, Jobs, namespaces, garbage collection"),
    Binary(
        "kwok",
        "fake nodes that run no container",
        "sigs.k8s.io/kwok",
        KWOK_VERSION,
        "./cmd/kwok",
        INSTALL,
        "control-plane",
        official=True,
    ),
    Binary(
        "mpi-operator",
        "the MPI operator (MPIJobs)",
        "github.com/kubeflow/mpi-operator",
        MPI_OPERATOR,
        "./cmd/mpi-operator",
        SOURCE,
        "control-plane",
    ),
    # source-controller v1.9.5's go.mod requires github.com/fluxcd/pkg/artifact v0.18.3, whose zip the proxy here
    # refuses (403, as v0.18.2's); v0.18.1 is the nearest it serves.
    _flux("source-controller", substitutes=(("github.com/fluxcd/pkg/artifact", "v0.18.1"),)),
    _flux("kustomize-controller"),
    _flux("helm-controller"),
    Binary(
        "kueue",
        "Kueue's manager (queues, admission)",
        "sigs.k8s.io/kueue",
        f"v{KUEUE}",
        "./cmd/kueue",
        SOURCE,
        "controllers",
    ),
)
BY_NAME = {binary.name: binary for binary in BINARIES}
GROUPS = {group: tuple(b.name for b in BINARIES if b.group == group) for group in ("control-plane", "controllers")}


def select(names: Iterable[str]) -> list[Binary]:
    """The binaries `names` (binary or group names) stand for, in build order; all of them for none."""
    chosen: set[str] = set()
    for name in names:
        if name in GROUPS:
            chosen.update(GROUPS[name])
        elif name in BY_NAME:
            chosen.add(name)
        else:
            raise InputError(f"unknown binary {name!r}; one of {', '.join([*GROUPS, *BY_NAME])}")
    return [binary for binary in BINARIES if binary.name in chosen or not chosen]


# --- where the binaries are ------------------------------------------------------------------------------------


_MACHINES = {"x86_64": "amd64", "aarch64": "arm64"}  # as Go names them


def _platform() -> str:
    machine = platform.machine().lower()
    return f"{sys.platform}-{_MACHINES.get(machine, machine)}"


def cache_dir() -> Path:
    """The toolchain cache: $GITOPS_TOOLCHAIN_DIR, else one folder per platform in the user's cache."""
    configured = os.environ.get(DIR_VARIABLE, "").strip()
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "gitops-tools" / "toolchain" / _platform()


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


@dataclass(frozen=True)
class Located:
    path: str
    where: str  # $GITOPS_CONTROL_PLANE_BIN, the toolchain cache, or PATH


def locate(name: str) -> Located | None:
    """Where `name` is found: $GITOPS_CONTROL_PLANE_BIN, then the toolchain cache, then PATH."""
    folder = os.environ.get(BIN_VARIABLE)
    if folder and _executable(Path(folder) / name):
        return Located(str(Path(folder) / name), f"${BIN_VARIABLE}")
    if _executable(cache_dir() / name):
        return Located(str(cache_dir() / name), "the toolchain cache")
    found = shutil.which(name)
    return Located(found, "PATH") if found else None


def _official(names: list[str]) -> str:
    """Where the release binaries upstream publishes do instead of a build, or ""."""
    official = [name for name in names if name in BY_NAME and BY_NAME[name].official]
    if not official:
        return ""
    come = "comes" if len(official) == 1 else "come"
    return (
        f"{', '.join(official)} also {come} as official release binaries: put them in a folder and set "
        f"${BIN_VARIABLE} to it"
    )


def how_to_get(names: Iterable[str]) -> str:
    """What to run (or download) for binaries that are missing."""
    names = list(names)
    text = f"{BUILD_COMMAND} builds {'it' if len(names) == 1 else 'them'} with Go into {cache_dir()}"
    official = _official(names)
    return f"{text}; {official}" if official else text


def missing_text(name: str) -> str:
    """One line for a binary that is nowhere (control_plane.find_binary's error)."""
    folder = os.environ.get(BIN_VARIABLE)
    places = [f"${BIN_VARIABLE} ({folder})"] if folder else []
    places += [f"the toolchain cache ({cache_dir()})", "PATH"]
    return f"{name} not found in {', '.join(places[:-1])} or {places[-1]}; {how_to_get([name])}"


def recorded(folder: Path) -> dict[str, str]:
    """The versions a build recorded in `folder` (binary -> version); {} when it has no readable record."""
    try:
        record = json.loads(read_bounded(folder / RECORD, limit=1 << 16))
    except (Unreadable, ValueError):
        return {}
    if not isinstance(record, dict):
        return {}
    return {name: version for name, version in record.items() if isinstance(version, str)}


@dataclass(frozen=True)
class Status:
    binary: Binary
    located: Located | None
    built: str  # the version the folder's record gives, "" when none does

    @property
    def outdated(self) -> bool:
        return bool(self.located and self.built and self.built != self.binary.version)


def statuses(binaries: Iterable[Binary]) -> list[Status]:
    found = []
    for binary in binaries:
        located = locate(binary.name)
        built = recorded(Path(located.path).parent).get(binary.name, "") if located else ""
        found.append(Status(binary, located, built))
    return found


def list_report(found: list[Status]) -> str:
    """One line a binary (name, pinned version, what it is, where it is), then what to do about missing ones."""
    rows = []
    for status in found:
        binary, located = status.binary, status.located
        if located is None:
            where = "missing"
        else:
            where = f"{located.path} ({located.where}"
            if status.outdated:
                where += f"; built {status.built}, `toolchain build` builds the pinned {binary.version}"
            elif not status.built:
                where += "; version not recorded"
            where += ")"
        what = binary.what + "".join(f" (with {module} {version})" for module, version in binary.substitutes)
        rows.append((binary.name, binary.version, what, where))
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    lines = [
        "  ".join(cell.ljust(width) for cell, width in zip(row[:3], widths, strict=True)) + "  " + row[3]
        for row in rows
    ]
    absent = [status.binary.name for status in found if status.located is None]
    if absent:
        lines.append(f"{len(absent)} of {len(found)} missing: {', '.join(absent)}")
        lines.append(how_to_get(absent))
    else:
        lines.append(f"all {len(found)} found")
    return "\n".join(lines)


# --- the build ------------------------------------------------------------------------------------------------


def _missing(binaries: list[Binary], folder: Path) -> list[Binary]:
    """The binaries `folder` lacks at their pinned version (by its record)."""
    record = recorded(folder)
    return [b for b in binaries if not (_executable(folder / b.name) and record.get(b.name) == b.version)]


@contextlib.contextmanager
def _locked(folder: Path, progress: Callable[[str], None]):
    """One build into a folder at a time (a second waits, then finds the binaries built)."""
    with open(folder / ".lock", "a") as lock:  # noqa: SIM117 - the lock lives as long as the file is open
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"waiting for another build into {folder}")
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _run(argv: list[str], cwd: Path, log: Path, env: dict[str, str] | None = None, stdout: Path | None = None) -> bool:
    """Run a Go command, its output into `log` (its stdout into `stdout` when given); whether it succeeded. Killed
    when the run is interrupted."""
    with open(log, "ab") as output, open(stdout or os.devnull, "wb") as printed:
        process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=printed if stdout else output, stderr=output)
    interrupts.add_process(process)
    try:
        return process.wait() == 0
    except BaseException:
        process.kill()
        process.wait()
        raise
    finally:
        interrupts.discard_process(process)


def _log_tail(log: Path, lines: int = 4) -> str:
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return "(no output)"
    return " | ".join(text.strip().splitlines()[-lines:]) or "(no output)"


def _writable_copy(source: Path, target: Path) -> None:
    """A copy of a module from Go's read-only module cache that go build (and the clean-up) may write to."""
    shutil.copytree(source, target, symlinks=True)
    for folder, _, files in os.walk(target):
        os.chmod(folder, 0o755)
        for file in files:
            path = os.path.join(folder, file)
            if not os.path.islink(path):
                os.chmod(path, 0o644)


def _edit_go_mod(go: str, copy: Path, binary: Binary, log: Path) -> bool:
    """Make a module copy buildable: a replace line that points at a folder of the repository (Flux's controllers:
    `github.com/fluxcd/<controller>/api => ./api`) names a nested module, which the module zip leaves out, so the
    copy uses the version it requires from the proxy instead (the same tag); and each substitute of a dependency
    the proxy here does not serve."""
    described = subprocess.run([go, "mod", "edit", "-json"], cwd=copy, capture_output=True, text=True)
    if described.returncode != 0:
        log.write_text(described.stderr)
        return False
    edits = [
        f"-dropreplace={entry['Old']['Path']}"
        for entry in json.loads(described.stdout).get("Replace") or []
        if not entry["New"].get("Version") and not (copy / entry["New"]["Path"]).exists()
    ]
    edits += [f"-replace={module}={module}@{version}" for module, version in binary.substitutes]
    return not edits or _run([go, "mod", "edit", *edits], copy, log)


class _Builder:
    def __init__(self, go: str, work: Path, out: Path, progress: Callable[[str], None]):
        self.go, self.work, self.out, self.progress = go, work, out, progress

    def prepare(self, binary: Binary) -> Path | None:
        """A SOURCE module's writable copy with its dependencies downloaded (None when the download failed: the
        build then says why). Runs in a thread while another build compiles."""
        interrupts.check()
        log = self.work / f"{binary.name}.log"
        described = self.work / f"{binary.name}.json"
        env = {**os.environ, "GOFLAGS": "-mod=mod"}
        spec = f"{binary.module}@{binary.version}"
        downloaded = _run([self.go, "mod", "download", "-json", spec], self.work, log, env, stdout=described)
        try:
            answer = json.loads(described.read_text())
        except ValueError:
            answer = {}
        folder = answer.get("Dir", "") if downloaded else ""
        if not folder:
            with open(log, "a") as output:
                output.write(answer.get("Error") or f"go mod download {spec} gave no folder")
            return None
        copy = self.work / f"{binary.name}-source"
        _writable_copy(Path(folder), copy)
        if not _edit_go_mod(self.go, copy, binary, log):
            return None
        interrupts.check()
        _run([self.go, "mod", "download"], copy, log, env)  # its dependencies
        return copy

    def build(self, binaries: list[Binary], source: Path | None) -> bool:
        """One go build (or go install) of `binaries`, all from one module, into the output folder."""
        first = binaries[0]
        log = self.work / f"{first.name}.log"
        flags = ["-trimpath", "-buildvcs=false", *([f"-ldflags={first.ldflags}"] if first.ldflags else [])]
        if first.method == INSTALL:
            env = {**os.environ, "GOBIN": str(self.out)}
            spec = f"{first.module}/{first.package.removeprefix('./')}@{first.version}"
            return _run([self.go, "install", *flags, spec], self.work, log, env)
        if first.method == LOCAL:
            packages = [binary.package for binary in binaries]
            output = f"{self.out}/" if len(binaries) > 1 else str(self.out / first.name)
            return _run([self.go, "build", *flags, "-o", output, *packages], MODULES / first.folder, log)
        if source is None:
            return False
        argv = [self.go, "build", *flags, "-mod=mod", "-o", str(self.out / first.name), first.package]
        return _run(argv, source, log)


def _jobs(binaries: list[Binary]) -> list[list[Binary]]:
    """One build per module: the LOCAL binaries of one shipped module share a go build (and its compiles)."""
    jobs: dict[tuple[str, str], list[Binary]] = {}
    for binary in binaries:
        key = (binary.module, binary.folder) if binary.method == LOCAL else (binary.name, "")
        jobs.setdefault(key, []).append(binary)
    # SOURCE builds last: their modules download while the others compile.
    return sorted(jobs.values(), key=lambda job: job[0].method == SOURCE)


def _need_go(binaries: list[Binary]) -> str:
    go = shutil.which("go")
    if go is None:
        names = [binary.name for binary in binaries]
        official = _official(names)
        raise InputError(
            f"Go is needed to build {', '.join(names)} and is not on PATH (https://go.dev/dl/)"
            + (f"; {official}" if official else "")
        )
    return go


def build(names: Iterable[str], into: Path | None = None, progress: Callable[[str], None] = print) -> list[str]:
    """Build the binaries `names` stand for (all for none) that `into` (the toolchain cache by default) lacks at
    their pinned version. Returns the names built; raises InputError naming the ones that failed, after building
    the others."""
    into = Path(into) if into is not None else cache_dir()
    wanted = select(names)
    started = time.monotonic()
    if not _missing(wanted, into):
        progress(f"all {len(wanted)} present in {into} at their pinned versions")
        return []
    go = _need_go(_missing(wanted, into))  # before anything is written
    try:
        into.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(f"cannot build into {into}: {error.strerror or error}") from None
    with _locked(into, progress):
        todo = _missing(wanted, into)  # again: another build may have made them meanwhile
        if not todo:
            progress(f"all {len(wanted)} present in {into} at their pinned versions (built by another run)")
            return []
        work = interrupts.temporary_folder("gitops-toolchain-")
        out = interrupts.temporary_folder(".building-", dir=into)  # the same file system: the move is a rename
        try:
            built, failed = _build_all(_Builder(go, work, out, progress), todo, into, started)
        finally:
            interrupts.remove(out)
            interrupts.remove(work)
    if failed:
        raise BuildFailed(f"{len(failed)} of {len(todo)} failed: " + "; ".join(failed))
    progress(f"built {len(built)} into {into} ({time.monotonic() - started:.0f} s)")
    return built


def _build_all(builder: _Builder, todo: list[Binary], into: Path, started: float) -> tuple[list[str], list[str]]:
    built, failed = [], []
    downloads = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolchain-download")
    try:
        sources: dict[str, Future] = {
            binary.name: downloads.submit(builder.prepare, binary) for binary in todo if binary.method == SOURCE
        }
        for job in _jobs(todo):
            interrupts.check()
            substitutes = "".join(f", with {m} {v}" for m, v in job[0].substitutes)
            builder.progress(
                f"{', '.join(b.name for b in job)} {job[0].version}: building from {job[0].module}{substitutes}"
            )
            began = time.monotonic()
            source = sources[job[0].name].result() if job[0].name in sources else None
            ok = builder.build(job, source)
            seconds = time.monotonic() - began
            for binary in job:
                if ok and _executable(builder.out / binary.name):
                    _place(builder.out / binary.name, into, binary)
                    built.append(binary.name)
                    builder.progress(
                        f"{binary.name} {binary.version}: built in {seconds:.0f} s "
                        f"({time.monotonic() - started:.0f} s in all)"
                    )
                else:
                    reason = _log_tail(builder.work / f"{job[0].name}.log")
                    failed.append(f"{binary.name} {binary.version}: {reason}")
                    builder.progress(f"{binary.name} {binary.version}: FAILED after {seconds:.0f} s: {reason}")
    finally:
        downloads.shutdown(wait=True, cancel_futures=True)
    return built, failed


def _place(binary_file: Path, into: Path, binary: Binary) -> None:
    """Move a whole binary into place, then record its version (a reader sees the old binary or the new one)."""
    with interrupts.shielded():
        os.replace(binary_file, into / binary.name)
        record = {**recorded(into), binary.name: binary.version}
        write_atomically(into / RECORD, (json.dumps(record, indent=1, sort_keys=True) + "\n").encode(), mode=0o644)
