"""Flux sources: what each Flux reference names, and which sources an environment defines.

The kinds each reference admits are the enums of the CRDs of Flux v2.9.5:
- a Kustomization's spec.sourceRef: OCIRepository, GitRepository, Bucket, ExternalArtifact (kustomize-controller
  api v1.9.5, v1/reference_types.go);
- a HelmRelease's spec.chart.spec.sourceRef: HelmRepository, GitRepository, Bucket; its spec.chartRef:
  OCIRepository, HelmChart, ExternalArtifact (helm-controller api v1.6.4, v2/reference_types.go);
- a HelmChart's spec.sourceRef: HelmRepository, GitRepository, Bucket (source-controller api v1.9.5);
- an ArtifactGenerator's spec.sources[]: Bucket, GitRepository, OCIRepository, HelmChart, ExternalArtifact
  (source-watcher api v2.2.4, v1beta1/artifactgenerator_types.go).
A reference without a namespace names an object in the namespace of the object that holds it.

A source is defined by an object of its kind in the environment, by `flux bootstrap` (its flux-system
GitRepository), or by a controller that makes it:
- source-watcher makes one ExternalArtifact per entry of an ArtifactGenerator's spec.artifacts, named by the
  entry's name, in the generator's namespace (v2.2.1 internal/controller/artifactgenerator_controller.go,
  reconcileExternalArtifact); with spec.pathPattern the name is a template whose `{capture}`s take the
  lower-cased names of the source's folders the pattern matches (artifactgenerator_pathpattern.go), so any name
  the template can give counts as made;
- helm-controller makes a HelmRelease's chart from spec.chart as a HelmChart named `<namespace>-<name>` of the
  release, in its source's namespace (api v1.6.4 v2/helmrelease_types.go, GetHelmChartName).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from .fields import mapping, sequence
from .kinds import FLUX_KUSTOMIZATION, HELM_RELEASE
from .manifest import Manifest

SOURCE_GROUP = "source.toolkit.fluxcd.io"
ARTIFACT_GENERATOR = ("source.extensions.fluxcd.io", "ArtifactGenerator")
HELM_CHART = (SOURCE_GROUP, "HelmChart")
EXTERNAL_ARTIFACT = "ExternalArtifact"
DEFAULT_NAMESPACE = "flux-system"  # where an object without a namespace is taken to be (Flux's own namespace)
# What `flux bootstrap` creates (the GitRepository of this repository), and what the Flux Operator's sync makes.
BOOTSTRAP_SOURCE = ("GitRepository", "flux-system", "flux-system")
BOOTSTRAP_SOURCES = frozenset({BOOTSTRAP_SOURCE, ("OCIRepository", "flux-system", "flux-system")})


@dataclass(frozen=True)
class Reference:
    """One source an object reads: (kind, namespace, name), and the field that names it."""

    holder: Manifest
    kind: str
    namespace: str
    name: str
    path: tuple

    @property
    def key(self) -> tuple[str, str, str]:
        return self.kind, self.namespace, self.name

    def describe(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


def _reference(holder: Manifest, ref: dict, path: tuple) -> Reference:
    namespace = str(ref.get("namespace") or holder.namespace or DEFAULT_NAMESPACE)
    return Reference(holder, str(ref.get("kind", "")), namespace, str(ref.get("name", "")), path)


def references(manifest: Manifest) -> list[Reference]:
    """The sources a Flux Kustomization, HelmRelease, HelmChart or ArtifactGenerator reads."""
    spec = mapping(manifest.doc, "spec")
    fields: list[tuple[dict, tuple]] = []
    if manifest.group_kind in (FLUX_KUSTOMIZATION, HELM_CHART):
        fields.append((mapping(spec, "sourceRef"), ("spec", "sourceRef")))
    elif manifest.group_kind == HELM_RELEASE:
        fields.append((mapping(spec, "chart", "spec", "sourceRef"), ("spec", "chart", "spec", "sourceRef")))
        fields.append((mapping(spec, "chartRef"), ("spec", "chartRef")))
    elif manifest.group_kind == ARTIFACT_GENERATOR:
        for index, source in enumerate(sequence(spec, "sources")):
            if isinstance(source, dict):
                fields.append((source, ("spec", "sources", index)))
    return [_reference(manifest, ref, path) for ref, path in fields if ref]


@dataclass(frozen=True)
class Output:
    """One spec.artifacts entry of an ArtifactGenerator: the ExternalArtifact(s) it makes."""

    generator: Manifest
    index: int
    artifact: dict

    @property
    def namespace(self) -> str:
        return self.generator.namespace or DEFAULT_NAMESPACE

    @property
    def templated(self) -> bool:
        """Whether the name is a template of spec.pathPattern, filled in from the source's folders."""
        return bool(mapping(self.generator.doc, "spec").get("pathPattern")) and "{" in str(self.artifact.get("name"))

    def makes(self, name: str) -> bool:
        template = str(self.artifact.get("name", ""))
        if not self.templated:
            return name == template
        return fnmatch.fnmatchcase(name, _glob_of_template(template))

    def sources(self) -> dict[str, Reference]:
        """The generator's sources by alias."""
        found = {}
        for reference in references(self.generator):
            source = sequence(mapping(self.generator.doc, "spec"), "sources")[reference.path[-1]]
            found[str(source.get("alias", ""))] = reference
        return found


def _glob_of_template(template: str) -> str:
    """A pathPattern name template as an fnmatch pattern: each `{capture}` any text, the rest literal."""
    glob, index = [], 0
    while index < len(template):
        if template[index] == "{" and "}" in template[index:]:
            index = template.index("}", index) + 1
            glob.append("*")
            continue
        char = template[index]
        glob.append(f"[{char}]" if char in "*?[" else char)
        index += 1
    return "".join(glob)


def outputs(objects: list[Manifest]) -> list[Output]:
    """Every spec.artifacts entry of the ArtifactGenerators among `objects`."""
    found = []
    for manifest in objects:
        if manifest.group_kind != ARTIFACT_GENERATOR:
            continue
        for index, artifact in enumerate(sequence(mapping(manifest.doc, "spec"), "artifacts")):
            if isinstance(artifact, dict) and artifact.get("name"):
                found.append(Output(manifest, index, artifact))
    return found


class Sources:
    """The sources an environment defines: its objects, bootstrap's GitRepository, and what its ArtifactGenerators
    and HelmReleases make."""

    def __init__(self, objects: list[Manifest]):
        self.defined = {(m.kind, m.namespace or DEFAULT_NAMESPACE, m.name) for m in objects} | BOOTSTRAP_SOURCES
        for manifest in objects:
            chart_source = mapping(manifest.doc, "spec", "chart", "spec", "sourceRef")
            if manifest.group_kind == HELM_RELEASE and chart_source:
                namespace = manifest.namespace or DEFAULT_NAMESPACE
                where = str(chart_source.get("namespace") or namespace)
                self.defined.add(("HelmChart", where, f"{namespace}-{manifest.name}"))
        self.outputs = outputs(objects)

    def maker(self, namespace: str, name: str) -> Output | None:
        """The ArtifactGenerator entry that makes ExternalArtifact namespace/name, if any."""
        return next((o for o in self.outputs if o.namespace == namespace and o.makes(name)), None)

    def defines(self, reference: Reference) -> bool:
        if reference.key in self.defined:
            return True
        return reference.kind == EXTERNAL_ARTIFACT and self.maker(reference.namespace, reference.name) is not None
