"""Removed in this scope: an apiVersion the API server does not serve, given the CRDs the objects at hand apply
themselves (an older Flux's gotk-components.yaml, a chart's CRDs), which serve what they say."""

from __future__ import annotations

from dataclasses import dataclass

from .fields import mapping, sequence
from .kinds import BUILTIN_GROUPS, removal
from .manifest import Manifest


@dataclass(frozen=True)
class OwnCrd:
    """A CRD of a custom resource kind that the objects apply themselves (an older Flux's gotk-components.yaml, a
    chart's CRDs)."""

    manifest: Manifest
    versions: dict[str, dict]  # name -> the CRD's entry for it

    def serves(self, api_version: str) -> bool:
        return self.versions.get(api_version.rpartition("/")[2], {}).get("served") is True


def own_crds(objects: list[Manifest]) -> dict[tuple[str, str], OwnCrd]:
    """(group, kind) -> the CRD among the objects that defines that custom resource kind."""
    found = {}
    for manifest in objects:
        spec = mapping(manifest.doc, "spec")
        group, kind = str(spec.get("group", "")), str(mapping(spec, "names").get("kind", ""))
        if manifest.group_kind != ("apiextensions.k8s.io", "CustomResourceDefinition") or group in BUILTIN_GROUPS:
            continue
        versions = {str(v.get("name")): v for v in sequence(spec, "versions") if isinstance(v, dict)}
        found[(group, kind)] = OwnCrd(manifest, versions)
    return found


@dataclass(frozen=True)
class Removed:
    """An object's apiVersion its API server does not serve: removed in (a Kubernetes version, "0" for a version
    an operator dropped, "Flux v2.9.5"), what to use instead, and the objects' own CRD of the kind, if any (it
    does not serve the version either)."""

    removed_in: str
    instead: str
    crd: OwnCrd | None = None


class Removals:
    """Removed in this scope: removal(), except where the scope applies its own CRD of the kind and that CRD
    serves the version (the API server serves what the installed CRD says). The schema stage (which leaves an
    object's schema problems to removed-api) and removed-api both ask it, so the two agree."""

    def __init__(self, objects: list[Manifest], kubernetes_version: str):
        self.crds = own_crds(objects)
        self.kubernetes_version = kubernetes_version

    def of(self, manifest: Manifest) -> Removed | None:
        found = removal(manifest.api_version, manifest.kind, self.kubernetes_version)
        if found is None:
            return None
        crd = self.crds.get(manifest.group_kind)
        if crd is not None and crd.serves(manifest.api_version):
            return None
        return Removed(*found, crd)
