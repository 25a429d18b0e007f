"""The load stage: render the repository's environments, or build and read the named inputs, into
scopes (one per environment) with their ClusterConfig and Kubernetes version."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..core import yaml_limits
from ..core.errors import InputError
from ..core.files import Unreadable, read_bounded
from ..model import CLUSTER_CONFIG, KUSTOMIZE_CONFIG_GROUP, Manifest, Scope, parse_stream, relative
from ..render import helm_release, helper, platform, post_build
from ..render import repository as render
from ..render.capabilities import kubernetes_version_of
from .plan import Plan, check_readable


def read_file(path: Path, root: Path) -> list[Manifest]:
    """The objects of a file named as an input (or found in a folder named as one): a FIFO, a device, or a file over
    yaml_limits.MAX_FILE_BYTES is refused in one line rather than read; its YAML is loaded with the limits."""
    try:
        text = read_bounded(path, yaml_limits.MAX_FILE_BYTES, follow_links=True).decode()
    except Unreadable as error:
        raise InputError(f"{path}: cannot read: {error}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: cannot read: not UTF-8 text") from None
    return parse_stream(text, relative(path, root))


def _cluster_config_from(path: Path, root: Path) -> Manifest:
    check_readable(path)
    objects = parse_stream(helper.build(path), relative(path, root)) if path.is_dir() else read_file(path, root)
    configs = [m for m in objects if m.group_kind == CLUSTER_CONFIG]
    if len(configs) != 1:
        raise InputError(f"{path}: --cluster-config needs exactly one eksctl ClusterConfig, found {len(configs)}")
    return configs[0]


def _platform(root: Path) -> dict:
    try:
        return platform.load(root)
    except InputError:
        return {}


def _is_kubernetes_file(objects: list[Manifest]) -> bool:
    """False for a YAML file none of whose documents has an apiVersion or a kind: Helm values, a docker-compose
    file, a CI spec found in a folder, which nothing sends to the API server. One document with either makes it a
    manifest file, and a document of it lacking the other is then a schema finding."""
    return any(m.api_version or m.kind for m in objects)


def _read_inputs(plan: Plan, override: Manifest | None, settings: dict, progress) -> tuple[Scope, list[str]]:
    with ThreadPoolExecutor(max_workers=render.RENDER_WORKERS) as pool:
        built = list(
            pool.map(lambda folder: parse_stream(helper.build(folder), relative(folder, plan.root)), plan.builds)
        )
    objects = [m for group in built for m in group]
    others = []
    for file in plan.files:
        found = read_file(file, plan.root)
        if found and not _is_kubernetes_file(found):
            others.append(relative(file, plan.root))
            continue
        # Local configuration (an environment's settings) is kustomize's input, never applied.
        objects.extend(m for m in found if not m.local_config)
    notes = []
    if others:
        notes.append(
            f"inputs: {len(others)} YAML file{'s' if len(others) != 1 else ''} with no apiVersion or kind in any "
            f"document, so not Kubernetes manifests, not checked: {', '.join(sorted(others))}"
        )
    objects = [m for m in objects if m.group != KUSTOMIZE_CONFIG_GROUP]
    configs = [m for m in objects if m.group_kind == CLUSTER_CONFIG]
    objects = [m for m in objects if m.group_kind != CLUSTER_CONFIG]
    if len(configs) > 1 and override is None:
        files = ", ".join(sorted({m.file for m in configs}))
        raise InputError(
            f"several ClusterConfigs among the inputs ({files}); "
            "validate one environment at a time or give --cluster-config"
        )
    for manifest in objects:
        manifest.env = plan.env
    scope = Scope(plan.env, objects, override or (configs[0] if configs else None), platform=settings)
    progress(f"read {len(objects)} objects from {len(plan.builds)} kustomizations and {len(plan.files)} files")
    if not objects and scope.cluster_config is None:
        raise InputError("nothing to validate: the inputs hold no Kubernetes objects")
    return scope, notes


def load(
    plan: Plan, cluster_config_path: Path | None, kubernetes_version: str | None, progress
) -> tuple[list[Scope], list[list[str]]]:
    """(one scope per environment, each one's notes: variables only the cluster fills in, where its
    Kubernetes version came from)."""
    settings = _platform(plan.root)
    override = _cluster_config_from(cluster_config_path, plan.root) if cluster_config_path else None
    notes: list[list[str]] = []
    if plan.repository:
        environments = render.render_repository(plan.root, plan.envs, progress=progress, skip_missing=True)
        scopes = [
            Scope(
                e.name,
                e.objects,
                override or e.cluster_config,
                e.kustomizations,
                complete=True,
                platform=settings,
                releases=e.releases,
            )
            for e in environments
        ]
        notes = [
            [*post_build.notes(e.name, e.kustomizations), *render.unfollowed(e), *helm_release.notes(e)]
            for e in environments
        ]
    else:
        scope, scope_notes = _read_inputs(plan, override, settings, progress)
        scopes, notes = [scope], [scope_notes]
    for scope, scope_notes in zip(scopes, notes, strict=True):
        scope.kubernetes_version, origin = kubernetes_version_of(scope.cluster_config, kubernetes_version)
        if origin != "the ClusterConfig":
            scope_notes.append(f"{scope.env or 'inputs'}: Kubernetes {scope.kubernetes_version} ({origin})")
    return scopes, notes
