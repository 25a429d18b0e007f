"""Parsed manifests and what a render makes of a repository.

A render turns a repository into `Environment`s; each holds the Flux Kustomizations found in
`clusters/<env>/`, the objects each of them applies, and the eksctl ClusterConfig.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..core import yaml_limits
from ..core.errors import InputError
from .kinds import LOCAL_CONFIG_ANNOTATION
from .substitution import Substitution


@dataclass
class Manifest:
    doc: dict
    file: str  # where the object comes from, relative to the repository root
    env: str = ""  # environment name, "" outside an environment
    source: str = ""  # Flux Kustomization name, "eksctl", or "" for plain files

    @property
    def api_version(self) -> str:
        return str(self.doc.get("apiVersion", ""))

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def kind(self) -> str:
        return str(self.doc.get("kind", ""))

    @property
    def group_kind(self) -> tuple[str, str]:
        return self.group, self.kind

    @property
    def metadata(self) -> dict:
        """metadata, or {} when it is missing or not a mapping (the schema check reports that)."""
        value = self.doc.get("metadata")
        return value if isinstance(value, dict) else {}

    @property
    def name(self) -> str:
        return str(self.metadata.get("name", ""))

    @property
    def namespace(self) -> str:
        return str(self.metadata.get("namespace", "") or "")

    @property
    def resource(self) -> str:
        """kind/namespace/name, or kind/name for cluster-scoped objects."""
        return "/".join(part for part in (self.kind, self.namespace, self.name) if part)

    @property
    def annotations(self) -> dict:
        value = self.metadata.get("annotations")
        return value if isinstance(value, dict) else {}

    @property
    def labels(self) -> dict:
        value = self.metadata.get("labels")
        return value if isinstance(value, dict) else {}

    @property
    def local_config(self) -> bool:
        """Read by kustomize (a replacement's source, say) but never emitted or applied."""
        return str(self.annotations.get(LOCAL_CONFIG_ANNOTATION, "")).lower() == "true"


@dataclass
class FluxKustomization:
    manifest: Manifest
    path: str  # spec.path without "./"
    depends_on: list[str] = field(default_factory=list)
    objects: list[Manifest] = field(default_factory=list)
    rendered: bool = True  # False when spec.path does not exist (render's skip_missing)
    # What Flux's post-build substitution did to `objects` (post_build.py); None without spec.postBuild.
    substitution: Substitution | None = None
    # The ExternalArtifact it builds from, as "ExternalArtifact ns/name (ArtifactGenerator name)"; "" when it
    # builds from this repository's GitRepository (render/external_artifact.py).
    artifact: str = ""

    @property
    def name(self) -> str:
        return self.manifest.name


@dataclass
class HelmReleaseRender:
    """What one HelmRelease installs (render/helm_release.py): its chart's objects, or why they are not known."""

    manifest: Manifest  # the HelmRelease, as Flux applies it
    objects: list[Manifest] = field(default_factory=list)
    chart: str = ""  # "name version" of the chart rendered
    error: str = ""  # what makes the HelmRelease fail on the cluster
    note: str = ""  # why its objects are not rendered here (offline, a source the repository does not hold)
    retry: bool = False  # the note may not hold on a later run (a chart repository could not be reached)

    @property
    def name(self) -> str:
        return self.manifest.name


@dataclass
class Environment:
    name: str
    kustomizations: list[FluxKustomization] = field(default_factory=list)
    cluster_config: Manifest | None = None
    releases: list[HelmReleaseRender] = field(default_factory=list)
    # (namespace, name) of a Flux Kustomization that reads an ExternalArtifact the render could not make -> why.
    unmade: dict[tuple[str, str], str] = field(default_factory=dict)

    @property
    def objects(self) -> list[Manifest]:
        """Everything Flux applies in this environment, the cluster entry points and what its HelmReleases
        install included."""
        result = [k.manifest for k in self.kustomizations]
        for kustomization in self.kustomizations:
            result.extend(kustomization.objects)
        for release in self.releases:
            result.extend(release.objects)
        return result


def parse_stream(text: str, file: str, env: str = "", source: str = "") -> list[Manifest]:
    """The objects in a YAML stream; the items of a `kind: List` (or any `*List` with `items`) are objects."""
    return from_documents(load_documents(text, file), file, env, source)


def load_documents(text: str, file: str) -> list:
    """The documents of a YAML stream (alias limit checked), or a one-line error naming `file`."""
    try:
        return yaml_limits.load_all(text)
    except yaml_limits.AliasLimitError as error:
        raise InputError(f"{file}: {error}") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f":{mark.line + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise InputError(f"{file}{where}: invalid YAML: {problem}") from None


def from_documents(docs: list, file: str, env: str = "", source: str = "") -> list[Manifest]:
    """The objects of loaded documents; the items of a `kind: List` (or any `*List` with `items`) are objects."""
    manifests = []
    for doc in docs:
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise InputError(f"{file}: a YAML document is not a mapping")
        manifests.extend(Manifest(doc=item, file=file, env=env, source=source) for item in _expand_lists(doc, file))
    return manifests


def _expand_lists(doc: dict, file: str) -> list[dict]:
    """`doc`, or the objects a List holds, the way kubectl and kustomize read it: a kind ending in "List"
    with an `items` field is replaced by its items (nested Lists too); `items: null` is an empty List.
    kustomize v5.8.1 api/resource/factory.go inlineAnyEmbeddedLists."""
    kind = doc.get("kind")
    if not isinstance(kind, str) or not kind.endswith("List") or "items" not in doc:
        return [doc]
    items = doc["items"]
    if items is None:
        return []
    if not isinstance(items, list):
        raise InputError(f"{file}: {kind}: items is not a list")
    result = []
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise InputError(f"{file}: {kind}: items[{index}] is not a mapping")
        result.extend(_expand_lists(item, file))
    return result


def read_file(path: Path, root: Path, env: str = "", source: str = "") -> list[Manifest]:
    try:
        text = path.read_text()
    except OSError as error:
        raise InputError(f"{path}: cannot read: {error.strerror}") from None
    except UnicodeDecodeError:
        raise InputError(f"{path}: cannot read: not UTF-8 text") from None
    return parse_stream(text, relative(path, root), env, source)


def relative(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root.resolve()))
    except ValueError:
        return str(path)


class _PlainDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):
    """Writes a value repeated through YAML aliases in full each time, as kubectl applies it (no &id001); with
    libyaml's emitter where PyYAML has it (a chart's CRDs are large)."""

    def ignore_aliases(self, data):
        return True


def dump(manifests: list[Manifest]) -> str:
    return "".join("---\n" + yaml.dump(m.doc, Dumper=_PlainDumper, sort_keys=False) for m in manifests)
