"""Cluster Autoscaler over eksctl node groups: which Auto Scaling groups an autoscaler of the environment
discovers, and the node it builds for a group that has none.

From kubernetes/autoscaler at cluster-autoscaler-1.34.5 (cloudprovider/aws): aws_manager.go
(parseASGAutoDiscoverySpec, buildNodeFromTemplate, extractLabelsFromAsg, extractTaintsFromAsg,
extractAllocatableResourcesFromAsg) and aws_wrapper.go (getManagedNodegroupInfo); its chart at
cluster-autoscaler-chart-9.59.0 (values.yaml autoDiscovery, templates/deployment.yaml); and from eksctl v0.230.0,
what reaches an Auto Scaling group's tags (pkg/cfn/builder/nodegroup.go addResourcesForNodeGroup and
GenerateClusterAutoscalerTags, pkg/cfn/manager/nodegroup.go propagateManagedNodeGroupTagsToASGTask).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .fields import mapping, quantity, sequence
from .nodes import NODE_TEMPLATE_TAG, NodeGroup, Taint, node_groups
from .placement import chart_named
from .reservations import Purchase

ENABLED_TAG = "k8s.io/cluster-autoscaler/enabled"
CLUSTER_TAG = "k8s.io/cluster-autoscaler/{cluster}"
# The chart's autoDiscovery.tags, rendered through `tpl` with autoDiscovery.clusterName.
_CHART_CLUSTER_NAME = "{{ .Values.autoDiscovery.clusterName }}"
CHART_DISCOVERY_TAGS = (ENABLED_TAG, f"k8s.io/cluster-autoscaler/{_CHART_CLUSTER_NAME}")
_MARKER = "cluster-autoscaler"
# extractTaintsFromAsg takes a taint tag only when its value ends in an effect; it then splits at the first ":".
_TAINT_VALUE = re.compile(r"(.*):(?:NoSchedule|NoExecute|PreferNoSchedule)")
# eksctl puts these labels on every node group (v0.230.0, pkg/apis/eksctl.io/v1alpha5/defaults.go
# setDefaultNodeLabels), so EKS's DescribeNodegroup and propagateASGTags both carry them.
_EKSCTL_LABELS = ("alpha.eksctl.io/cluster-name", "alpha.eksctl.io/nodegroup-name")
# eksctl's autoScaler policy (pkg/cfn/builder/statement.go autoScalerStatements) includes this.
DESCRIBE_NODEGROUP = "eks:DescribeNodegroup"


@dataclass
class Autoscaler:
    """A Cluster Autoscaler for AWS among the environment's objects."""

    manifest: object
    discovery: list[dict[str, str]]  # each --node-group-auto-discovery spec: tag -> value ("" for any value)

    def discovers(self, tags: dict[str, str]) -> bool:
        return any(all(k in tags and (not v or tags[k] == v) for k, v in spec.items()) for spec in self.discovery)


def _spec(tags: list[str]) -> dict[str, str]:
    return {key: value for key, _, value in (str(t).partition("=") for t in tags)}


def _from_arguments(argv: list[str]) -> list[dict[str, str]]:
    """The discovery specs of the autoscaler's command line."""
    flags, index = [], 0
    while index < len(argv):
        name, equals, value = argv[index].partition("=")
        if not equals and name.startswith("--") and index + 1 < len(argv) and not argv[index + 1].startswith("-"):
            value, index = argv[index + 1], index + 1
        flags.append((name.lstrip("-"), value))
        index += 1
    if any(name == "cloud-provider" and value != "aws" for name, value in flags):
        return []
    specs = []
    for name, value in flags:
        kind, _, param = value.partition(":")
        key, _, tags = param.partition("=")
        if name == "node-group-auto-discovery" and kind == "asg" and key == "tag" and tags:
            specs.append(_spec(tags.split(",")))
    return specs


def _from_chart_values(release) -> list[dict[str, str]]:
    """What the chart's Deployment would be given, from the HelmRelease's inline values."""
    values = mapping(release.doc, "spec", "values")
    if str(values.get("cloudProvider", "aws")) != "aws":
        return []
    discovery = mapping(values, "autoDiscovery")
    cluster = str(discovery.get("clusterName") or "")
    if not cluster:
        return []
    tags = [str(t).replace(_CHART_CLUSTER_NAME, cluster) for t in sequence(discovery, "tags") or CHART_DISCOVERY_TAGS]
    if any("{{" in t or "${" in t for t in [cluster, *tags]):
        return []
    return [_spec(tags)]


def autoscalers(scope) -> list[Autoscaler]:
    """The Cluster Autoscalers the scope holds: containers running it (a rendered chart, or plain manifests),
    and HelmReleases of its chart that are not rendered here (read from their inline values)."""
    found = []
    for template in scope.pod_templates:
        for container in template.containers:
            if _MARKER in str(container.spec.get("image", "")) or any(_MARKER in a for a in container.argv[:1]):
                found.append(Autoscaler(template.owner, _from_arguments(container.argv)))
    for release in scope.of("HelmRelease"):
        if chart_named(release, (_MARKER,)) and not _rendered(scope, release):
            found.append(Autoscaler(release, _from_chart_values(release)))
    return found


def _rendered(scope, release) -> bool:
    return any(r.manifest is release and r.objects for r in scope.releases)


def cluster_name(cluster_config: dict) -> str:
    return str(mapping(cluster_config, "metadata").get("name", ""))


def _declared_labels(group: NodeGroup, cluster: str) -> dict[str, str]:
    labels = {str(k): str(v) for k, v in mapping(group.doc, "labels").items()}
    return {_EKSCTL_LABELS[0]: cluster, _EKSCTL_LABELS[1]: group.name, **labels}


def _group_tags(group: NodeGroup) -> dict[str, str]:
    return {
        str(k): "" if v is None else str(v).lower() if isinstance(v, bool) else str(v)
        for k, v in mapping(group.doc, "tags").items()
    }


def asg_tags(group: NodeGroup, cluster: str) -> dict[str, str]:
    """The tags of the group's Auto Scaling group. EKS tags a managed group's for Cluster Autoscaler's discovery
    (and with eks:cluster-name, eks:nodegroup-name) but copies none of the group's own; eksctl's
    propagateASGTags copies its labels, taints (the value only) and tags there. A self-managed group's carries
    the group's tags (CloudFormation stack tags), and the discovery tags when iam.withAddonPolicies.autoScaler."""
    own = _group_tags(group)
    propagated = {}
    if group.doc.get("propagateASGTags") is True:
        propagated.update({f"{NODE_TEMPLATE_TAG}/label/{k}": v for k, v in _declared_labels(group, cluster).items()})
        propagated.update({f"{NODE_TEMPLATE_TAG}/taint/{t.key}": t.value for t in group.taints})
        propagated.update(own)
    discovery = {ENABLED_TAG: "true", CLUSTER_TAG.format(cluster=cluster): "owned"}
    if group.managed:
        return {**discovery, "eks:cluster-name": cluster, "eks:nodegroup-name": group.name, **propagated}
    tags = {**own, f"kubernetes.io/cluster/{cluster}": "owned", **propagated}
    if mapping(group.doc, "iam", "withAddonPolicies").get("autoScaler") is True:
        tags.update(discovery)
    return tags


def chart_default_discovery(cluster: str) -> dict[str, str]:
    return {ENABLED_TAG: "", CLUSTER_TAG.format(cluster=cluster): ""}


def _grants_describe(policy: dict) -> bool:
    """An inline IAM policy document with a statement allowing eks:DescribeNodegroup. A statement that is no
    mapping, or an Action neither a string nor a list, allows nothing here."""
    for statement in sequence(policy, "Statement") or [mapping(policy, "Statement")]:
        if not isinstance(statement, dict):
            continue
        actions = statement.get("Action")
        actions = [actions] if isinstance(actions, str) else actions if isinstance(actions, list) else []
        if statement.get("Effect") == "Allow" and any(a in (DESCRIBE_NODEGROUP, "eks:*", "*") for a in actions):
            return True
    return False


def _autoscaler_identities(cluster_config: dict):
    """(IAM policy holder, its inline policy) of every service account the ClusterConfig names for an autoscaler."""
    iam = mapping(cluster_config, "iam")
    for association in sequence(iam, "podIdentityAssociations"):
        if isinstance(association, dict) and "autoscaler" in str(association.get("serviceAccountName", "")):
            yield association, mapping(association, "permissionPolicy")
    for account in sequence(iam, "serviceAccounts"):
        if isinstance(account, dict) and "autoscaler" in str(mapping(account, "metadata").get("name", "")):
            yield account, mapping(account, "attachPolicy")


def reads_node_groups(cluster_config: dict) -> bool:
    """Whether the ClusterConfig lets a Cluster Autoscaler call eks:DescribeNodegroup: eksctl's autoScaler policy
    (a Pod Identity association, an IRSA service account, or a node group's addon policy) or an inline statement
    naming it. Policy ARNs cannot be read here and do not count."""
    for holder, policy in _autoscaler_identities(cluster_config):
        if mapping(holder, "wellKnownPolicies").get("autoScaler") is True or _grants_describe(policy):
            return True
    return any(
        mapping(group.doc, "iam", "withAddonPolicies").get("autoScaler") is True
        for group in node_groups(cluster_config)
    )


def intends_autoscaler(cluster_config: dict) -> bool:
    """Whether the ClusterConfig prepares a Cluster Autoscaler: an IAM identity for its service account, or a node
    group with eksctl's autoScaler addon policy (`--asg-access`)."""
    return any(True for _ in _autoscaler_identities(cluster_config)) or any(
        mapping(group.doc, "iam", "withAddonPolicies").get("autoScaler") is True
        for group in node_groups(cluster_config)
    )


@dataclass
class TemplateNode:
    """The node Cluster Autoscaler imagines for a group at 0 nodes (it has no real one to copy)."""

    labels: dict[str, str]
    taints: list[Taint]
    resources: dict[str, float]  # extended resources from node-template/resources tags


def _resources(tags: dict[str, str]) -> dict[str, float]:
    prefix = f"{NODE_TEMPLATE_TAG}/resources/"
    found = {}
    for key, value in tags.items():
        amount = quantity(value) if key.startswith(prefix) else None
        if amount is not None:
            found[key.removeprefix(prefix)] = amount
    return found


def template_node(group: NodeGroup, cluster_config: dict, reads: bool) -> TemplateNode:
    """buildNodeFromTemplate: generic labels from the instance type and zone, then what the Auto Scaling group's
    tags say; for a managed group whose autoscaler may call DescribeNodegroup, also the group's labels, taints
    (those with a value) and its tags' resources as EKS returns them (tag values win over EKS's labels)."""
    cluster = cluster_name(cluster_config)
    region = str(mapping(cluster_config, "metadata").get("region", ""))
    tags = asg_tags(group, cluster)
    generic = {
        key: group.labels[key]
        for key in ("kubernetes.io/arch", "node.kubernetes.io/instance-type", "topology.kubernetes.io/zone")
        if key in group.labels
    }
    generic.update({"kubernetes.io/os": "linux", "topology.kubernetes.io/region": region})
    label_prefix = f"{NODE_TEMPLATE_TAG}/label/"
    from_tags = {k.removeprefix(label_prefix): v for k, v in tags.items() if k.startswith(label_prefix)}
    from_tags.update({k.removeprefix("eks:"): v for k, v in tags.items() if k.startswith("eks:")})
    taints, resources, api_labels = [], _resources(tags), {}
    for key, value in tags.items():
        if key.startswith(f"{NODE_TEMPLATE_TAG}/taint/") and _TAINT_VALUE.search(value):
            taint_value, _, effect = value.partition(":")
            taints.append(Taint(key.removeprefix(f"{NODE_TEMPLATE_TAG}/taint/"), taint_value, effect))
    if group.managed and reads:
        purchase = Purchase.of(group)
        capacity = "CAPACITY_BLOCK" if purchase.block else "SPOT" if purchase.spot else "ON_DEMAND"
        api_labels = {"eks.amazonaws.com/capacityType": capacity, "eks.amazonaws.com/nodegroup": group.name}
        api_labels.update(_declared_labels(group, cluster))
        taints += [t for t in group.taints if t.value]
        resources.update(_resources(_group_tags(group)))
    return TemplateNode({**generic, **api_labels, **from_tags}, taints, resources)


def min_size(group: NodeGroup) -> int | None:
    """The minSize eksctl gives the group: its own, else desiredCapacity, else 2 (validation.go
    ValidateManagedNodeGroup, pkg/cfn/builder/nodegroup.go)."""
    for key in ("minSize", "desiredCapacity"):
        value = group.doc.get(key)
        if key in group.doc:
            return value if isinstance(value, int) and not isinstance(value, bool) else None
    return 2


def desired_size(group: NodeGroup) -> int | None:
    """The desiredCapacity eksctl gives the group: its own, else its minSize."""
    if "desiredCapacity" in group.doc:
        value = group.doc["desiredCapacity"]
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    return min_size(group)
