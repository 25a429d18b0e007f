"""The Kubernetes object model every tool reads objects through: manifests and their kinds, pod
templates and containers with their resource requests, eksctl node groups, one environment as a
whole (`Scope`), MPI launch command lines and device plugins.

Rules, diff and the generators share it, so they agree on what an object means. It imports no
other part of the tool but the facts (facts/: catalog, eks) and core/.
"""

from .fields import integer, mapping, plural, quantity, sequence
from .kinds import (
    BUILTIN_GROUPS,
    CLUSTER_CONFIG,
    CLUSTER_SCOPED,
    EFA,
    FLUX_KUSTOMIZATION,
    GPU,
    HELM_RELEASE,
    KUSTOMIZE_CONFIG_GROUP,
    LOCAL_CONFIG_ANNOTATION,
    MPIJOB,
    NAMESPACE,
    PVC,
    STORAGE_CLASS,
    removal,
)
from .manifest import (
    Environment,
    FluxKustomization,
    HelmReleaseRender,
    Manifest,
    dump,
    parse_stream,
    read_file,
    relative,
)
from .nodes import NodeGroup, Taint, node_groups, selects, tolerates, untolerated
from .pods import Container, PodTemplate, pod_templates
from .scope import Scope

__all__ = [
    "BUILTIN_GROUPS",
    "CLUSTER_CONFIG",
    "EFA",
    "FLUX_KUSTOMIZATION",
    "GPU",
    "CLUSTER_SCOPED",
    "KUSTOMIZE_CONFIG_GROUP",
    "LOCAL_CONFIG_ANNOTATION",
    "MPIJOB",
    "NAMESPACE",
    "PVC",
    "STORAGE_CLASS",
    "Container",
    "Environment",
    "FluxKustomization",
    "HELM_RELEASE",
    "HelmReleaseRender",
    "Manifest",
    "NodeGroup",
    "PodTemplate",
    "Scope",
    "Taint",
    "dump",
    "integer",
    "mapping",
    "node_groups",
    "parse_stream",
    "plural",
    "pod_templates",
    "quantity",
    "read_file",
    "relative",
    "removal",
    "selects",
    "sequence",
    "tolerates",
    "untolerated",
]
