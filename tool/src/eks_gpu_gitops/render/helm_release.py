"""Render what every HelmRelease of an environment installs, as Flux installs it.

On the cluster, source-controller v1.9.5 fetches a HelmRelease's chart from its source (a HelmRepository, HTTP
or OCI; an OCIRepository; a GitRepository) and helm-controller v1.6.4 installs it with the values the release
composes. Here the helper does both with those projects' code: it fetches the chart with Helm's repository and
registry clients into a cache (helper/chart.go) and renders it as helm-controller installs it (helper/helm.go).
This module finds each release's source, and the ConfigMaps and Secrets its valuesFrom reads, among the
objects the environment renders, as the controllers find them on the cluster, and keeps what the chart makes:

- a source the repository does not hold, a chart from a Bucket, or a chart the cache lacks with --offline
  (GITOPS_OFFLINE=1) or when its repository cannot be reached: a note, and the release's objects are unknown;
- a valuesFrom ConfigMap or Secret the repository does not hold (optional or not): a note, and the release
  is rendered without it;
- a chart or version the source does not have, values the chart refuses, a template that fails: the
  HelmRelease fails on the cluster too, so the render does (validate reports it as a finding).

Values from a Secret are registered with credentials.py, so that no output shows them.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import os
import re
import subprocess
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import yaml

from ..core import credentials, yaml_limits
from ..core.errors import InputError
from ..core.network import offline
from ..model import CLUSTER_SCOPED, HELM_RELEASE, Environment, HelmReleaseRender, Manifest, mapping, sequence
from ..model.flux_sources import EXTERNAL_ARTIFACT, Sources
from ..model.manifest import from_documents
from . import helper, render_cache
from .capabilities import api_versions, cluster_scoped_kinds, kubernetes_version_of
from .post_build import stored_values

CHART_CACHE_VARIABLE = "GITOPS_CHART_CACHE"
_SOURCE_GROUP = "source.toolkit.fluxcd.io"
# The repository's own GitRepository, as `flux bootstrap` names it.
_BOOTSTRAP = ("flux-system", "flux-system")
# source-controller's default spec.timeout for HelmRepository and OCIRepository (api/v1: 60s).
_DEFAULT_TIMEOUT = 60.0
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h)")
_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}


def chart_cache() -> Path:
    configured = os.environ.get(CHART_CACHE_VARIABLE, "").strip()
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "gitops-tools" / "charts"


def render_environments(environments: list[Environment], workspace: Path, progress=None, workers: int = 1) -> None:
    """Give every environment its `releases`: each HelmRelease among its objects, with what it installs."""
    jobs = []
    once = _Once()  # chart fetches and renders this call shares between its environments
    for environment in environments:
        objects = environment.objects
        context = _Context(environment, objects, workspace, once)
        environment.releases = [HelmReleaseRender(m) for m in objects if m.group_kind == HELM_RELEASE]
        jobs += [(context, release) for release in environment.releases]
    if not jobs:
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        rendered = list(pool.map(lambda job: _render(*job), jobs))
    for (context, _), release in zip(jobs, rendered, strict=True):
        if progress and release.objects:
            name = context.environment.name
            progress(f"{name}/HelmRelease {release.name}: {release.chart} -> {len(release.objects)} objects")


def failures(environment: Environment) -> list[str]:
    """One line per HelmRelease of the environment that fails on the cluster."""
    return [
        f"{r.manifest.file}: HelmRelease {r.manifest.namespace or 'default'}/{r.name}: {r.error}"
        for r in environment.releases
        if r.error
    ]


def notes(environment: Environment) -> list[str]:
    """One line per HelmRelease whose objects are not all known here."""
    return [f"{environment.name}: HelmRelease {r.name}: {r.note}" for r in environment.releases if r.note]


class _Once:
    """Results by key, each computed once per run even when asked for by several threads at once."""

    def __init__(self):
        self._lock = threading.Lock()
        self._futures: dict[str, Future] = {}

    def get(self, key: str, compute):
        with self._lock:
            future = self._futures.get(key)
            owner = future is None
            if owner:
                future = self._futures[key] = Future()
        if owner:
            try:
                future.set_result(compute())
            except BaseException as error:
                future.set_exception(error)
        return future.result()


class _Context:
    """One environment as helm-controller and source-controller see it: its sources, ConfigMaps, Secrets."""

    def __init__(self, environment: Environment, objects: list[Manifest], workspace: Path, once: _Once):
        self.environment = environment
        self.workspace = workspace
        self.once = once
        self.index = {(m.kind, m.namespace or "default", m.name): m for m in objects if _indexed(m)}
        self.sources = Sources(objects)  # what ArtifactGenerators make, too
        self.kubernetes_version = "v" + kubernetes_version_of(environment.cluster_config)[0] + ".0"
        self.api_versions = api_versions(objects)
        self.cluster_scoped = CLUSTER_SCOPED | cluster_scoped_kinds(objects)
        # chart archive -> the build metadata helm-controller appends to its version (an OCIRepository's digest)
        self.version_metadata: dict[str, str] = {}


def _indexed(manifest: Manifest) -> bool:
    return manifest.group == _SOURCE_GROUP or (
        manifest.api_version == "v1" and manifest.kind in ("ConfigMap", "Secret")
    )


def _render(context: _Context, release: HelmReleaseRender) -> HelmReleaseRender:
    doc = release.manifest.doc
    namespace = release.manifest.namespace or "default"
    notes: list[str] = []
    try:
        chart, shown, why = _chart(context, doc, namespace)
        if chart is None:
            release.note = f"{why}; what it installs is not rendered or checked"
            return release
        release.chart = shown
        doc, sources = _values_from(context, doc, namespace, notes)
        documents = _install(context, doc, chart, sources, release)
    except _Fails as failure:
        release.error = str(failure)
        return release
    except _Unknown as unknown:
        release.note, release.retry = f"{unknown}; what it installs is not rendered or checked", unknown.retry
        return release
    spec = mapping(doc, "spec")
    target = str(spec.get("targetNamespace") or namespace)
    objects = from_documents(documents, release.manifest.file)
    for manifest in objects:
        manifest.env, manifest.source = context.environment.name, f"HelmRelease {release.name}"
        metadata = manifest.doc.setdefault("metadata", {})
        if (
            isinstance(metadata, dict)
            and not metadata.get("namespace")
            and manifest.group_kind not in context.cluster_scoped
        ):
            metadata["namespace"] = target  # Helm installs it in the release's namespace
    release.objects = objects
    release.note = "; ".join(notes)
    return release


class _Fails(Exception):
    """What makes the HelmRelease fail on the cluster."""


class _Unknown(Exception):
    """Why a chart is not known here; `retry`: a later run may get it (its repository could not be reached)."""

    def __init__(self, why: str, retry: bool = False):
        super().__init__(why)
        self.retry = retry


def _chart(context: _Context, doc: dict, namespace: str) -> tuple[str | None, str, str]:
    """(the chart's archive or folder, "name version", why there is none)."""
    spec = mapping(doc, "spec")
    reference = mapping(spec, "chartRef")
    if reference:
        kind, name = str(reference.get("kind", "")), str(reference.get("name", ""))
        where = str(reference.get("namespace") or namespace)
        source = context.index.get((kind, where, name))
        if kind == EXTERNAL_ARTIFACT and (source is not None or context.sources.maker(where, name)):
            # helm-controller v1.6.4 reads one (api v2 reference_types.go); source-watcher makes it on the cluster.
            return None, "", f"its chartRef ExternalArtifact {where}/{name} holds a chart this render does not make"
        if source is None:
            return None, "", f"its chartRef {kind} {where}/{name} is not in the repository"
        if kind == "HelmChart":
            return _chart_from_spec(context, mapping(source.doc, "spec"), where)
        if kind != "OCIRepository":
            return None, "", f"its chartRef kind {kind} is not one helm-controller reads"
        source_spec = mapping(source.doc, "spec")
        ref = mapping(source_spec, "ref")
        request = {
            "kind": "OCIRepository",
            "url": str(source_spec.get("url", "")),
            "insecure": source_spec.get("insecure") is True,
            "version": str(ref.get("semver") or ref.get("tag") or "latest"),
            "digest": str(ref.get("digest") or ""),
            "timeout": _seconds(source_spec.get("timeout")),
            "shownName": f"{where}/{name}",
        }
        path, shown, digest = _fetch(context, request, f"OCIRepository {where}/{name}")
        context.version_metadata[path] = digest_metadata(digest)
        return path, shown, ""
    return _chart_from_spec(context, mapping(mapping(spec, "chart"), "spec"), namespace)


def digest_metadata(digest: str) -> str:
    """What helm-controller v1.6.4 appends to the version of a chart from an OCIRepository before templating
    (internal/controller/helmrelease_controller.go, mutateChartWithSourceRevision and extractDigestSubString): the
    first 12 hex digits of the artifact's digest, as semver build metadata ("" for a digest it would refuse)."""
    _, colon, hex_digits = digest.partition(":")
    return hex_digits[:12] if colon and len(hex_digits) >= 12 else ""


def _chart_from_spec(context: _Context, chart: dict, namespace: str) -> tuple[str | None, str, str]:
    """A chart named by a HelmRelease's spec.chart.spec (or a HelmChart's spec) in its source."""
    source_ref = mapping(chart, "sourceRef")
    kind, name = str(source_ref.get("kind", "")), str(source_ref.get("name", ""))
    where = str(source_ref.get("namespace") or namespace)
    chart_name, version = str(chart.get("chart", "")), str(chart.get("version") or "*")
    if not chart_name:
        raise _Fails("its chart names no chart")
    source = context.index.get((kind, where, name))
    if kind == "GitRepository" and (where, name) == _BOOTSTRAP:
        return _git_chart(context.workspace, chart_name, where, name)  # flux bootstrap makes it
    if source is None:
        return None, "", f"its chart source {kind} {where}/{name} is not in the repository"
    source_spec = mapping(source.doc, "spec")
    if sequence(chart, "valuesFiles"):
        raise _Fails("spec.chart.spec.valuesFiles is not rendered here; move those values into spec.values")
    if kind == "HelmRepository":
        request = {
            "kind": "HelmRepository",
            "url": str(source_spec.get("url", "")),
            "oci": source_spec.get("type") == "oci",
            "insecure": source_spec.get("insecure") is True,
            "name": chart_name,
            "version": "" if version == "*" else version,
            "timeout": _seconds(source_spec.get("timeout")),
            "shownName": f"{where}/{name}",
        }
        path, shown, _ = _fetch(context, request, f"HelmRepository {where}/{name}")
        return path, shown, ""
    if kind == "GitRepository":
        folder = _git_folder(source, where, name)
        if folder is None:
            raise _Unknown(f"its chart source GitRepository {where}/{name} is not in the chart cache (offline)")
        return _git_chart(folder, chart_name, where, name)
    return None, "", f"its chart source {kind} {where}/{name} is not fetched here"


def _git_chart(folder: Path, chart_name: str, namespace: str, name: str) -> tuple[str, str, str]:
    chart_dir = Path(os.path.normpath(folder / chart_name))
    if not chart_dir.is_relative_to(folder) or not (chart_dir / "Chart.yaml").is_file():
        raise _Fails(f"chart path {chart_name!r} is not a chart in GitRepository {namespace}/{name}")
    return str(chart_dir), f"{chart_name} from GitRepository {namespace}/{name}", ""


def _fetch(context: _Context, request: dict, source: str) -> tuple[str | None, str, str]:
    request = {**request, "cache": str(chart_cache()), "offline": offline()}
    key = "chart " + json.dumps(request, sort_keys=True)
    reply = context.once.get(key, lambda: helper.ask({"op": "chart", "chart": request}, source))
    if "error" in reply:
        raise _Fails(helper.masked_error(str(reply["error"])))
    fetched = reply.get("fetched") or {}
    if fetched.get("missing"):
        raise _Unknown(
            f"its chart from {source} is not in the chart cache ({fetched['missing']})",
            retry=fetched["missing"] != "offline",
        )
    name = request.get("name") or request["url"].rstrip("/").rsplit("/", 1)[-1]
    return str(fetched["path"]), f"{name} {fetched.get('version', '')}".strip(), str(fetched.get("digest") or "")


def _git_folder(source: Manifest, namespace: str, name: str) -> Path | None:
    """A shallow clone of another GitRepository at its ref, in the chart cache (None when offline and not
    there)."""
    spec = mapping(source.doc, "spec")
    url, ref = str(spec.get("url", "")), mapping(spec, "ref")
    branch = str(ref.get("tag") or ref.get("branch") or "")
    target = chart_cache() / (
        "git-" + hashlib.sha256(f"{url}\0{json.dumps(ref, sort_keys=True)}".encode()).hexdigest()[:32]
    )
    if (target / ".git").is_dir():
        return target
    if offline():
        return None
    command = ["git", "clone", "--quiet", "--depth", "1", *(["--branch", branch] if branch else []), url, str(target)]
    try:
        subprocess.run(command, capture_output=True, text=True, timeout=_seconds(spec.get("timeout")), check=True)
    except subprocess.TimeoutExpired:
        raise _Fails(f"GitRepository {namespace}/{name}: cloning {url} timed out") from None
    except (OSError, subprocess.CalledProcessError) as error:
        lines = str(getattr(error, "stderr", "") or error).strip().splitlines() or ["git clone failed"]
        raise _Fails(f"GitRepository {namespace}/{name}: {helper.masked_error(lines[-1])}") from None
    return target


def _seconds(value) -> float:
    """A Go duration ("60s", "1m30s") in seconds; the source-controller default when unset or unreadable."""
    parts = _DURATION.findall(str(value or ""))
    if not parts or "".join(n + u for n, u in parts) != str(value):
        return _DEFAULT_TIMEOUT
    return sum(float(number) * _SECONDS[unit] for number, unit in parts)


def _values_from(context: _Context, doc: dict, namespace: str, notes: list[str]) -> tuple[dict, list[dict]]:
    """The HelmRelease with only the valuesFrom references whose objects the environment holds (or that
    are optional), and those objects as the API server stores them."""
    spec = mapping(doc, "spec")
    kept, sources = [], []
    for reference in sequence(spec, "valuesFrom"):
        if not isinstance(reference, dict):
            continue
        kind, name = str(reference.get("kind", "")), str(reference.get("name", ""))
        manifest = context.index.get((kind, namespace, name))
        if manifest is None:
            if reference.get("optional") is not True:
                notes.append(f"valuesFrom {kind} {namespace}/{name} is not in the repository, rendered without it")
            continue
        stored = _as_stored(manifest)
        if stored is None:
            notes.append(f"valuesFrom {kind} {namespace}/{name} is encrypted or not base64, rendered without it")
            continue
        kept.append(reference)
        sources.append(stored)
    if kept == sequence(spec, "valuesFrom"):
        return doc, sources
    changed = copy.deepcopy(doc)
    changed["spec"]["valuesFrom"] = kept
    return changed, sources


def _as_stored(manifest: Manifest) -> dict | None:
    """A ConfigMap or Secret as the API server stores it, its Secret values registered for masking; None for one
    whose values are not known offline."""
    values, why = stored_values(manifest)
    if why:
        return None
    doc = {
        "apiVersion": "v1",
        "kind": manifest.kind,
        "metadata": {"name": manifest.name, "namespace": manifest.namespace},
    }
    if manifest.kind == "ConfigMap":
        doc["data"] = values
        return doc
    for value in values.values():
        credentials.add_substituted_secrets([value, *_leaves(value)])
    doc["data"] = {key: base64.b64encode(value.encode()).decode() for key, value in values.items()}
    return doc


def _leaves(text: str) -> list[str]:
    """Every string and number in a values document, each of which may reach a chart's objects alone."""
    try:
        loaded = yaml_limits.load(text)
    except yaml.YAMLError:
        return []
    found, stack = [], [loaded]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
            found.append(str(value))
    return found


def _install(context: _Context, doc: dict, chart: str, sources: list[dict], release: HelmReleaseRender) -> list:
    """The documents of the chart's objects as helm-controller installs them, rendered once per run for the
    same inputs (environments often share a release) and kept in the render cache by everything they depend on."""
    request = {
        "op": "helm",
        "release": doc,
        "chartPath": chart,
        "chartVersionMetadata": context.version_metadata.get(chart, ""),
        "sources": sources,
        "kubeVersion": context.kubernetes_version,
        "apiVersions": context.api_versions,
    }
    identity = {"helm": {**request, "chartPath": _content_digest(Path(chart))}, "helper": helper.builder()}
    key = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()

    def run() -> str:
        reply = helper.ask(request, f"HelmRelease {release.name}")
        if "error" in reply:
            raise _Fails(helper.masked_error(str(reply["error"])))
        return json.dumps(reply.get("documents") or [], separators=(",", ":"))

    cache = render_cache.shared()
    text = context.once.get(key, run if cache is None else lambda: cache.get_or_build(key, run))
    return json.loads(text)


def _content_digest(path: Path) -> str:
    """sha256 of a chart archive, or of every file of a chart folder with its name."""
    digest = hashlib.sha256()
    if path.is_file():
        digest.update(path.read_bytes())
        return digest.hexdigest()
    for file in sorted(p for p in path.rglob("*") if p.is_file() and not p.is_symlink()):
        digest.update(str(file.relative_to(path)).encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()


def cache_identity() -> str:
    """What this run's releases would be rendered from, for validate's results cache: whether the network
    may be used, and which charts the cache has resolved (a chart fetched since changes it)."""
    digest = hashlib.sha256(f"offline={offline()}\0".encode())
    folder = chart_cache()
    for record in sorted(folder.glob("resolved-*.json")) if folder.is_dir() else ():
        try:
            digest.update(record.name.encode() + b"\0" + record.read_bytes() + b"\0")
        except OSError:
            continue
    return digest.hexdigest()


def check(environment: Environment) -> None:
    """Refuse (one line) an environment one of whose HelmReleases fails on the cluster."""
    failed = failures(environment)
    if failed:
        raise InputError(failed[0])
