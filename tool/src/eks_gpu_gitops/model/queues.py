"""Kueue's objects as rules read them: which queue a job names, what a ClusterQueue's flavors hold,
and which node groups a flavor stands for (kueue.x-k8s.io/v1beta2 at v0.19.2).
"""

from __future__ import annotations

from dataclasses import dataclass

from .fields import mapping, quantity, sequence
from .kinds import EFA, GPU
from .nodes import NodeGroup

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GROUP = "kueue.x-k8s.io"


def queue_name(manifest) -> str | None:
    value = mapping(manifest.doc, "metadata", "labels").get(QUEUE_LABEL)
    return str(value) if value else None


def find(scope, kind: str, name: str, namespace: str | None = None):
    for manifest in scope.of(kind, GROUP):
        if manifest.name == name and (namespace is None or scope.namespace_of(manifest) == namespace):
            return manifest
    return None


@dataclass
class FlavorQuota:
    name: str
    quota: dict[str, float]  # resource -> nominal quota
    paths: dict[str, tuple]  # resource -> field path of its nominalQuota


def resource_groups(cluster_queue) -> list[tuple[list[str], list[FlavorQuota]]]:
    """(covered resources, flavors with their quotas) of each resource group."""
    groups = []
    for g, group in enumerate(sequence(cluster_queue.doc, "spec", "resourceGroups")):
        covered = [str(r) for r in sequence(group, "coveredResources")]
        flavors = []
        for f, flavor in enumerate(sequence(group, "flavors")):
            quota, paths = {}, {}
            for r, resource in enumerate(sequence(flavor, "resources")):
                name = str(mapping(resource).get("name", ""))
                quota[name] = quantity(mapping(resource).get("nominalQuota")) or 0.0
                paths[name] = ("spec", "resourceGroups", g, "flavors", f, "resources", r, "nominalQuota")
            flavors.append(FlavorQuota(str(mapping(flavor).get("name", "")), quota, paths))
        groups.append((covered, flavors))
    return groups


def flavor_groups(scope, flavor: str) -> list[NodeGroup] | None:
    """The node groups whose nodes carry the ResourceFlavor's node labels; None without the flavor."""
    found = find(scope, "ResourceFlavor", flavor)
    if found is None:
        return None
    labels = {str(k): str(v) for k, v in mapping(found.doc, "spec", "nodeLabels").items()}
    return [g for g in scope.node_groups if all(g.labels.get(k) == v for k, v in labels.items())]


def capacity(groups: list[NodeGroup]) -> dict[str, float] | None:
    """What the node groups hold at maxSize; None when one has an unknown type or size."""
    total = {"cpu": 0.0, "memory": 0.0, GPU: 0.0, EFA: 0.0}
    for group in groups:
        instances, size = group.instances, group.max_size
        if not instances or size is None:
            return None
        instance = min(instances, key=lambda i: i.gpus)  # the smallest of a mixed group
        total["cpu"] += size * instance.vcpus
        total["memory"] += size * instance.memory_gib * 2**30
        total[GPU] += size * instance.gpus
        total[EFA] += size * (instance.efa_interfaces if group.efa_enabled else 0)
    return total


def selects_namespace(cluster_queue, namespace: str, labels: dict[str, str]) -> bool:
    """Whether the ClusterQueue's namespaceSelector takes jobs from the namespace (Kubernetes label
    selector semantics; Kueue reads a missing selector as selecting no namespace)."""
    selector = mapping(cluster_queue.doc, "spec").get("namespaceSelector")
    if not isinstance(selector, dict):
        return False
    labels = {**labels, "kubernetes.io/metadata.name": namespace}
    if any(labels.get(str(k)) != str(v) for k, v in mapping(selector, "matchLabels").items()):
        return False
    for expression in sequence(selector, "matchExpressions"):
        key, operator = str(mapping(expression).get("key", "")), mapping(expression).get("operator")
        values = [str(v) for v in sequence(expression, "values")]
        matched = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }.get(operator, False)
        if not matched:
            return False
    return True


def gpu_quota(scope) -> float:
    """The nvidia.com/gpu quota of every ClusterQueue of the environment, over all flavors."""
    return sum(
        flavor.quota.get(GPU, 0.0)
        for cluster_queue in scope.of("ClusterQueue", GROUP)
        for _, flavors in resource_groups(cluster_queue)
        for flavor in flavors
    )
