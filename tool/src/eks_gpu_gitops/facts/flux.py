"""Flux v2.9.5, the release the template installs (Makefile FLUX_VERSION): its controllers, and the API version
each of its kinds is served at.

From fluxcd/flux2 v2.9.5 (the Go module the pinned flux binary is built from):
- manifests/bases/<controller>/kustomization.yaml name each controller's release (go.mod pins the same
  releases of their api modules);
- cmd/flux/migrate.go, flux27LatestAPIVersions (used for 2.7, 2.8 and 2.9): the version `flux migrate -f`
  moves each kind to, and it moves every other version of a kind it lists;
- each controller's api module at its release marks that version +kubebuilder:storageversion (or has no
  other) and every older one +kubebuilder:skipversion, which leaves it out of the CRD: the API server serves
  the kind at that one version and refuses any other ("no matches for kind"). No version is served but
  deprecated at this release (source-controller v1.7.0 still served v1beta2 with a deprecation warning).
"""

from __future__ import annotations

FLUX_VERSION = "v2.9.5"

# manifests/bases/*/kustomization.yaml at v2.9.5.
CONTROLLERS = {
    "source-controller": "v1.9.5",
    "kustomize-controller": "v1.9.5",
    "helm-controller": "v1.6.4",
    "notification-controller": "v1.9.4",
    "image-reflector-controller": "v1.2.5",
    "image-automation-controller": "v1.2.5",
    "source-watcher": "v2.2.4",
}

# (group, kind) -> the one version Flux v2.9.5's CRDs serve, the one `flux migrate` moves the kind to.
SERVED = {
    ("source.toolkit.fluxcd.io", "GitRepository"): "v1",
    ("source.toolkit.fluxcd.io", "OCIRepository"): "v1",
    ("source.toolkit.fluxcd.io", "Bucket"): "v1",
    ("source.toolkit.fluxcd.io", "HelmRepository"): "v1",
    ("source.toolkit.fluxcd.io", "HelmChart"): "v1",
    ("source.toolkit.fluxcd.io", "ExternalArtifact"): "v1",
    ("kustomize.toolkit.fluxcd.io", "Kustomization"): "v1",
    ("helm.toolkit.fluxcd.io", "HelmRelease"): "v2",
    ("notification.toolkit.fluxcd.io", "Receiver"): "v1",
    ("notification.toolkit.fluxcd.io", "Alert"): "v1beta3",
    ("notification.toolkit.fluxcd.io", "Provider"): "v1beta3",
    ("image.toolkit.fluxcd.io", "ImageRepository"): "v1",
    ("image.toolkit.fluxcd.io", "ImagePolicy"): "v1",
    ("image.toolkit.fluxcd.io", "ImageUpdateAutomation"): "v1",
    ("source.extensions.fluxcd.io", "ArtifactGenerator"): "v1beta1",
}

GROUPS = frozenset(group for group, _ in SERVED)


def migration_target(group: str, kind: str) -> str:
    """The apiVersion `flux migrate` (v2.9.5) moves a Flux kind to, or "" for a kind it does not know."""
    version = SERVED.get((group, kind))
    return f"{group}/{version}" if version else ""
