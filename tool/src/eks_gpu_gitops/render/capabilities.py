"""What a cluster tells Helm about itself, from an environment's settings: its Kubernetes version (the eksctl
ClusterConfig's) and the API versions it serves beyond the built-in ones (the CRDs the environment installs)."""

from __future__ import annotations

from ..facts import eks
from ..model import Manifest, mapping, sequence

_CRD = ("apiextensions.k8s.io", "CustomResourceDefinition")


def kubernetes_version_of(cluster_config: Manifest | None, override: str | None = None) -> tuple[str, str]:
    """(version, where it came from)."""
    if override:
        return override, "--kubernetes-version"
    if cluster_config is None:
        return eks.DEFAULT_KUBERNETES_VERSION, "eksctl's default, as no ClusterConfig was given"
    version = str(cluster_config.metadata.get("version", "") or "")
    if version in ("", "auto"):
        return eks.DEFAULT_KUBERNETES_VERSION, "eksctl's default for metadata.version auto"
    if version == "latest":
        return eks.SUPPORTED_KUBERNETES_VERSIONS[-1], "the newest EKS version this template knows"
    return version, "the ClusterConfig"


def api_versions(objects: list[Manifest]) -> list[str]:
    """`group/version` and `group/version/Kind` of every version the environment's CRDs serve, as Helm's
    Capabilities.APIVersions lists them."""
    found = set()
    for manifest in objects:
        if manifest.group_kind != _CRD:
            continue
        spec = mapping(manifest.doc, "spec")
        group, kind = str(spec.get("group", "")), str(mapping(spec, "names").get("kind", ""))
        for version in sequence(spec, "versions"):
            if isinstance(version, dict) and version.get("served", True) and version.get("name"):
                found |= {f"{group}/{version['name']}", f"{group}/{version['name']}/{kind}"}
    return sorted(found)


def cluster_scoped_kinds(objects: list[Manifest]) -> set[tuple[str, str]]:
    """(group, kind) of the custom kinds the environment's CRDs make cluster-scoped."""
    found = set()
    for manifest in objects:
        spec = mapping(manifest.doc, "spec")
        if manifest.group_kind == _CRD and spec.get("scope") == "Cluster":
            found.add((str(spec.get("group", "")), str(mapping(spec, "names").get("kind", ""))))
    return found
