"""Build a Flux Kustomization's path the way kustomize-controller does, confined to the repository.

What kustomize-controller v1.9.4 does (internal/controller/kustomization_controller.go: generate, build,
apply), with fluxcd/pkg kustomize v1.35.4 (kustomize/kustomize_generator.go), and what this module does:

- The kustomization file at spec.path is rewritten in place before the build (Generator.WriteFile):
  spec.targetNamespace sets `namespace`, namePrefix/nameSuffix replace the file's own, spec.patches and
  spec.components are appended, spec.images are appended or update an image the file already lists.
  A path without a kustomization file gets a generated one listing every .yaml/.yml file below it and
  each sub-folder that has a kustomization file as a whole (findOrGenerateKustomization, scanManifests).
  Here: the same rewrite, in a private copy of the repository.
- The build runs on a file system rooted at the source (SecureBuild, securefs): nothing outside the
  repository is read. Here: the build runs in a copy holding only what resolves inside the repository
  (a symlink leading out is left out), and every path a kustomization file names is checked first, so an
  absolute path, a `..` past the root or a remote base is refused with one line, its content never read.
- spec.commonMetadata labels and annotations are set on every object after the build (apply,
  ssautil.SetCommonMetadata). Here: the same, on the parsed objects.

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
import tempfile
from functools import partial
from pathlib import Path

import yaml

from ..core.errors import InputError
from ..model import Manifest
from ..model.manifest import from_documents, load_documents
from . import kustomize, render_cache
from .flux_source import ArtifactFilter
from .kustomization import named_paths

# libyaml's loader where PyYAML has it: every kustomization file is read before the builds.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# The repository's own GitRepository, as `flux bootstrap` names it (namespace flux-system).
BOOTSTRAP_SOURCE = ("GitRepository", "flux-system", "flux-system")
_SKIPPED = (".git",)
_ORIGIN = "config.kubernetes.io/origin"
_REMOTE = re.compile(r"^([a-z][a-z0-9+.-]*://|git@|github\.com/|gitlab\.com/|bitbucket\.org/)", re.IGNORECASE)


class Workspace:
    """A copy of the repository with only what resolves inside it: regular files, folders, and symlinks
    whose target is inside the repository (rewritten as relative links inside the copy). In a git work
    tree only what git tracks or would track is copied (Flux's source is a commit: no ignored .venv).

    With `artifact` (flux_source.ArtifactFilter) it is what Flux builds from: no symbolic link at all and
    nothing the artifact's rules leave out; without, it is the checkout eksctl reads."""

    def __init__(self, root: Path, source: Path | None = None, artifact: ArtifactFilter | None = None):
        self.root = root.resolve()
        self.artifact = artifact
        self.path = Path()
        places = list(dict.fromkeys([_memory_folder(), None]))
        for place in places:
            try:
                self.path = Path(tempfile.mkdtemp(prefix="gitops-flux-", dir=place))
                if source is None:
                    _copy_confined(self.root, self.path, artifact)
                else:
                    shutil.copytree(source, self.path, symlinks=True, dirs_exist_ok=True)
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

    def fork(self) -> Workspace:
        """A private copy of this workspace, for a build that rewrites a kustomization file."""
        return Workspace(self.root, source=self.path, artifact=self.artifact)

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
        if self.path.name.startswith("gitops-flux-"):
            shutil.rmtree(self.path, ignore_errors=True)


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
            return subprocess.run(["git", *args], cwd=root, capture_output=True, timeout=60)
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
            if name in kustomize.KUSTOMIZATION_FILES:
                _check_file(workspace, Path(current) / name)


def _check_tree(workspace: Workspace, folder: Path, seen: set[Path]) -> None:
    """Check the kustomization in `folder` and, through the folders it names, every one its build reaches."""
    if folder in seen:
        return
    seen.add(folder)
    file = next((folder / n for n in kustomize.KUSTOMIZATION_FILES if (folder / n).is_file()), None)
    if file is None:
        return
    _check_file(workspace, file)  # refuses a path out of the workspace before it is followed
    try:
        doc = yaml.load(file.read_text(), Loader=_LOADER)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return
    for _, value in named_paths(doc) if isinstance(doc, dict) else ():
        target = Path(os.path.normpath(folder / value))
        if target.is_dir():
            _check_tree(workspace, target, seen)


def _check_file(workspace: Workspace, file: Path) -> None:
    where = file.relative_to(workspace.path)
    try:
        doc = yaml.load(file.read_text(), Loader=_LOADER)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return  # kustomize reports it
    if not isinstance(doc, dict):
        return
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


def _transforms(spec: dict) -> dict:
    """The kustomization fields Flux's generator sets or appends, from a Flux Kustomization's spec."""
    found = {}
    for field in ("targetNamespace", "namePrefix", "nameSuffix", "patches", "components", "images"):
        if spec.get(field) not in (None, "", []):
            found[field] = spec[field]
    return found


def _generated(folder: Path, base: Path) -> tuple[dict, list | None]:
    """The kustomization Flux generates for a folder without one (scanManifests), with paths relative to
    `base`, the folder it is written in; and, when it lists only plain files that parse, their documents
    by file (else None)."""
    resources, plain = [], []
    for current, folders, files in os.walk(folder):
        here = Path(current)
        folders.sort()
        if here != folder and kustomize.has_kustomization(here):
            resources.append(os.path.relpath(here, base))
            plain = None
            folders.clear()
            continue
        for name in sorted(files):
            if name.endswith((".yaml", ".yml")):
                docs = _check_manifest(here / name)
                resources.append(os.path.relpath(here / name, base))
                if plain is not None and docs is not None:
                    plain.append((here / name, docs))
                else:
                    plain = None
    doc = {"apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization"}
    if resources:
        doc["resources"] = resources
        doc["buildMetadata"] = ["originAnnotations"]  # which file each object came from; removed after
    else:
        doc["namespace"] = "_placeholder"
    return doc, plain


def _check_manifest(file: Path) -> list | None:
    """The documents of a file a generated kustomization lists, or None when kustomize must say why it does
    not parse. scanManifests fails the Kustomization on a file that is not Kubernetes objects: one line
    here, without kustomize's echo of the file."""
    try:
        docs = [d for d in yaml.load_all(file.read_text(), Loader=_LOADER) if d is not None]
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None
    if any(not isinstance(doc, dict) or not doc.get("kind") for doc in docs):
        raise InputError(
            f"{file}: not a Kubernetes manifest (no kind), and Flux reads every .yaml/.yml file of a folder "
            "without a kustomization file: it fails the Kustomization (move the file or add a kustomization.yaml)"
        )
    return docs


def _as_listed(plain: list, workspace: Path, env: str, source: str) -> list[Manifest] | None:
    """What kustomize makes of a kustomization that lists plain files and transforms nothing: their
    objects as written, local-config ones left out. None (kustomize decides) for anything irregular:
    an object without apiVersion or name, or one listed twice."""
    objects, ids = [], set()
    for file, docs in plain:
        for doc in docs:
            manifest = Manifest(doc=doc, file=str(file.relative_to(workspace)), env=env, source=source)
            if not manifest.api_version or not manifest.name or manifest.resource in ids:
                return None
            ids.add(manifest.resource)
            if not manifest.local_config:
                objects.append(manifest)
    return objects


def _with_transforms(doc: dict, spec: dict) -> dict:
    """A kustomization with the fields Flux's generator sets from the Flux Kustomization's spec."""
    transforms = _transforms(spec)
    if "targetNamespace" in transforms:
        doc["namespace"] = transforms["targetNamespace"]
    for field in ("namePrefix", "nameSuffix"):
        if field in transforms:
            doc[field] = transforms[field]
    for field in ("patches", "components"):
        if field in transforms:
            doc[field] = [*(doc.get(field) or []), *transforms[field]]
    for image in transforms.get("images") or []:
        listed = doc.setdefault("images", [])
        match = next((i for i in listed if isinstance(i, dict) and i.get("name") == image.get("name")), None)
        if match is None:
            listed.append(dict(image))
            continue
        if image.get("newName"):
            match["newName"] = image["newName"]
        if image.get("newTag") or image.get("digest"):
            match.pop("newTag", None)
            match.pop("digest", None)
            match.update({k: image[k] for k in ("newTag", "digest") if image.get(k)})
    return doc


def build(workspace: Workspace, rel_path: str, spec: dict, env: str, source: str) -> list[Manifest]:
    """The objects Flux applies for a Kustomization with `spec` at `rel_path` (a folder of the repository).

    A folder without a kustomization file gets the generated one in a new folder of the workspace (its
    paths lead back to the folder, so nothing is changed in place); one whose own kustomization file
    Flux rewrites is built in a private copy of the workspace, as other builds may read that file.
    kustomize's output is kept by a hash of what the build reads (render_cache), so a build whose
    inputs did not change since an earlier one, in this run or a cached one, is not run again."""
    shared = workspace.path / rel_path
    transforms = _transforms(spec)
    generated, origins = None, ""
    private: list[Workspace] = []
    try:
        if not kustomize.has_kustomization(shared):
            generated = Path(tempfile.mkdtemp(prefix=".flux-generated-", dir=workspace.path))
            listed, plain = _generated(shared, generated)
            if plain is not None and not transforms:
                objects = _as_listed(plain, workspace.path, env, source)
                if objects is not None:
                    _common_metadata(objects, spec.get("commonMetadata"))
                    return objects
            doc = _with_transforms(listed, spec)
            (generated / "kustomization.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
            origins = generated.name if "resources" in doc else ""
            run = partial(kustomize.build, generated, workspace.path)
            mode = "generated"
        elif transforms:
            run = partial(_build_rewritten, workspace, rel_path, spec, private)
            mode = "rewritten"
        else:
            run = partial(kustomize.build, shared, workspace.path)
            mode = "as-is"
        run = partial(_relative_errors, run, workspace, private)
        docs = _cached(workspace, shared, mode, transforms, run, rel_path or ".")
        objects = from_documents(docs, rel_path or ".", env=env, source=source)
    except InputError as error:
        message = str(error).replace(str(private[0].path if private else workspace.path) + "/", "")
        raise InputError(message) from None
    finally:
        for copy in private:
            copy.close()
        if generated:
            shutil.rmtree(generated, ignore_errors=True)
    if origins:
        _take_origins(objects, origins)
    _common_metadata(objects, spec.get("commonMetadata"))
    return objects


def _relative_errors(run, workspace: Workspace, private: list) -> str:
    """Run a build; its error names files relative to the repository (a build another render waits
    for, in the cache, reports to it too)."""
    try:
        return run()
    except InputError as error:
        message = str(error)
        for copy in (*private, workspace):
            message = message.replace(str(copy.path) + "/", "")
        raise InputError(message) from None


def _build_rewritten(workspace: Workspace, rel_path: str, spec: dict, private: list) -> str:
    """Build `rel_path` with Flux's rewrite of its kustomization file, in a private copy of the workspace."""
    copy = workspace.fork()
    private.append(copy)
    folder = copy.path / rel_path
    existing = next(folder / n for n in kustomize.KUSTOMIZATION_FILES if (folder / n).is_file())
    doc = _with_transforms(yaml.safe_load(existing.read_text()) or {}, spec)
    existing.unlink()
    existing.write_text(yaml.safe_dump(doc, sort_keys=False))
    return kustomize.build(folder, copy.path)


def _cached(workspace: Workspace, folder: Path, mode: str, transforms: dict, run, file: str) -> list:
    """The documents kustomize outputs for `folder`, from the render cache when its inputs were built before.

    The key: every file the build reads, named relative to the workspace (so a base checkout and the
    working tree share entries), how Flux changes the build (`mode`, its transforms and the components
    they add, read from the folder and, for a generated kustomization, from the repository root), and
    the kustomize binary with its flags."""
    cache = render_cache.shared()
    if cache is None:
        return load_documents(run(), file)
    folders = [folder]
    for component in transforms.get("components") or []:
        if isinstance(component, str):
            folders += [folder / component, workspace.path / component]
    extra = json.dumps({"mode": mode, "transforms": transforms}, sort_keys=True, default=str)
    key = render_cache.fingerprint(workspace.path, folders, extra)
    return _from_entry(cache.get_or_build(key, lambda: _entry(run(), file)), file)


def _entry(text: str, file: str) -> str:
    """What the cache keeps of a build: its documents as JSON when JSON holds them exactly (read back many
    times faster than YAML), else kustomize's YAML. A stream that does not load fails here, uncached."""
    docs = load_documents(text, file)
    if all(_json_exact(doc) for doc in docs):
        return "json\n" + json.dumps(docs, separators=(",", ":"))
    return "yaml\n" + text


def _from_entry(entry: str, file: str) -> list:
    form, _, body = entry.partition("\n")
    return json.loads(body) if form == "json" else load_documents(body, file)


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
        origin = yaml.safe_load(annotations.pop(_ORIGIN)) or {}
        if not annotations:
            manifest.metadata.pop("annotations")
        if isinstance(origin, dict) and origin.get("path"):
            manifest.file = os.path.normpath(os.path.join(rel_path, str(origin["path"])))


def _common_metadata(objects: list[Manifest], common) -> None:
    if not isinstance(common, dict):
        return
    for field in ("labels", "annotations"):
        values = common.get(field)
        if not isinstance(values, dict) or not values:
            continue
        for manifest in objects:
            metadata = manifest.doc.setdefault("metadata", {})
            if isinstance(metadata, dict):
                current = metadata.get(field) if isinstance(metadata.get(field), dict) else {}
                metadata[field] = {**current, **{str(k): str(v) for k, v in values.items()}}


def follows(manifest: Manifest) -> bool:
    """Whether a Flux Kustomization builds from this repository (the bootstrap GitRepository)."""
    spec = manifest.doc.get("spec") if isinstance(manifest.doc.get("spec"), dict) else {}
    ref = spec.get("sourceRef") if isinstance(spec.get("sourceRef"), dict) else {}
    namespace = str(ref.get("namespace") or manifest.namespace or "flux-system")
    return (str(ref.get("kind", "")), namespace, str(ref.get("name", ""))) == BOOTSTRAP_SOURCE
