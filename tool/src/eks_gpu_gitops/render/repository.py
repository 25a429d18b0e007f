"""Render every environment: each Flux Kustomization's path and the eksctl overlay, once.

validate and diff call `render_repository` and share its result instead of rendering again; the render
command writes it out (output.py).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import threading
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import InputError
from ..model import CLUSTER_CONFIG, FLUX_KUSTOMIZATION, Environment, FluxKustomization, Manifest
from ..model.fields import mapping, names
from ..model.flux_sources import DEFAULT_NAMESPACE, EXTERNAL_ARTIFACT, Sources
from . import external_artifact, flux_build, flux_source, helm_release, post_build, render_cache
from .helper import KUSTOMIZATION_FILES

# kustomize processes at once. Each one spends part of its life starting up and reading files,
# so two per core keep the cores busy (on a shared 2-core machine, 4 at once rendered a
# 24-environment fleet 10-30% faster than 2).
RENDER_WORKERS = 2 * (os.cpu_count() or 1)
# The Flux Kustomization `flux bootstrap` creates, and the GitRepository it reads: both flux-system.
ROOT_NAME = "flux-system"
# Where a child found after its parent's substitution sorts among the parent's children: after them.
_AFTER_SUBSTITUTION = 10_000


def environment_names(root: Path) -> list[str]:
    clusters = root / "clusters"
    if not clusters.is_dir():
        raise InputError(f"{clusters}: no clusters/ folder; Flux is bootstrapped with --path=clusters/<env>")
    return sorted(p.name for p in clusters.iterdir() if p.is_dir() and _has_manifests(p))


def _has_manifests(folder: Path) -> bool:
    return any(f.suffix in (".yaml", ".yml") for f in folder.rglob("*") if f.is_file())


def root_kustomization(env: str) -> FluxKustomization:
    """The Kustomization `flux bootstrap --path=clusters/<env>` creates (gotk-sync.yaml): it applies the
    folder itself. Replaced by the repository's own copy when clusters/<env>/flux-system/ has one."""
    doc = {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": ROOT_NAME, "namespace": ROOT_NAME},
        "spec": {
            "interval": "10m0s",
            "path": f"./clusters/{env}",
            "prune": True,
            "sourceRef": {"kind": "GitRepository", "name": ROOT_NAME},
        },
    }
    manifest = Manifest(doc=doc, file=f"clusters/{env}", env=env, source=ROOT_NAME)
    return FluxKustomization(manifest=manifest, path=f"clusters/{env}")


def _key(manifest: Manifest) -> tuple[str, str]:
    return manifest.namespace or ROOT_NAME, manifest.name


def _entry(manifest: Manifest) -> FluxKustomization:
    spec = manifest.doc.get("spec") if isinstance(manifest.doc.get("spec"), dict) else {}
    path = flux_build.repository_path(spec.get("path", ""), f"{manifest.file}: Kustomization {manifest.name!r}")
    return FluxKustomization(
        manifest=manifest,
        path=path,
        depends_on=names(spec, "dependsOn"),
    )


def _follow(
    environment: Environment, parent: FluxKustomization, walk: _Walk, wait: bool = True
) -> list[FluxKustomization]:
    """Take the Flux Kustomizations `parent` applies that build from this repository out of its objects,
    as entries of their own (each once: a cycle or a repeat stays an object); return the new entries.

    One whose spec.path holds a `${VAR}` is built from the path `parent`'s post-build substitution gives
    it, as Flux applies it: with `wait` it stays an object until `parent` is substituted (walk.waiting);
    without, a path still unknown then (only the cluster has its variable) leaves it an object.

    One that reads an ExternalArtifact an ArtifactGenerator makes from this repository is built from that
    artifact's files (external_artifact.py), once every object known so far is substituted (the generator may
    be any of them); while no generator of it is known and more Kustomizations are still to be built, it
    waits again."""
    found, kept = [], []
    seen = walk.seen[id(environment)]
    for manifest in parent.objects:
        external = _external_artifact(manifest)
        if manifest.group_kind != FLUX_KUSTOMIZATION or not (flux_build.follows(manifest) or external):
            kept.append(manifest)
            continue
        key = _key(manifest)
        if key == (ROOT_NAME, ROOT_NAME) and parent is environment.kustomizations[0] and not external:
            parent.manifest = manifest  # the repository's own gotk-sync.yaml
            continue
        if key in seen or "${" in _spec_path(manifest) or (external and wait):
            if key not in seen and wait:
                walk.waiting.append((environment, parent))
            kept.append(manifest)
            continue
        staged = _stage(environment, parent, manifest, external, walk) if external else None
        if external and staged is None:
            kept.append(manifest)
            continue
        seen.add(key)
        entry = _entry(manifest)
        if staged is not None:
            entry.artifact = staged.describe
            walk.artifacts[id(entry)] = staged
        environment.kustomizations.append(entry)
        found.append(entry)
    parent.objects = kept
    return found


def _external_artifact(manifest: Manifest) -> tuple[str, str] | None:
    """(namespace, name) of the ExternalArtifact a Flux Kustomization builds from, if it builds from one."""
    ref = mapping(manifest.doc, "spec", "sourceRef")
    if manifest.group_kind != FLUX_KUSTOMIZATION or ref.get("kind") != EXTERNAL_ARTIFACT:
        return None
    return str(ref.get("namespace") or manifest.namespace or DEFAULT_NAMESPACE), str(ref.get("name", ""))


def _stage(
    environment: Environment, parent: FluxKustomization, manifest: Manifest, external: tuple[str, str], walk: _Walk
) -> external_artifact.Staged | None:
    """The files of the ExternalArtifact `manifest` builds from, made as its ArtifactGenerator makes them from
    this repository; None (and why, in environment.unmade) when no generator of it is known yet or it cannot
    be made here."""
    namespace, name = external
    output = Sources(environment.objects).maker(namespace, name)
    if output is None:
        walk.retry.append((environment, parent))
        return None
    generator = f"ArtifactGenerator {output.namespace}/{output.generator.name} ({output.generator.file})"
    identity = external_artifact.identity(output, name)
    staged = walk.workspaces.artifacts.get(identity)
    if staged is None:
        try:
            staged = external_artifact.stage(output, name, walk.workspaces.flux.path, walk.workspaces.budget)
        except external_artifact.Unstaged as why:
            environment.unmade[_key(manifest)] = f"{generator} makes it, but {why}"
            _record(environment, walk, why.probes)  # it may be made once they change
            return None
        walk.workspaces.artifacts[identity] = staged
    _record(environment, walk, staged.probes)
    # Described by this environment's generator: one alike in another environment may have staged it.
    return dataclasses.replace(staged, describe=external_artifact.describe(output, name))


def _record(environment: Environment, walk: _Walk, probes: set[tuple[str, str]]) -> None:
    """What an artifact was made from (or found not to be made from), as reads of the repository's checkout: the
    environment renders the same while they give the same values (render_cache.environment_fingerprints)."""
    if render_cache.shared() is None or not probes:
        return
    now = render_cache.observe(walk.workspaces.flux.path, probes)
    reads = walk.reads_of(environment, "flux")
    with _READS_LOCK:
        if now:
            reads.update((kind, path, now[(kind, path)]) for kind, path in probes)
        else:
            reads.add(("exists", ".", "unknown"))  # never holds: the environment renders again


def unfollowed(environment: Environment) -> list[str]:
    """Notes on the Flux Kustomizations a render could not follow: their spec.path holds a variable only the
    cluster has a value for, or their source is not this repository (another GitRepository, an OCIRepository,
    a Bucket, an ExternalArtifact made from one of those or not made here), so what they apply is not rendered
    (and a path there is not checked)."""
    notes = []
    for kustomization in environment.kustomizations:
        for manifest in kustomization.objects:
            path = _spec_path(manifest)
            if manifest.group_kind != FLUX_KUSTOMIZATION:
                continue
            elsewhere = _elsewhere(environment, manifest)
            if elsewhere:
                notes.append(
                    f"{environment.name}: Flux Kustomization {manifest.name} builds from {elsewhere}: its "
                    f"spec.path {path!r} is not rendered or checked"
                )
                continue
            if not flux_build.follows(manifest) or "${" not in path:
                continue
            if post_build.post_build(kustomization.manifest.doc) is None:
                why = (
                    f"is applied as written: Flux Kustomization {kustomization.name}, which applies it, has no "
                    "spec.postBuild, so the path does not exist and the Kustomization fails"
                )
            else:
                why = "is known only on the cluster (its variable has no value here)"
            notes.append(
                f"{environment.name}: Flux Kustomization {manifest.name}: spec.path {path!r} {why}; what it "
                "applies is not rendered or checked"
            )
    return notes


def _elsewhere(environment: Environment, manifest: Manifest) -> str:
    """What a Flux Kustomization the render did not follow builds from, when that is not this repository (""
    for this repository's own GitRepository, and for a source the environment does not define at all:
    flux-source-missing says so)."""
    if flux_build.follows(manifest):
        return ""
    ref = mapping(manifest.doc, "spec", "sourceRef")
    namespace = str(ref.get("namespace") or manifest.namespace or DEFAULT_NAMESPACE)
    shown = f"{ref.get('kind', '')} {namespace}/{ref.get('name', '')}"
    if _external_artifact(manifest):
        why = environment.unmade.get(_key(manifest))
        return f"{shown}, which {why}" if why else ""
    return f"{shown}, not from this repository"


def _spec_path(manifest: Manifest) -> str:
    spec = manifest.doc.get("spec") if isinstance(manifest.doc.get("spec"), dict) else {}
    return str(spec.get("path") or "")


@dataclass
class _Walk:
    """How far a render has followed each environment: the Flux Kustomizations it has taken (by
    environment), each entry's place in depth-first order, and the parents whose children wait for
    the parent's substitution."""

    seen: dict[int, set] = field(default_factory=dict)
    order: dict[int, tuple] = field(default_factory=dict)
    waiting: list[tuple[Environment, FluxKustomization]] = field(default_factory=list)
    # Parents of a Flux Kustomization whose ExternalArtifact's generator is not known yet: followed again while
    # more Kustomizations are built.
    retry: list[tuple[Environment, FluxKustomization]] = field(default_factory=list)
    # What each environment's builds read, by environment and checkout ("flux", "checkout"; render_cache.py).
    reads: dict[tuple[int, str], set] = field(default_factory=dict)
    workspaces: _Workspaces | None = None
    artifacts: dict[int, external_artifact.Staged] = field(default_factory=dict)  # by id of the entry built from it

    def reads_of(self, environment: Environment, checkout: str) -> set:
        with _READS_LOCK:
            return self.reads.setdefault((id(environment), checkout), set())


_READS_LOCK = threading.Lock()


def render_repository(
    root: Path, envs: list[str] | None = None, progress=None, skip_missing: bool = False
) -> list[Environment]:
    """Render the chosen environments (all by default), builds in parallel.

    Each environment starts from what Flux applies from clusters/<env> (an entry named flux-system) and
    follows every Flux Kustomization that builds from this repository. A Flux Kustomization whose path
    does not exist is an input error, or with `skip_missing` is kept with no objects and `rendered`
    False (validate reports it as a finding). Once all are built, Flux's post-build variable
    substitution is applied (post_build.py), then every HelmRelease's chart is rendered (helm_release.py);
    a HelmRelease that fails on the cluster is an input error too, or with `skip_missing` is kept with its
    error (a finding).
    """
    names = envs or environment_names(root)
    unknown = [e for e in names if not (root / "clusters" / e).is_dir()]
    if unknown:
        raise InputError(f"unknown environment {unknown[0]!r}; known: {', '.join(environment_names(root))}")
    environments = [Environment(name) for name in names]
    # What Flux builds from (source-controller's artifact), and the checkout eksctl reads the overlays from.
    workspaces = _Workspaces(flux_build.Workspace(root, artifact=flux_source.ArtifactFilter(root)))
    try:
        flux_build.check_paths(workspaces.flux)
        jobs = []  # (environment, kustomization or None for eksctl, path)
        for environment in environments:
            entry = root_kustomization(environment.name)
            environment.kustomizations = [entry]
            jobs.append((environment, entry, entry.path))
            if (root / "overlays" / environment.name / "eksctl").is_dir():
                jobs.append((environment, None, f"overlays/{environment.name}/eksctl"))
        eksctl = [path for _, kustomization, path in jobs if kustomization is None]
        if eksctl:
            workspaces.checkout = flux_build.Workspace(root)
            flux_build.check_paths(workspaces.checkout, eksctl)
        walk = _Walk(workspaces=workspaces)
        _run_jobs(workspaces, jobs, progress, skip_missing, walk)
        # Post-build substitution, then the children whose path it gives (or whose ExternalArtifact's generator
        # is now known), until no new one appears.
        substituted: set[int] = set()
        while True:
            for environment in environments:
                post_build.substitute_environment(environment.kustomizations, substituted)
            waiting = list({id(p): (e, p) for e, p in walk.waiting + walk.retry}.values())
            walk.waiting, walk.retry = [], []
            jobs = []
            for environment, parent in waiting:
                for index, entry in enumerate(_follow(environment, parent, walk, wait=False)):
                    walk.order[id(entry)] = (*walk.order[id(parent)], _AFTER_SUBSTITUTION + index)
                    jobs.append((environment, entry, entry.path))
            if not jobs:
                break
            _run_jobs(workspaces, jobs, progress, skip_missing, walk)
        # What the HelmReleases install, once every object (a chart's source, its values) is known.
        helm_release.render_environments(environments, workspaces.flux.path, progress, RENDER_WORKERS)
        if not skip_missing:
            for environment in environments:
                helm_release.check(environment)
    finally:
        workspaces.close()
    _remember(root, environments, walk)
    return environments


def _remember(root: Path, environments: list[Environment], walk: _Walk) -> None:
    """Keep what each environment's render read (render_cache.py), by the checkout it was read on ("root" is
    the repository itself: whether the environment has an eksctl overlay)."""
    cache = render_cache.shared()
    if cache is None:
        return
    for environment in environments:
        eksctl = f"overlays/{environment.name}/eksctl"
        reads = {
            "flux": frozenset(walk.reads_of(environment, "flux")),
            "checkout": frozenset(walk.reads_of(environment, "checkout")),
            "root": frozenset({("isdir", eksctl, str((root / eksctl).is_dir()).lower())}),
        }
        cache.remember_environment(environment.name, reads)


def environment_fingerprints(root: Path, names: list[str]) -> dict[str, str | None]:
    """For each environment, a hash of what an earlier render of it read, when every one of those reads gives
    the same value on `root` now (the environment renders as it did then), else None: it is to be rendered.
    Made on the same copies of the repository a render builds from, so a file git ignores, or Flux's artifact
    leaves out, counts as the render sees it."""
    cache = render_cache.shared()
    found: dict[str, str | None] = dict.fromkeys(names)
    records = {name: cache.environments(name) for name in names} if cache is not None else {}
    if not any(records.values()):
        return found
    made: list[flux_build.Workspace] = []
    try:
        made.append(flux_build.Workspace(root, artifact=flux_source.ArtifactFilter(root)))
        checkouts = {"root": root, "flux": made[0].path}
        if any(candidate.get("checkout") for candidates in records.values() for candidate in candidates):
            made.append(flux_build.Workspace(root))
            checkouts["checkout"] = made[1].path
        # One question to the helper per checkout, for every read of every environment's candidates.
        probes: dict[str, set] = {part: set() for part in checkouts}
        for candidates in records.values():
            for candidate in candidates:
                for part, reads in candidate.items():
                    probes.setdefault(part, set()).update((kind, path) for kind, path, _ in reads)
        now = {part: render_cache.observe(checkouts[part], probes[part]) for part in checkouts}
        for name, candidates in records.items():
            for candidate in candidates:
                parts = [(part, reads) for part, reads in candidate.items() if reads]
                if all(part in now and render_cache.hold(reads, now[part]) for part, reads in parts):
                    record = json.dumps({part: sorted(reads) for part, reads in parts}, sort_keys=True)
                    found[name] = hashlib.sha256(record.encode()).hexdigest()
                    break
    finally:
        for workspace in made:
            workspace.close()
    return found


@dataclass
class _Workspaces:
    flux: flux_build.Workspace
    checkout: flux_build.Workspace | None = None
    artifacts: dict[str, external_artifact.Staged] = field(default_factory=dict)  # by external_artifact.identity
    budget: external_artifact.Budget = field(default_factory=external_artifact.Budget)  # what staging may copy

    def close(self) -> None:
        for workspace in (self.flux, self.checkout, *self.artifacts.values()):
            if workspace is not None:
                workspace.close()


def has_kustomization(workspace, path: str) -> bool:
    return any((workspace.path / path / name).is_file() for name in KUSTOMIZATION_FILES)


def _run_jobs(workspaces: _Workspaces, jobs: list, progress, skip_missing: bool, walk: _Walk) -> None:
    """Build every job in parallel; a Flux Kustomization that a build applies is built as soon as it is
    found. Each environment's entries end in the order they were found (depth first)."""
    stopping = threading.Event()
    for environment, kustomization, _ in jobs:
        walk.seen.setdefault(id(environment), {(ROOT_NAME, ROOT_NAME)})
        walk.order.setdefault(id(kustomization), (0,))
    order = walk.order

    def run(job):
        environment, kustomization, path = job
        if stopping.is_set():
            return []
        workspace = workspaces.flux if kustomization is not None else workspaces.checkout
        checkout = "flux" if kustomization is not None else "checkout"
        reads = walk.reads_of(environment, checkout)
        staged = walk.artifacts.get(id(kustomization))
        if staged is not None:
            # Built from an ExternalArtifact's files: what they were made from is among the environment's reads
            # already (_stage); reads of this copy are not reads of the repository.
            workspace, reads = staged, set()
        if kustomization is not None and not (workspace.path / path).is_dir():
            if skip_missing:
                kustomization.rendered = False
                with _READS_LOCK:
                    reads.add(("isdir", path, "false"))  # as the helper observes it (render/render_cache.py)
                return []
            left_out = workspace.left_out(path)  # not kept: a failed render is not remembered
            why = f"which is not in the artifact Flux builds from ({left_out})" if left_out else "which does not exist"
            if staged is not None:
                why = f"which {staged.describe} does not hold"
            where = f"{kustomization.manifest.file}: Kustomization {kustomization.name!r}"
            raise InputError(f"{where} points at {path!r}, {why}")
        if staged is not None:
            flux_build.check_paths(staged, [path])
        source = kustomization.name if kustomization else "eksctl"
        spec = kustomization.manifest.doc.get("spec") if kustomization else None
        if kustomization is not None and not isinstance(spec, dict):
            spec = {}
        observed: set = set()
        objects = flux_build.build(workspace, path, spec, environment.name, source, observed)
        for manifest in objects if staged is not None else ():
            manifest.file = staged.origin(manifest.file)  # the file of the repository it was copied from
        with _READS_LOCK:
            reads.update(observed)
        # A build that started as the user interrupted (its process missed the signal) ends unreported;
        # so does clusters/<env> read as plain files (no build, done before any build starts).
        plain = kustomization is not None and kustomization.name == ROOT_NAME and not has_kustomization(workspace, path)
        if progress and not stopping.is_set() and not plain:
            progress(f"{environment.name}/{source}: {path} -> {len(objects)} objects")
        return objects

    pool = ThreadPoolExecutor(max_workers=RENDER_WORKERS)
    try:
        pending = {pool.submit(run, job): job for job in jobs}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                environment, kustomization, _ = pending.pop(future)
                objects = future.result()
                if kustomization is None:
                    configs = [m for m in objects if m.group_kind == CLUSTER_CONFIG]
                    environment.cluster_config = configs[0] if configs else None
                    continue
                kustomization.objects = objects
                for index, entry in enumerate(_follow(environment, kustomization, walk)):
                    order[id(entry)] = (*order[id(kustomization)], index)
                    job = (environment, entry, entry.path)
                    pending[pool.submit(run, job)] = job
    except BaseException:
        stopping.set()
        raise
    finally:
        # On Ctrl-C (or a failed build) the builds not started yet are dropped, not run to the end.
        pool.shutdown(wait=True, cancel_futures=True)
    for environment in {id(e): e for e, _, _ in jobs}.values():
        environment.kustomizations.sort(key=lambda k: order[id(k)])


def repository_root(start: Path) -> Path:
    """The nearest folder at or above `start` with a clusters/ folder: Flux is bootstrapped with
    --path=clusters/<env>, and whatever else the repository holds (overlays/, or infrastructure/ and
    apps/ as in fluxcd's examples) is reached from there."""
    for candidate in (start, *start.parents):
        if (candidate / "clusters").is_dir():
            return candidate
    raise InputError(f"{start}: not inside a Flux repository (no clusters/<env>/ folder above it)")
