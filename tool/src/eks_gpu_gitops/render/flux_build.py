"""Build a Flux Kustomization's path the way kustomize-controller does, confined to the repository.

kustomize-controller v1.9.5 (the one Flux v2.9.5 installs; internal/controller/kustomization_controller.go,
generate and build) writes the path's kustomization file with fluxcd/pkg/kustomize's Generator (a path
without one gets one listing its manifests; spec.targetNamespace, namePrefix/nameSuffix, patches, components
and images go in), builds it on a file system rooted at the source (SecureBuild), and sets
spec.commonMetadata when it applies. The helper does all of that with the same library (helper/flux.go); this
module gives it the checkout Flux builds from and keeps what it builds:

- `Workspace`: source-controller's artifact (flux_source.ArtifactFilter): a copy holding only the regular files
  Flux's artifact holds, so a build can read nothing else;
- `check_paths`: a one-line refusal of a kustomization file that names a remote base, a path outside the
  repository, or a file the artifact leaves out (the build would fail on the cluster);
- `build`: one Flux Kustomization's objects, kept in the render cache by a hash of what the build reads.

spec.postBuild variable substitution runs after this, once every Kustomization of an environment is
built (post_build.py: a substituteFrom source may be an object another Kustomization applies).
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import yaml

from ..core import interrupts, yaml_limits
from ..core.errors import InputError
from ..core.yaml_file import read_ahead
from ..model import Manifest
from ..model.manifest import from_documents, load_documents
from . import helper, render_cache
from .flux_source import ArtifactFilter
from .kustomization import named_paths

# The repository's own GitRepository, as `flux bootstrap` names it (namespace flux-system).
BOOTSTRAP_SOURCE = ("GitRepository", "flux-system", "flux-system")
_SKIPPED = (".git",)
# How long git may take to list a repository's files: seconds for the largest monorepos; what takes longer is a
# .gitignore made to make git's matcher backtrack.
GIT_SECONDS = 60
_ORIGIN = "config.kubernetes.io/origin"
_REMOTE = re.compile(r"^([a-z][a-z0-9+.-]*://|git@|github\.com/|gitlab\.com/|bitbucket\.org/)", re.IGNORECASE)


class Workspace:
    """A copy of the repository with only what resolves inside it: regular files, folders, and symlinks
    whose target is inside the repository (rewritten as relative links inside the copy). In a git work
    tree only what git tracks or would track is copied (Flux's source is a commit: no ignored .venv).

    With `artifact` (flux_source.ArtifactFilter) it is what Flux builds from: no symbolic link at all and
    nothing the artifact's rules leave out; without, it is the checkout eksctl reads."""

    def __init__(self, root: Path, artifact: ArtifactFilter | None = None):
        self.root = root.resolve()
        self.artifact = artifact
        self.path = Path()
        places = list(dict.fromkeys([_memory_folder(), None]))
        for place in places:
            try:
                # Registered as it is made: removed on any way out, an interrupt or a crash too (core/interrupts.py).
                self.path = interrupts.temporary_folder("gitops-flux-", place)
                _copy_confined(self.root, self.path, artifact)
                return
            except (OSError, shutil.Error) as error:
                self.close()
                # A memory folder that is full (a container's /dev/shm is 64 MiB): the default place.
                full = isinstance(error, shutil.Error) or error.errno == errno.ENOSPC
                if place is None or not full:
                    raise
            except BaseException:
                self.close()
                raise

    def left_out(self, relative: str) -> str:
        """Why a path of the repository is not in this workspace though it exists there ("" when it is in,
        or does not exist): a symbolic link, or a rule of the artifact."""
        if self.artifact is None or not os.path.lexists(self.root / relative):
            return ""
        parts = Path(relative).parts
        for index in range(1, len(parts) + 1):
            if (self.root.joinpath(*parts[:index])).is_symlink():
                return f"{'/'.join(parts[:index])} is a symbolic link, and source-controller leaves links out"
        return self.artifact.why(Path(relative).as_posix(), folder=(self.root / relative).is_dir())

    def close(self) -> None:
        """Remove the copy, whole: a second Ctrl-C waits until it is gone (core/interrupts.remove)."""
        if self.path.name.startswith("gitops-flux-"):
            interrupts.remove(self.path)


def _memory_folder() -> str | None:
    """Where a workspace goes first: /dev/shm, a file system in memory on Linux, where making a file costs a
    small part of what it costs on a disk (a workspace is hundreds of small files: on an ext4 disk mounted
    with `discard`, 0.27 ms each against 0.016 ms). None (the system's temporary folder) when TMPDIR is set,
    or there is no such folder; a workspace that does not fit there is made again in the default place."""
    if os.environ.get("TMPDIR") or not os.access("/dev/shm", os.W_OK | os.X_OK):
        return None
    return "/dev/shm"


def listed_files(root: Path) -> list[str]:
    """The files a workspace is copied from: what git tracks or would track in a work tree, else every file
    below `root` (a symlinked folder as one entry)."""
    listed = _git_files(root)
    return _walked_files(root) if listed is None else listed


def _copy_confined(root: Path, dest: Path, artifact: ArtifactFilter | None) -> None:
    for relative in listed_files(root):
        source, copy = root / relative, dest / relative
        if any(part in _SKIPPED for part in Path(relative).parts) or not os.path.lexists(source):
            continue
        if artifact is not None and (source.is_symlink() or artifact.why(Path(relative).as_posix())):
            continue  # not in Flux's artifact
        copy.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            _link_inside(root, source, copy)
        elif source.is_file():
            shutil.copyfile(source, copy)


def _git_files(root: Path) -> list[str] | None:
    """Files git tracks or would track (not ignored) below `root`, or None outside a git work tree, and when
    the work tree around `root` ignores it: a repository baked into an ignored folder of another one (the
    template's demo/) is not part of that one, and is read as a folder outside git."""

    def git(*args: str) -> subprocess.CompletedProcess | None:
        try:
            return subprocess.run(["git", *args], cwd=root, capture_output=True, timeout=GIT_SECONDS)
        except subprocess.TimeoutExpired:
            # Not a silent walk of every file instead: that would copy what git ignores.
            raise InputError(
                f"git {args[0]} did not finish in {GIT_SECONDS} s in {root} (a .gitignore pattern that backtracks?); "
                "refused"
            ) from None
        except (OSError, subprocess.SubprocessError):
            return None

    listed = git("ls-files", "-z", "--cached", "--others", "--exclude-standard")
    if listed is None or listed.returncode != 0:
        return None
    names = sorted({os.fsdecode(name) for name in listed.stdout.split(b"\0") if name})
    if not names:
        ignored = git("check-ignore", "--quiet", ".")
        if ignored is not None and ignored.returncode == 0:
            return None
    return names


def _walked_files(root: Path) -> list[str]:
    """Every file below `root` outside a git work tree, a symlinked folder as one entry (not followed)."""
    found = []
    for current, folders, files in os.walk(root):
        here = Path(current)
        links = [name for name in folders if (here / name).is_symlink()]
        folders[:] = sorted(name for name in folders if name not in _SKIPPED and name not in links)
        found += [str((here / name).relative_to(root)) for name in sorted([*files, *links])]
    return found


def _link_inside(root: Path, link: Path, copy: Path) -> None:
    """Recreate a symlink whose target is inside the repository; leave one leading out (or broken) out."""
    try:
        target = link.resolve(strict=True)
    except (OSError, RuntimeError):
        return
    if target.is_relative_to(root) and target != root:
        os.symlink(os.path.relpath(target, link.parent.resolve()), copy)


def repository_path(value: str, where: str) -> str:
    """A Flux spec.path as a folder relative to the repository root, or a one-line refusal."""
    text = str(value or "").strip()
    normal = os.path.normpath(text or ".")
    if os.path.isabs(text) or normal == ".." or normal.startswith("../"):
        raise InputError(f"{where}: spec.path {text!r} is outside the repository; Flux builds only inside its source")
    return "" if normal == "." else normal


def check_paths(workspace: Workspace, folders: list[str] | None = None) -> None:
    """Refuse (one line) any kustomization file in the workspace that names a path outside it, a remote base,
    or a file of the repository that Flux's artifact leaves out (the build fails on the cluster). With
    `folders`, only the kustomizations their builds reach (the eksctl overlays of the checkout: the rest of
    it is not built)."""
    if folders is not None:
        seen: set[Path] = set()
        for folder in folders:
            _check_tree(workspace, Path(os.path.normpath(workspace.path / folder)), seen)
        return
    for current, folders_here, files in os.walk(workspace.path):
        folders_here[:] = sorted(folders_here)
        for name in files:
            if name in helper.KUSTOMIZATION_FILES:
                _check_file(workspace, Path(current) / name)


def _check_tree(workspace: Workspace, folder: Path, seen: set[Path]) -> None:
    """Check the kustomization in `folder` and, through the folders it names, every one its build reaches."""
    if folder in seen:
        return
    seen.add(folder)
    file = next((folder / n for n in helper.KUSTOMIZATION_FILES if (folder / n).is_file()), None)
    if file is None:
        return
    doc = _check_file(workspace, file)  # refuses a path out of the workspace before it is followed
    for _, value in named_paths(doc) if isinstance(doc, dict) else ():
        target = Path(os.path.normpath(folder / value))
        if target.is_dir():
            _check_tree(workspace, target, seen)


def _check_file(workspace: Workspace, file: Path) -> dict | None:
    """The kustomization file's content, once every path it names is checked; None when it is no YAML mapping
    (kustomize reports it)."""
    where = file.relative_to(workspace.path)
    docs = read_ahead(file, where)
    doc = docs[0] if len(docs) == 1 else None
    if not isinstance(doc, dict):
        return None
    for field, value in named_paths(doc):
        if _REMOTE.match(value):
            raise InputError(f"{where}: {field} {value!r} is a remote base; builds here are offline, vendor it")
        resolved = os.path.normpath(os.path.join(file.parent, value))
        if os.path.isabs(value) or not Path(resolved).is_relative_to(workspace.path):
            raise InputError(
                f"{where}: {field} {value!r} is outside the repository; Flux builds only inside its source"
            )
        reason = "" if os.path.lexists(resolved) else workspace.left_out(os.path.relpath(resolved, workspace.path))
        if reason:
            raise InputError(
                f"{where}: {field} {value!r} is not in the artifact Flux builds from ({reason}); "
                "the Kustomization fails on the cluster"
            )
    return doc


# The fields of a Flux Kustomization's spec its build reads: what fluxcd/pkg/kustomize's Generator writes into
# the kustomization file (kustomize_generator.go, GenerateManifest), and commonMetadata.
BUILD_FIELDS = (
    "targetNamespace",
    "namePrefix",
    "nameSuffix",
    "patches",
    "patchesStrategicMerge",
    "patchesJson6902",
    "components",
    "ignoreMissingComponents",
    "images",
    "buildMetadata",
    "commonMetadata",
)


def build_spec(spec: dict) -> dict:
    """The part of a Flux Kustomization's spec that changes what its build gives."""
    return {field: spec[field] for field in BUILD_FIELDS if spec.get(field) not in (None, "", [], {})}


def build(
    workspace: Workspace, rel_path: str, spec: dict | None, env: str, source: str, reads: set | None = None
) -> list[Manifest]:
    """The objects Flux applies for a Kustomization with `spec` at `rel_path` (a folder of the repository),
    before post-build substitution; with no spec (None), `kustomize build` of the folder (an eksctl overlay).
    The helper's output is kept with what the build read (render_cache), so a build whose every read gives the
    same value as in an earlier one, in this run or a cached one, is not run again. `reads`: where to add
    those reads (an environment's, repository.py)."""
    wanted = build_spec(spec) if spec is not None else None
    request = {"op": "build", "root": str(workspace.path), "path": str(workspace.path / rel_path)}
    if wanted is not None:
        kustomization = {"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "spec": wanted}
        request = {"op": "flux", "root": str(workspace.path), "path": rel_path or ".", "kustomization": kustomization}
    shown = rel_path or "."

    def run() -> tuple[str, bool, frozenset]:
        reply = helper.ask(request, shown)
        if "refused" in reply:  # a file over a limit, named relative to the workspace: one line, as it is
            raise InputError(str(reply["refused"]))
        if "error" in reply:
            message = helper.masked_error(str(reply["error"])).replace(str(workspace.path) + "/", "")
            helper.fail(shown, message or "the build failed")
        try:
            observed = render_cache.as_reads(reply.get("reads"))
        except ValueError as error:
            raise InputError(f"{shown}: the helper answered with {error}") from None
        return str(reply.get("yaml", "")), bool(reply.get("origins")), observed

    docs, origins, observed = _cached(workspace, rel_path, wanted, run, shown)
    if reads is not None:
        reads.update(observed)
    objects = from_documents(docs, shown, env=env, source=source)
    if origins:
        _take_origins(objects, shown)
    return objects


def _cached(workspace: Workspace, rel_path: str, wanted: dict | None, run, file: str) -> tuple[list, bool, frozenset]:
    """The documents the helper outputs for a build, whether they carry origin annotations to take, and what
    the build read: from the render cache when every read of a kept build gives the same value now.

    The build's identity: the folder relative to the workspace (so a base checkout and the working tree share
    entries), the spec fields the build reads, and whether it is a Flux build."""
    cache = render_cache.shared()
    if cache is None:
        text, origins, observed = run()
        return load_documents(text, file), origins, observed
    identity = json.dumps({"path": rel_path or ".", "flux": wanted}, sort_keys=True, default=str)

    def build() -> tuple[str, frozenset]:
        text, origins, observed = run()
        return _entry(text, origins, file), observed

    entry, observed = cache.get_or_build_by_reads(identity, workspace.path, build)
    docs, origins = _from_entry(entry, file)
    return docs, origins, observed


def _entry(text: str, origins: bool, file: str) -> str:
    """What the cache keeps of a build: its documents as JSON when JSON holds them exactly (read back many
    times faster than YAML), else the helper's YAML. A stream that does not load fails here, uncached."""
    docs = load_documents(text, file)
    head = f"{'json' if all(_json_exact(doc) for doc in docs) else 'yaml'} {int(origins)}"
    if head.startswith("json"):
        return head + "\n" + json.dumps(docs, separators=(",", ":"))
    return head + "\n" + text


def _from_entry(entry: str, file: str) -> tuple[list, bool]:
    head, _, body = entry.partition("\n")
    form, _, origins = head.partition(" ")
    docs = json.loads(body) if form == "json" else load_documents(body, file)
    return docs, origins == "1"


def _json_exact(value) -> bool:
    """Whether JSON gives `value` back as it is (no timestamp, binary or non-string key)."""
    if isinstance(value, dict):
        return all(isinstance(k, str) and _json_exact(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_json_exact(item) for item in value)
    return value is None or isinstance(value, (str, int, float))


def _take_origins(objects: list[Manifest], rel_path: str) -> None:
    for manifest in objects:
        annotations = manifest.metadata.get("annotations")
        if not isinstance(annotations, dict) or _ORIGIN not in annotations:
            continue
        try:
            origin = yaml_limits.load(str(annotations.pop(_ORIGIN))) or {}
        except yaml.YAMLError:
            origin = {}  # kustomize wrote it; one it cannot read back leaves the object's file as it was
        if not annotations:
            manifest.metadata.pop("annotations")
        if isinstance(origin, dict) and origin.get("path"):
            manifest.file = os.path.normpath(os.path.join(rel_path, str(origin["path"])))


def follows(manifest: Manifest) -> bool:
    """Whether a Flux Kustomization builds from this repository (the bootstrap GitRepository)."""
    spec = manifest.doc.get("spec") if isinstance(manifest.doc.get("spec"), dict) else {}
    ref = spec.get("sourceRef") if isinstance(spec.get("sourceRef"), dict) else {}
    namespace = str(ref.get("namespace") or manifest.namespace or "flux-system")
    return (str(ref.get("kind", "")), namespace, str(ref.get("name", ""))) == BOOTSTRAP_SOURCE
