"""The figures of an environment's impact summary: GPUs asked for, GPUs Kueue may admit, and GPUs
the nodes can hold.

- MPIJob GPUs: for each MPIJob and replica type, replicas x the pod's `nvidia.com/gpu` (a pod
  needs the larger of its containers' sum and any one init container). Every MPIJob counts, queued
  or not; the notices tell the two apart (queued jobs take turns).
- GPU quota: the `nvidia.com/gpu` nominalQuota over every flavor of every Kueue ClusterQueue.
- GPU node capacity: for each eksctl node group with a GPU instance type, maxSize x the
  type's GPUs (catalog.py). None when the ClusterConfig is missing or names an unknown type.

Pod templates, node groups and quantities are read with the object model (model/),
so both tools count the same way.
"""

from __future__ import annotations

from ..model import (
    GPU,
    MPIJOB,
    Environment,
    Manifest,
    NodeGroup,
    PodTemplate,
    mapping,
    node_groups,
    plural,
    pod_templates,
)
from ..model.queues import GROUP as QUEUE_GROUP
from ..model.queues import resource_groups
from .model import Figure

CLUSTER_QUEUE = (QUEUE_GROUP, "ClusterQueue")

# What eksctl creates when a node group gives no size at all.
_EKSCTL_DEFAULT_NODES = 2


def pod_gpus(template: PodTemplate) -> int:
    init = max((c.request(GPU) for c in template.init_containers), default=0.0)
    return int(max(template.request(GPU), init))


def mpijob_gpus(manifest: Manifest) -> tuple[int, list[str]]:
    """Total GPUs of one MPIJob and a breakdown per replica type that asks for any."""
    total, parts = 0, []
    for template in pod_templates(manifest):
        per_pod = pod_gpus(template)
        if per_pod:
            total += template.replicas * per_pod
            parts.append(f"{plural(template.replicas, template.role.lower())} x {per_pod}")
    return total, parts


def requested_gpus(objects: list[Manifest]) -> tuple[int, str]:
    total, details = 0, []
    for manifest in objects:
        if (manifest.group, manifest.kind) != MPIJOB:
            continue
        gpus, parts = mpijob_gpus(manifest)
        total += gpus
        if parts:
            suspended = mapping(manifest.doc, "spec", "runPolicy").get("suspend") is True
            details.append(f"{manifest.name}: {' + '.join(parts)}{' (suspended)' if suspended else ''}")
    return total, "; ".join(details)


def cluster_queue_gpus(cluster_queue: Manifest) -> tuple[int, str]:
    """The queue's GPU quota over all its flavors, and the flavors that give any ("training: gpu 16")."""
    total, parts = 0, []
    for _, flavors in resource_groups(cluster_queue):
        for flavor in flavors:
            gpus = int(flavor.quota.get(GPU, 0))
            if gpus:
                total += gpus
                parts.append(f"{flavor.name} {gpus}")
    return total, f"{cluster_queue.name}: {', '.join(parts) or 'no GPU quota'}"


def gpu_quota(objects: list[Manifest]) -> tuple[int, str]:
    total, details = 0, []
    for manifest in objects:
        if (manifest.group, manifest.kind) == CLUSTER_QUEUE:
            gpus, detail = cluster_queue_gpus(manifest)
            total += gpus
            details.append(detail)
    return total, "; ".join(details) or "no ClusterQueue"


def node_group_gpus(group: NodeGroup) -> tuple[int | None, str]:
    """GPUs the group holds at maxSize (None for an unknown instance type), and how."""
    per_node = group.smallest("gpus")
    if per_node is None:
        return None, f"{group.name}: unknown instance type {', '.join(group.instance_types) or '(none)'}"
    if per_node == 0:
        return 0, ""
    nodes = group.max_size if group.max_size is not None else _EKSCTL_DEFAULT_NODES
    return nodes * per_node, f"{group.name}: {nodes} x {'/'.join(group.instance_types)} ({plural(per_node, 'GPU')})"


def gpu_capacity(cluster_config: Manifest | None) -> tuple[int | None, str]:
    if cluster_config is None:
        return None, "no ClusterConfig"
    total, details = 0, []
    for group in node_groups(cluster_config.doc):
        gpus, detail = node_group_gpus(group)
        if detail:
            details.append(detail)
        total = None if total is None or gpus is None else total + gpus
    return total, "; ".join(details)


CLUSTER_STAYS = "the cluster and its node groups stay until `eksctl delete cluster`"


def figures(base: Environment | None, head: Environment | None) -> tuple[Figure, Figure, Figure]:
    """(MPIJob GPUs, GPU quota, GPU node capacity) before and after; a side without the environment is 0,
    except the node capacity of an environment that goes."""

    def side(environment: Environment | None) -> list[tuple[int | None, str]]:
        if environment is None:
            return [(0, ""), (0, ""), (0, "")]
        objects = environment.objects
        return [requested_gpus(objects), gpu_quota(objects), gpu_capacity(environment.cluster_config)]

    gpus, quota, capacity = (
        Figure(before, after, before_how, after_how)
        for (before, before_how), (after, after_how) in zip(side(base), side(head), strict=True)
    )
    if base is not None and head is None:
        # Removing an environment from Git deletes no node: they run until `eksctl delete cluster`.
        capacity = Figure(capacity.before, capacity.before, capacity.before_detail, CLUSTER_STAYS)
    return gpus, quota, capacity
