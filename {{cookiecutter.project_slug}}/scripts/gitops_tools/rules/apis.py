"""API and version rules: removed API versions, and Kubernetes versions EKS and eksctl accept."""

from __future__ import annotations

from .. import eks
from ..eks import version_key
from .model import Scope, mapping
from .registry import Finding, category

rule = category("Removed APIs and versions")

# (apiVersion, kinds or None for every kind, removed in, use instead), from the Kubernetes
# deprecated API migration guide. "0" marks versions a custom resource's operator dropped.
REMOVED_APIS = (
    ("extensions/v1beta1", ("DaemonSet", "Deployment", "ReplicaSet", "NetworkPolicy", "PodSecurityPolicy"), "1.16",
     "apps/v1 (networking.k8s.io/v1 for NetworkPolicy)"),
    ("apps/v1beta1", None, "1.16", "apps/v1"),
    ("apps/v1beta2", None, "1.16", "apps/v1"),
    ("extensions/v1beta1", ("Ingress",), "1.22", "networking.k8s.io/v1"),
    ("networking.k8s.io/v1beta1", None, "1.22", "networking.k8s.io/v1"),
    ("apiextensions.k8s.io/v1beta1", None, "1.22", "apiextensions.k8s.io/v1"),
    ("apiregistration.k8s.io/v1beta1", None, "1.22", "apiregistration.k8s.io/v1"),
    ("rbac.authorization.k8s.io/v1beta1", None, "1.22", "rbac.authorization.k8s.io/v1"),
    ("scheduling.k8s.io/v1beta1", None, "1.22", "scheduling.k8s.io/v1"),
    ("storage.k8s.io/v1beta1", ("CSIDriver", "CSINode", "StorageClass", "VolumeAttachment"), "1.22", "storage.k8s.io/v1"),
    ("admissionregistration.k8s.io/v1beta1", None, "1.22", "admissionregistration.k8s.io/v1"),
    ("coordination.k8s.io/v1beta1", None, "1.22", "coordination.k8s.io/v1"),
    ("certificates.k8s.io/v1beta1", None, "1.22", "certificates.k8s.io/v1"),
    ("authentication.k8s.io/v1beta1", None, "1.22", "authentication.k8s.io/v1"),
    ("authorization.k8s.io/v1beta1", None, "1.22", "authorization.k8s.io/v1"),
    ("policy/v1beta1", ("PodSecurityPolicy",), "1.25", "Pod Security Admission (namespace labels)"),
    ("policy/v1beta1", ("PodDisruptionBudget",), "1.25", "policy/v1"),
    ("batch/v1beta1", ("CronJob",), "1.25", "batch/v1"),
    ("autoscaling/v2beta1", None, "1.25", "autoscaling/v2"),
    ("discovery.k8s.io/v1beta1", None, "1.25", "discovery.k8s.io/v1"),
    ("events.k8s.io/v1beta1", None, "1.25", "events.k8s.io/v1"),
    ("node.k8s.io/v1beta1", None, "1.25", "node.k8s.io/v1"),
    ("autoscaling/v2beta2", None, "1.26", "autoscaling/v2"),
    ("flowcontrol.apiserver.k8s.io/v1beta1", None, "1.26", "flowcontrol.apiserver.k8s.io/v1"),
    ("storage.k8s.io/v1beta1", ("CSIStorageCapacity",), "1.27", "storage.k8s.io/v1"),
    ("flowcontrol.apiserver.k8s.io/v1beta2", None, "1.29", "flowcontrol.apiserver.k8s.io/v1"),
    ("flowcontrol.apiserver.k8s.io/v1beta3", None, "1.32", "flowcontrol.apiserver.k8s.io/v1"),
    ("kubeflow.org/v1alpha1", ("MPIJob",), "0", "kubeflow.org/v2beta1 (the MPI operator dropped it in v0.4.0)"),
    ("kubeflow.org/v1alpha2", ("MPIJob",), "0", "kubeflow.org/v2beta1 (the MPI operator dropped it in v0.4.0)"),
    ("kubeflow.org/v1", ("MPIJob",), "0", "kubeflow.org/v2beta1 (the MPI operator dropped it in v0.4.0)"),
)


def removal(api_version: str, kind: str, kubernetes_version: str) -> tuple[str, str] | None:
    """(removed in, replacement) when api_version/kind is gone at kubernetes_version."""
    for removed_api, kinds, removed_in, instead in REMOVED_APIS:
        if removed_api == api_version and (kinds is None or kind in kinds) \
                and version_key(removed_in) <= version_key(kubernetes_version):
            return removed_in, instead
    return None


@rule("removed-api", "error",
      description="An object uses an API version removed at or before the cluster's Kubernetes version",
      remediation="Move the object to the replacement API version named in the message (and adapt changed fields).",
      docs="""The API server no longer serves removed versions, so Flux cannot apply the object
      (autoscaling/v2beta2 HorizontalPodAutoscaler since 1.26, policy/v1beta1 since 1.25, ...). The version
      is the environment's ClusterConfig `metadata.version`. Also covers MPIJob versions before v2beta1.""")
def removed_api(scope: Scope):
    for manifest in scope.objects:
        found = removal(manifest.api_version, manifest.kind, scope.kubernetes_version)
        if found:
            removed_in, instead = found
            when = "no longer served by the MPI operator" if removed_in == "0" else \
                f"removed in Kubernetes {removed_in} (this cluster runs {scope.kubernetes_version})"
            yield Finding("removed-api", manifest, f"{manifest.api_version} {manifest.kind} is {when}; use {instead}",
                          ("apiVersion",))


@rule("eks-version-unsupported", "error", requires=("cluster",),
      description="The ClusterConfig asks for a Kubernetes version EKS does not offer",
      remediation="Set metadata.version to a version in EKS standard or extended support "
                  f"({', '.join(eks.SUPPORTED_KUBERNETES_VERSIONS)}).",
      docs="""eksctl only creates versions that EKS lists as supported; an older one fails at cluster creation
      or costs extended-support fees. A version newer than this template knows is a warning: check it with
      `eksctl utils describe-cluster-versions`.""")
def eks_version_unsupported(scope: Scope):
    version = str(mapping(scope.cluster_config.doc, "metadata").get("version", "") or "")
    if version in ("", "auto", "latest") or not version_key(version):
        return
    supported = [version_key(v) for v in eks.SUPPORTED_KUBERNETES_VERSIONS]
    if version_key(version) < min(supported):
        yield Finding("eks-version-unsupported", scope.cluster_config,
                      f"Kubernetes {version} is out of EKS support", ("metadata", "version"))
    elif version_key(version) > max(supported):
        yield Finding("eks-version-unsupported", scope.cluster_config,
                      f"Kubernetes {version} is newer than the versions this template knows EKS to offer",
                      ("metadata", "version"), severity="warning")


@rule("ami-family-unsupported", "error", requires=("cluster",),
      description="A node group uses Amazon Linux 2 on a Kubernetes version that has no AL2 AMI",
      remediation="Set amiFamily: AmazonLinux2023 (eksctl's default; it resolves the NVIDIA AMI for GPU types).",
      docs="""EKS publishes no Amazon Linux 2 AMIs from Kubernetes 1.33 on, and eksctl rejects such a node
      group.""")
def ami_family_unsupported(scope: Scope):
    version = str(mapping(scope.cluster_config.doc, "metadata").get("version", "") or "")
    if not version_key(version) or version_key(version) < (1, 33):
        return
    for group in scope.node_groups:
        if group.doc.get("amiFamily") == "AmazonLinux2":
            yield Finding("ami-family-unsupported", scope.cluster_config,
                          f"{group.describe()} uses AmazonLinux2 with Kubernetes {version}", (*group.path, "amiFamily"))
