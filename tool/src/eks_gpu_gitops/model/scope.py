"""One environment as a whole: what rules read."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

from .fields import mapping
from .manifest import FluxKustomization, HelmReleaseRender, Manifest
from .nodes import NodeGroup, node_groups, selects, untolerated
from .pods import PodTemplate, pod_templates

PRODUCTION_NAMES = ("prod", "production")


def is_production(env: str) -> bool:
    """Whether an environment's name says production: prod, production, prod-* or production-*."""
    return env in PRODUCTION_NAMES or env.startswith(tuple(f"{n}-" for n in PRODUCTION_NAMES))


@dataclass
class Scope:
    """One environment as rules see it.

    objects: everything Flux applies (the Flux entry points included), or the plain inputs.
    complete: the objects are the whole environment, so "X is absent" is a finding.
    kustomizations: the Flux entry points with what each applies (empty outside a repository).
    releases: the HelmReleases with what each installs (empty outside a repository).
    """

    env: str
    objects: list[Manifest]
    cluster_config: Manifest | None = None
    kustomizations: list[FluxKustomization] = field(default_factory=list)
    complete: bool = False
    releases: list[HelmReleaseRender] = field(default_factory=list)
    kubernetes_version: str = ""
    platform: dict = field(default_factory=dict)  # platform.yaml

    def has(self, context: str) -> bool:
        return {
            "cluster": self.cluster_config is not None,
            "environment": self.complete,
            "flux": bool(self.kustomizations),
        }[context]

    def of(self, kind: str, group: str | None = None) -> list[Manifest]:
        return [m for m in self.objects if m.kind == kind and (group is None or m.group == group)]

    @cached_property
    def pod_templates(self) -> list[PodTemplate]:
        return [t for m in self.objects for t in pod_templates(m)]

    @cached_property
    def node_groups(self) -> list[NodeGroup]:
        if self.cluster_config is None:
            return []
        return node_groups(self.cluster_config.doc)

    @cached_property
    def _target_namespaces(self) -> dict[int, str]:
        found = {}
        for kustomization in self.kustomizations:
            target = mapping(kustomization.manifest.doc, "spec").get("targetNamespace")
            if target:
                for manifest in kustomization.objects:
                    found[id(manifest)] = str(target)
        return found

    def namespace_of(self, manifest: Manifest) -> str:
        """Where a namespaced object lands: the Flux targetNamespace, its own, or default."""
        return self._target_namespaces.get(id(manifest)) or manifest.namespace or "default"

    def placement(self, template: PodTemplate) -> tuple[list[NodeGroup], list[NodeGroup]]:
        """(groups the pod's selectors admit, those of them whose taints it also tolerates)."""
        selected = [g for g in self.node_groups if selects(template, g)]
        return selected, [g for g in selected if not untolerated(template, g)]
