"""API and version rules: removed API versions (Kubernetes, the MPI operator, Flux), deprecated Flux versions, and
Kubernetes versions EKS and eksctl accept."""

from __future__ import annotations

from ..facts import eks, flux
from ..facts.eks import version_key
from ..model import Scope, mapping
from ..model.removals import Removals, own_crds
from .registry import Finding, category

rule = category("Removed APIs and versions")


@rule(
    "removed-api",
    "error",
    premise="An object's apiVersion is one its API server no longer serves: a Kubernetes API removed at or before "
    "the ClusterConfig's metadata.version (eksctl's default without one), an MPIJob version the MPI operator "
    f"dropped, or a Flux version the CRDs of Flux {flux.FLUX_VERSION} do not serve; and, for a custom resource, the "
    "environment applies no CRD of that kind that serves it.",
    consequence="api-server",
    description="An object uses an API version its API server no longer serves",
    remediation="Move the object to the replacement API version named in the message (and adapt changed fields); "
    "for Flux's kinds, `flux migrate -f <folder>` rewrites them.",
    docs=f"""The API server no longer serves removed versions, so Flux cannot apply the object, and the whole
      Kustomization that applies it fails (autoscaling/v2beta2 HorizontalPodAutoscaler since 1.26,
      policy/v1beta1 since 1.25, ...). The Kubernetes version is the environment's ClusterConfig
      `metadata.version`. Also covers MPIJob versions before v2beta1, and Flux's own kinds: Flux
      {flux.FLUX_VERSION} (the release the template installs) serves each kind at one version only, the one
      `flux migrate` moves it to ({", ".join(sorted({f"{g}/{v}" for (g, _), v in flux.SERVED.items()}))}),
      and leaves every older one out of its CRDs (fluxcd/flux2 {flux.FLUX_VERSION} cmd/flux/migrate.go; the
      controllers' api modules mark them +kubebuilder:skipversion), so `source.toolkit.fluxcd.io/v1beta2`
      GitRepository, `helm.toolkit.fluxcd.io/v2beta2` HelmRelease or `kustomize.toolkit.fluxcd.io/v1beta2`
      Kustomization get "no matches for kind". Where the environment applies the CRD of a custom resource
      itself (an older Flux's gotk-components.yaml, an MPIJob CRD), that CRD decides what is served, and for
      Flux's kinds flux-api-deprecated says what to migrate. The schema stage leaves an object this rule
      reports to it, and checks every other one (the two ask the same question, model/kinds.py Removals).""",
)
def removed_api(scope: Scope):
    removals = Removals(scope.objects, scope.kubernetes_version)
    for manifest in scope.objects:
        found = removals.of(manifest)
        if found is None:
            continue
        if found.removed_in.startswith("Flux "):
            where = (
                f"the CRD of {found.crd.manifest.file}" if found.crd is not None else f"the CRDs of {found.removed_in}"
            )
            yield Finding(
                manifest,
                f"{manifest.api_version} {manifest.kind} is not served by {where}; use {found.instead} "
                "(flux migrate moves it there)",
                ("apiVersion",),
            )
            continue
        when = (
            "no longer served by the MPI operator"
            if found.removed_in == "0"
            else f"removed in Kubernetes {found.removed_in} (this cluster runs {scope.kubernetes_version})"
        )
        yield Finding(
            manifest, f"{manifest.api_version} {manifest.kind} is {when}; use {found.instead}", ("apiVersion",)
        )


@rule(
    "flux-api-deprecated",
    "warning",
    premise="An object of one of Flux's kinds is written at a version that the environment's own CRD of the kind "
    f"(an older Flux's gotk-components.yaml) serves, and that is not the version `flux migrate` of Flux "
    f"{flux.FLUX_VERSION} moves it to.",
    consequence="risk",
    description="A Flux object uses an API version that is still served but deprecated, or that the next Flux drops",
    remediation="Run `flux migrate -f <folder>` (or set the apiVersion named in the message), then upgrade Flux.",
    docs=f"""Flux serves an older API version for a while after a newer one exists, with a deprecation warning,
      then drops it: Flux v2.7's source-controller still served `source.toolkit.fluxcd.io/v1beta2`, deprecated;
      Flux {flux.FLUX_VERSION} (the release the template installs) serves none but the latest. An object at such
      a version applies today on a cluster whose Flux CRDs the environment itself applies (an older Flux's
      gotk-components.yaml), and fails once Flux is upgraded. The target version is the one `flux migrate`
      of Flux {flux.FLUX_VERSION} moves the kind to (fluxcd/flux2 cmd/flux/migrate.go); where no CRD of the
      kind is applied here, a version Flux {flux.FLUX_VERSION} does not serve is removed-api's error
      instead.""",
)
def flux_api_deprecated(scope: Scope):
    crds = own_crds(scope.objects)
    for manifest in scope.objects:
        group, _, version = manifest.api_version.rpartition("/")
        target = flux.migration_target(group, manifest.kind)
        crd = crds.get(manifest.group_kind)
        if not target or target == manifest.api_version or crd is None or not crd.serves(manifest.api_version):
            continue  # the latest version; or not served at all (removed-api)
        entry = crd.versions[version]
        warning = str(entry.get("deprecationWarning") or "") or ("deprecated" if entry.get("deprecated") else "")
        why = f"({warning})" if warning else f"(Flux {flux.FLUX_VERSION} no longer serves it)"
        yield Finding(
            manifest,
            f"{manifest.api_version} {manifest.kind} is served here but on its way out {why}; flux migrate moves "
            f"it to {target}",
            ("apiVersion",),
        )


@rule(
    "eks-version-unsupported",
    "error",
    requires=("cluster",),
    premise="The ClusterConfig sets metadata.version to a Kubernetes version number (not auto or latest).",
    consequence="eksctl",
    description="The ClusterConfig asks for a Kubernetes version EKS does not offer",
    remediation="Set metadata.version to a version in EKS standard or extended support "
    f"({', '.join(eks.SUPPORTED_KUBERNETES_VERSIONS)}).",
    docs="""eksctl (v0.230.0 asks EKS's DescribeClusterVersions) creates only versions EKS still offers, in
      standard or extended support (facts/eks.py lists them); at an older one, creating the cluster fails. A
      version newer than this template knows is a warning only, as EKS may offer it by now: check it with
      `eksctl utils describe-cluster-versions`.""",
)
def eks_version_unsupported(scope: Scope):
    version = str(mapping(scope.cluster_config.doc, "metadata").get("version", "") or "")
    if version in ("", "auto", "latest") or not version_key(version):
        return
    supported = [version_key(v) for v in eks.SUPPORTED_KUBERNETES_VERSIONS]
    if version_key(version) < min(supported):
        yield Finding(scope.cluster_config, f"Kubernetes {version} is out of EKS support", ("metadata", "version"))
    elif version_key(version) > max(supported):
        yield Finding(
            scope.cluster_config,
            f"Kubernetes {version} is newer than the versions this template knows EKS to offer",
            ("metadata", "version"),
            severity="warning",
        )


@rule(
    "ami-family-unsupported",
    "error",
    requires=("cluster",),
    premise="The ClusterConfig's metadata.version is 1.33 or later, and a self-managed node group, or a managed one "
    "without a custom ami, sets amiFamily AmazonLinux2.",
    consequence="eksctl",
    description="A node group uses Amazon Linux 2 on a Kubernetes version that has no AL2 AMI",
    remediation="Set amiFamily: AmazonLinux2023 (eksctl's default; it resolves the NVIDIA AMI for GPU types).",
    docs="""EKS publishes no Amazon Linux 2 AMIs from Kubernetes 1.33 on, and eksctl rejects such a node
      group ("AmazonLinux2 is not supported for Kubernetes version ...": eksctl v0.230.0
      pkg/apis/eksctl.io/v1alpha5/defaults.go, AmazonLinux2EOLVersion). A managed node group with its own `ami`
      is not refused: eksctl leaves the AMI family of a custom AMI to the user.""",
)
def ami_family_unsupported(scope: Scope):
    version = str(mapping(scope.cluster_config.doc, "metadata").get("version", "") or "")
    if not version_key(version) or version_key(version) < (1, 33):
        return
    for group in scope.node_groups:
        if group.doc.get("amiFamily") == "AmazonLinux2" and not (group.managed and group.doc.get("ami")):
            yield Finding(
                scope.cluster_config,
                f"{group.describe()} uses AmazonLinux2 with Kubernetes {version}",
                (*group.path, "amiFamily"),
            )
