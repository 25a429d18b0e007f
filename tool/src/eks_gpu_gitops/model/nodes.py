"""eksctl node groups as the scheduler sees their nodes: instance types, labels, taints, zones."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

from ..facts import catalog
from .fields import mapping, sequence
from .pods import PodTemplate

# Tags that tell Cluster Autoscaler what an empty group's nodes would have (kubernetes/autoscaler
# cluster-autoscaler-1.35.2, cloudprovider/aws/README.md and aws_manager.go buildNodeFromTemplate):
# <prefix>/label/<key>: value, <prefix>/taint/<key>: value:Effect, <prefix>/resources/<name>: count.
NODE_TEMPLATE_TAG = "k8s.io/cluster-autoscaler/node-template"
_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return f"{self.key}{'=' + self.value if self.value else ''}:{self.effect}"


@dataclass
class NodeGroup:
    doc: dict
    path: tuple  # ("managedNodeGroups", index) or ("nodeGroups", index)

    @property
    def name(self) -> str:
        return str(self.doc.get("name", ""))

    @property
    def managed(self) -> bool:
        return self.path[0] == "managedNodeGroups"

    @property
    def instance_types(self) -> list[str]:
        if self.doc.get("instanceType"):
            return [str(self.doc["instanceType"])]
        return [str(t) for t in sequence(self.doc, "instanceTypes")]

    @property
    def instances(self) -> list[catalog.InstanceType] | None:
        """Catalogue entries of every instance type, or None when one is unknown."""
        found = [catalog.lookup(t) for t in self.instance_types]
        return found if found and all(found) else None

    def smallest(self, attribute: str) -> int | None:
        """The least of an instance figure (gpus, efa_interfaces) over the group's types."""
        instances = self.instances
        return min(getattr(i, attribute) for i in instances) if instances else None

    @property
    def efa_enabled(self) -> bool:
        return self.doc.get("efaEnabled") is True

    @property
    def zones(self) -> list[str]:
        return [str(z) for z in sequence(self.doc, "availabilityZones")]

    @property
    def subnets(self) -> list:
        subnets = self.doc.get("subnets")
        return subnets if isinstance(subnets, list) else []

    @property
    def max_size(self) -> int | None:
        for key in ("maxSize", "desiredCapacity", "minSize"):
            if isinstance(self.doc.get(key), int):
                return self.doc[key]
        return None

    @cached_property
    def labels(self) -> dict[str, str]:
        """The node labels pods can select: the group's own plus those EKS and eksctl add."""
        labels = {
            "kubernetes.io/os": "linux",
            "alpha.eksctl.io/nodegroup-name": self.name,
            "eks.amazonaws.com/nodegroup": self.name,
            "eks.amazonaws.com/capacityType": "SPOT" if self.doc.get("spot") else "ON_DEMAND",
        }
        types = self.instance_types
        if len(types) == 1:
            labels["node.kubernetes.io/instance-type"] = labels["beta.kubernetes.io/instance-type"] = types[0]
            # Graviton families carry a "g" right after the generation digit: m7g, c6gn, g5g.
            graviton = re.match(r"^[a-z]+\d+g", types[0].split(".")[0])
            labels["kubernetes.io/arch"] = "arm64" if graviton else "amd64"
        if len(self.zones) == 1:
            labels["topology.kubernetes.io/zone"] = labels["failure-domain.beta.kubernetes.io/zone"] = self.zones[0]
        labels.update({str(k): str(v) for k, v in mapping(self.doc, "labels").items()})
        return labels

    @cached_property
    def taints(self) -> list[Taint]:
        raw = self.doc.get("taints")
        found = []
        if isinstance(raw, list):
            for taint in raw:
                if isinstance(taint, dict):
                    effect = str(taint.get("effect", ""))
                    found.append(
                        Taint(
                            str(taint.get("key", "")), str(taint.get("value", "") or ""), _EFFECTS.get(effect, effect)
                        )
                    )
        elif isinstance(raw, dict):  # unmanaged groups' old form: key: "value:Effect"
            for key, text in raw.items():
                value, _, effect = str(text).rpartition(":")
                found.append(Taint(str(key), value, _EFFECTS.get(effect, effect)))
        return found

    def describe(self) -> str:
        return f"node group {self.name} ({', '.join(self.instance_types) or 'no instance type'})"


def node_groups(cluster_config: dict) -> list[NodeGroup]:
    """The managed and unmanaged node groups of a ClusterConfig document, in order."""
    return [
        NodeGroup(group, (section, index))
        for section in ("managedNodeGroups", "nodeGroups")
        for index, group in enumerate(sequence(cluster_config, section))
        if isinstance(group, dict)
    ]


def tolerates(tolerations: list[dict], taint: Taint) -> bool:
    for toleration in tolerations:
        effect = toleration.get("effect")
        if effect and effect != taint.effect:
            continue
        operator = toleration.get("operator", "Equal")
        key = toleration.get("key")
        if not key:
            if operator == "Exists":
                return True
            continue
        if key == taint.key and (operator == "Exists" or str(toleration.get("value", "") or "") == taint.value):
            return True
    return False


def blocking_taints(group: NodeGroup, tolerations: list[dict]) -> list[Taint]:
    """The group's taints that keep a pod with `tolerations` off its nodes."""
    return [t for t in group.taints if t.effect in BLOCKING_EFFECTS and not tolerates(tolerations, t)]


def untolerated(template: PodTemplate, group: NodeGroup) -> list[Taint]:
    """The group's taints that keep the pod off its nodes, once EKS's admission added its tolerations."""
    return blocking_taints(group, template.effective_tolerations)


def _expression_matches(expression: dict, labels: dict[str, str]) -> bool:
    key = str(expression.get("key", ""))
    operator = expression.get("operator")
    values = [str(v) for v in sequence(expression, "values")]
    value = labels.get(key)
    if operator == "In":
        return value in values
    if operator == "NotIn":
        return value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and values:
        try:
            return int(value) > int(values[0]) if operator == "Gt" else int(value) < int(values[0])
        except ValueError:
            return False
    return False


def selects(template: PodTemplate, group: NodeGroup) -> bool:
    """Whether the pod's nodeSelector and required node affinity admit the group's nodes."""
    labels = group.labels
    for key, value in template.node_selector.items():
        if labels.get(str(key)) != str(value):
            return False
    terms = template.required_terms
    if terms:
        return any(
            all(_expression_matches(e, labels) for e in sequence(term, "matchExpressions") if isinstance(e, dict))
            for term in terms
            if sequence(term, "matchExpressions") or sequence(term, "matchFields")
        )
    return True
