"""API and version rules: removed API versions, and Kubernetes versions EKS and eksctl accept."""

from __future__ import annotations

from ..facts import eks
from ..facts.eks import version_key
from ..model import Scope, mapping, removal
from .registry import Finding, category

rule = category("Removed APIs and versions")


@rule(
    "removed-api",
    "error",
    description="An object uses an API version removed at or before the cluster's Kubernetes version",
    remediation="Move the object to the replacement API version named in the message (and adapt changed fields).",
    docs="""The API server no longer serves removed versions, so Flux cannot apply the object
      (autoscaling/v2beta2 HorizontalPodAutoscaler since 1.26, policy/v1beta1 since 1.25, ...). The version
      is the environment's ClusterConfig `metadata.version`. Also covers MPIJob versions before v2beta1.""",
)
def removed_api(scope: Scope):
    for manifest in scope.objects:
        found = removal(manifest.api_version, manifest.kind, scope.kubernetes_version)
        if found:
            removed_in, instead = found
            when = (
                "no longer served by the MPI operator"
                if removed_in == "0"
                else f"removed in Kubernetes {removed_in} (this cluster runs {scope.kubernetes_version})"
            )
            yield Finding(manifest, f"{manifest.api_version} {manifest.kind} is {when}; use {instead}", ("apiVersion",))


@rule(
    "eks-version-unsupported",
    "error",
    requires=("cluster",),
    description="The ClusterConfig asks for a Kubernetes version EKS does not offer",
    remediation="Set metadata.version to a version in EKS standard or extended support "
    f"({', '.join(eks.SUPPORTED_KUBERNETES_VERSIONS)}).",
    docs="""eksctl only creates versions that EKS lists as supported; an older one fails at cluster creation
      or costs extended-support fees. A version newer than this template knows is a warning: check it with
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
    description="A node group uses Amazon Linux 2 on a Kubernetes version that has no AL2 AMI",
    remediation="Set amiFamily: AmazonLinux2023 (eksctl's default; it resolves the NVIDIA AMI for GPU types).",
    docs="""EKS publishes no Amazon Linux 2 AMIs from Kubernetes 1.33 on, and eksctl rejects such a node
      group.""",
)
def ami_family_unsupported(scope: Scope):
    version = str(mapping(scope.cluster_config.doc, "metadata").get("version", "") or "")
    if not version_key(version) or version_key(version) < (1, 33):
        return
    for group in scope.node_groups:
        if group.doc.get("amiFamily") == "AmazonLinux2":
            yield Finding(
                scope.cluster_config,
                f"{group.describe()} uses AmazonLinux2 with Kubernetes {version}",
                (*group.path, "amiFamily"),
            )
