"""Kinds, resources and API versions the tools know by name."""

from __future__ import annotations

from ..facts import flux
from ..facts.eks import version_key

# (group, kind) pairs.
MPIJOB = ("kubeflow.org", "MPIJob")
FLUX_KUSTOMIZATION = ("kustomize.toolkit.fluxcd.io", "Kustomization")
HELM_RELEASE = ("helm.toolkit.fluxcd.io", "HelmRelease")
CLUSTER_CONFIG = ("eksctl.io", "ClusterConfig")
STORAGE_CLASS = ("storage.k8s.io", "StorageClass")
PVC = ("", "PersistentVolumeClaim")
NAMESPACE = ("", "Namespace")
KUSTOMIZE_CONFIG_GROUP = "kustomize.config.k8s.io"  # kustomization.yaml files: build input, never applied

# Built-in kinds that are not namespaced (`kubectl api-resources --namespaced=false` on Kubernetes 1.34): Helm
# puts every other object a chart makes without a namespace into the release's namespace.
CLUSTER_SCOPED = frozenset(
    {
        ("", "Namespace"),
        ("", "Node"),
        ("", "PersistentVolume"),
        ("", "ComponentStatus"),
        ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
        ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
        ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
        ("admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding"),
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
        ("apiregistration.k8s.io", "APIService"),
        ("certificates.k8s.io", "CertificateSigningRequest"),
        ("certificates.k8s.io", "ClusterTrustBundle"),
        ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
        ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
        ("networking.k8s.io", "IngressClass"),
        ("networking.k8s.io", "IPAddress"),
        ("networking.k8s.io", "ServiceCIDR"),
        ("node.k8s.io", "RuntimeClass"),
        ("rbac.authorization.k8s.io", "ClusterRole"),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
        ("resource.k8s.io", "DeviceClass"),
        ("resource.k8s.io", "ResourceSlice"),
        ("scheduling.k8s.io", "PriorityClass"),
        ("storage.k8s.io", "CSIDriver"),
        ("storage.k8s.io", "CSINode"),
        ("storage.k8s.io", "StorageClass"),
        ("storage.k8s.io", "VolumeAttachment"),
        ("storage.k8s.io", "VolumeAttributesClass"),
        ("storagemigration.k8s.io", "StorageVersionMigration"),
    }
)

# Extended resources.
GPU = "nvidia.com/gpu"
EFA = "vpc.amazonaws.com/efa"

# Objects kustomize reads but never emits (environment settings, for example): it drops them from
# the build output, and Flux never applies them.
LOCAL_CONFIG_ANNOTATION = "config.kubernetes.io/local-config"

# API groups served by Kubernetes itself; everything else is a custom resource.
BUILTIN_GROUPS = frozenset(
    {
        "",
        "admissionregistration.k8s.io",
        "apiextensions.k8s.io",
        "apiregistration.k8s.io",
        "apps",
        "authentication.k8s.io",
        "authorization.k8s.io",
        "autoscaling",
        "batch",
        "certificates.k8s.io",
        "coordination.k8s.io",
        "discovery.k8s.io",
        "events.k8s.io",
        "extensions",
        "flowcontrol.apiserver.k8s.io",
        "internal.apiserver.k8s.io",
        "networking.k8s.io",
        "node.k8s.io",
        "policy",
        "rbac.authorization.k8s.io",
        "resource.k8s.io",
        "scheduling.k8s.io",
        "storage.k8s.io",
        "storagemigration.k8s.io",
    }
)

# (apiVersion, kinds or None for every kind, removed in, use instead), from the Kubernetes
# deprecated API migration guide. "0" marks versions a custom resource's operator dropped.
REMOVED_APIS = (
    (
        "extensions/v1beta1",
        ("DaemonSet", "Deployment", "ReplicaSet", "NetworkPolicy", "PodSecurityPolicy"),
        "1.16",
        "apps/v1 (networking.k8s.io/v1 for NetworkPolicy)",
    ),
    ("apps/v1beta1", None, "1.16", "apps/v1"),
    ("apps/v1beta2", None, "1.16", "apps/v1"),
    ("extensions/v1beta1", ("Ingress",), "1.22", "networking.k8s.io/v1"),
    ("networking.k8s.io/v1beta1", None, "1.22", "networking.k8s.io/v1"),
    ("apiextensions.k8s.io/v1beta1", None, "1.22", "apiextensions.k8s.io/v1"),
    ("apiregistration.k8s.io/v1beta1", None, "1.22", "apiregistration.k8s.io/v1"),
    ("rbac.authorization.k8s.io/v1beta1", None, "1.22", "rbac.authorization.k8s.io/v1"),
    ("scheduling.k8s.io/v1beta1", None, "1.22", "scheduling.k8s.io/v1"),
    (
        "storage.k8s.io/v1beta1",
        ("CSIDriver", "CSINode", "StorageClass", "VolumeAttachment"),
        "1.22",
        "storage.k8s.io/v1",
    ),
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
    """(removed in, replacement) when api_version/kind is gone at kubernetes_version; for a Flux kind, ("Flux
    v2.9.5", replacement) when the pinned Flux release does not serve that version (flux_removal). Where the
    objects at hand may apply their own CRDs, ask removals.Removals instead."""
    for removed_api, kinds, removed_in, instead in REMOVED_APIS:
        if (
            removed_api == api_version
            and (kinds is None or kind in kinds)
            and version_key(removed_in) <= version_key(kubernetes_version)
        ):
            return removed_in, instead
    return flux_removal(api_version, kind)


def flux_removal(api_version: str, kind: str) -> tuple[str, str] | None:
    """("Flux v2.9.5", the apiVersion `flux migrate` moves it to) when a kind of Flux's is written at a version
    the CRDs of the pinned Flux release do not serve (facts/flux.py)."""
    group, _, version = api_version.rpartition("/")
    target = flux.migration_target(group, kind)
    if not target or target == api_version or not version:
        return None
    return f"Flux {flux.FLUX_VERSION}", target
