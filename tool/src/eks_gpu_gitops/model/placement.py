"""What the rendered context shows about the cluster's nodes, for the premises of the GPU, scheduling and
EFA rules (rules/gpus.py, scheduling.py, efa.py): whether the ClusterConfig's node groups are all the nodes
there can be, which node labels it fixes, and which device plugins serve a group without a copy in the
repository.

A rule about where pods can run claims something only where these say the context is visible; where it
is not (a cluster whose Karpenter adds nodes, a label a run-time labeller sets), the rule says nothing.
"""

from __future__ import annotations

from .fields import mapping, sequence
from .kinds import EFA, GPU
from .nodes import BLOCKING_EFFECTS, NodeGroup, Taint, tolerates
from .pods import PodTemplate
from .scope import Scope

# Node labels every node carries whose value the ClusterConfig fixes only in some cases (one zone, one
# instance type); NodeGroup.labels holds them when it does.
_NODE_WIDE_LABELS = {
    "kubernetes.io/hostname",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "topology.k8s.aws/zone-id",
}

# What labels nodes at run time with prefixed keys (feature.node.kubernetes.io/..., nvidia.com/gpu.*):
# node-feature-discovery, NVIDIA's GPU feature discovery and the GPU operator, as an image or a chart.
_LABELLERS = ("node-feature-discovery", "gpu-feature-discovery", "gpu-operator")

# The tolerations of the EFA device plugin eksctl installs with every efaEnabled group
# (eksctl v0.230.0, pkg/addons/assets/efa-device-plugin.yaml); eksctl adds none for the groups' taints
# (pkg/addons/device_plugin.go, EFADevicePlugin.SetTolerations).
EKSCTL_EFA_PLUGIN_TOLERATIONS = [
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
    {"key": "aws.amazon.com/efa", "operator": "Exists", "effect": "NoSchedule"},
]
# eksctl installs its NVIDIA device plugin for GPU groups of these AMI families only (v0.230.0,
# pkg/eks/tasks.go ClusterTasksForNodeGroups; AmazonLinux2023 is the default family), tolerating each such
# group's taint keys; Bottlerocket's NVIDIA variants run the plugin as part of the OS.
_EKSCTL_NVIDIA_FAMILIES = ("AmazonLinux2", "AmazonLinux2023")


def other_capacity(scope: Scope) -> str:
    """What can add nodes the ClusterConfig does not list ("" when nothing visible can)."""
    doc = scope.cluster_config.doc if scope.cluster_config else {}
    tags = mapping(doc, "metadata", "tags")
    karpenter_objects = [m for m in scope.objects if m.group == "karpenter.sh" or chart_named(m, ("karpenter",))]
    if doc.get("karpenter") or "karpenter.sh/discovery" in tags or karpenter_objects:
        return "Karpenter"
    if sequence(doc, "fargateProfiles"):
        return "Fargate"
    if mapping(doc, "autoModeConfig").get("enabled") is True:
        return "EKS Auto Mode"
    return ""


def chart_named(manifest, names: tuple[str, ...]) -> bool:
    """Whether the manifest is a HelmRelease of a chart (or under a release name) containing one of `names`."""
    if manifest.kind != "HelmRelease":
        return False
    spec = mapping(manifest.doc, "spec")
    charts = (str(mapping(spec, "chart", "spec").get("chart", "")), str(spec.get("releaseName", "")), manifest.name)
    return any(name in chart for chart in charts for name in names)


def eksctl_placement_group(group: NodeGroup) -> bool:
    """Whether eksctl v0.230.0 gives the efaEnabled group a cluster placement group of its own: a managed group
    without placement or capacityReservation (pkg/cfn/builder/managed_launch_template.go: "A reservation should
    already be created with a placement group"), a self-managed one without placement (pkg/cfn/builder/nodegroup.go)."""
    if not group.efa_enabled or group.doc.get("placement") is not None:
        return False
    return not group.managed or group.doc.get("capacityReservation") is None


def efa_zone_spread(group: NodeGroup) -> str | None:
    """How an efaEnabled group spreads over zones in a way eksctl or EKS refuses: the field ("availabilityZones",
    "subnets") when it lists more than one, which eksctl refuses (v0.230.0, pkg/apis/eksctl.io/v1alpha5/validation.go);
    "" when it names none and is a managed group that eksctl gives a cluster placement group, whose updates EKS then
    refuses; None otherwise."""
    if not group.efa_enabled:
        return None
    if len(group.zones) > 1 or len(group.subnets) > 1:
        return "availabilityZones" if len(group.zones) > 1 else "subnets"
    named = group.zones or group.subnets or group.doc.get("localZones")
    return "" if not named and group.managed and eksctl_placement_group(group) else None


def largest(group: NodeGroup, attribute: str) -> int | float | None:
    """The most of an instance figure over the group's types: what its biggest node can give."""
    instances = group.instances
    return max(getattr(i, attribute) for i in instances) if instances else None


def labellers_may_run(scope: Scope) -> bool:
    """Whether something may add prefixed labels to nodes at run time: always, unless the whole environment
    is visible and holds no labeller."""
    if not scope.complete:
        return True
    images = [str(c.spec.get("image", "")) for t in scope.pod_templates for c in t.containers + t.init_containers]
    if any(name in image for image in images for name in _LABELLERS):
        return True
    return any(chart_named(m, _LABELLERS) for m in scope.objects)


def _labels_set_elsewhere(group: NodeGroup) -> bool:
    """Whether the group's kubelet gets labels outside `labels` (kubelet flags, a bootstrap of its own)."""
    doc = group.doc
    if "node-labels" in mapping(doc, "kubeletExtraArgs") or doc.get("overrideBootstrapCommand"):
        return True
    return any("node-labels" in str(command) for command in sequence(doc, "preBootstrapCommands"))


# Label domains the kubelet, the cloud provider and EKS write to (eks.amazonaws.com/nodegroup-image,
# topology.k8s.aws/network-node-layer-1, ...): NodeGroup.labels holds those the ClusterConfig fixes.
_SYSTEM_DOMAINS = ("kubernetes.io", "k8s.io", "amazonaws.com", "k8s.aws")
# node-feature-discovery's domain, inside kubernetes.io: its labels exist only where it runs.
_LABELLER_DOMAINS = ("feature.node.kubernetes.io",)


def label_known(key: str, group: NodeGroup, labellers: bool) -> bool:
    """Whether the ClusterConfig fixes the value (or the absence) of node label `key` on the group's nodes."""
    if key in group.labels:
        return True
    domain = key.rpartition("/")[0]
    if key in _NODE_WIDE_LABELS or _labels_set_elsewhere(group):
        return False
    if domain.endswith(_SYSTEM_DOMAINS) and not domain.endswith(_LABELLER_DOMAINS):
        return False
    return not domain or not labellers


def required_label_keys(template: PodTemplate) -> set[str]:
    """The node label keys the pod's nodeSelector and required node affinity need to be present."""
    keys = {str(k) for k in template.node_selector}
    for term in template.required_terms:
        for expression in sequence(term, "matchExpressions"):
            if isinstance(expression, dict) and expression.get("operator") in ("In", "Exists", "Gt", "Lt"):
                keys.add(str(expression.get("key", "")))
    return keys


def unknown_label_keys(scope: Scope, template: PodTemplate, groups: list[NodeGroup]) -> list[str]:
    """The keys the pod selects on whose value some of `groups` gets from outside the ClusterConfig."""
    labellers = labellers_may_run(scope)
    return sorted({k for k in required_label_keys(template) for g in groups if not label_known(k, g, labellers)})


def builtin_plugin_serves(group: NodeGroup, resource: str) -> bool:
    """Whether a device plugin outside the repository advertises `resource` on the group's nodes: the copy
    eksctl installs when it creates the group, or the one Bottlerocket runs."""
    if resource == GPU:
        family = str(group.doc.get("amiFamily") or "AmazonLinux2023")
        return family in _EKSCTL_NVIDIA_FAMILIES or family.startswith("Bottlerocket")
    if resource == EFA:
        return group.efa_enabled and not taints_eksctl_efa_plugin_misses(group)
    return False


def taints_eksctl_efa_plugin_misses(group: NodeGroup) -> list[Taint]:
    """The group's taints that keep the EFA device plugin eksctl installs off its nodes."""
    blocking = [t for t in group.taints if t.effect in BLOCKING_EFFECTS]
    return [t for t in blocking if not tolerates(EKSCTL_EFA_PLUGIN_TOLERATIONS, t)]


def placement_known(scope: Scope, template: PodTemplate) -> bool:
    """Whether the ClusterConfig shows every node the pod can run on: nothing else adds nodes, and it fixes
    every node label the pod selects on."""
    return not other_capacity(scope) and not unknown_label_keys(scope, template, scope.node_groups)
