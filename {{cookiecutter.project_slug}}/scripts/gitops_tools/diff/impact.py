"""The figures of an environment's impact summary: GPUs asked for and GPUs the nodes can hold.

- MPIJob GPUs: for each MPIJob and replica type, replicas x the pod's `nvidia.com/gpu`
  (limits, else requests; a pod needs the larger of its containers' sum and any one init
  container).
- GPU node capacity: for each eksctl node group with a GPU instance type, maxSize x the
  type's GPUs (catalog.py). None when the ClusterConfig is missing or names an unknown type.
"""

from __future__ import annotations

from .. import catalog
from ..manifests import Environment, Manifest
from .model import Figure

GPU = "nvidia.com/gpu"
MPIJOB = ("kubeflow.org", "MPIJob")
# eksctl's defaults when a node group leaves its sizes out.
_EKSCTL_DEFAULT_NODES = 2


def as_int(value) -> int:
    try:
        return int(str(value).strip())
    except ValueError:
        return 0


def container_gpus(container: dict) -> int:
    resources = container.get("resources") or {}
    for section in ("limits", "requests"):
        amounts = resources.get(section) or {}
        if GPU in amounts:
            return as_int(amounts[GPU])
    return 0


def pod_gpus(pod_spec: dict) -> int:
    running = sum(container_gpus(c) for c in pod_spec.get("containers") or [] if isinstance(c, dict))
    init = max((container_gpus(c) for c in pod_spec.get("initContainers") or [] if isinstance(c, dict)),
               default=0)
    return max(running, init)


def mpijob_gpus(doc: dict) -> tuple[int, list[str]]:
    """Total GPUs of one MPIJob and a breakdown per replica type that asks for any."""
    total, parts = 0, []
    specs = (doc.get("spec") or {}).get("mpiReplicaSpecs") or {}
    for role, spec in specs.items():
        if not isinstance(spec, dict):
            continue
        replicas = as_int(spec.get("replicas", 1 if role == "Launcher" else 0))
        per_pod = pod_gpus(((spec.get("template") or {}).get("spec")) or {})
        if per_pod:
            total += replicas * per_pod
            parts.append(f"{replicas} {role.lower()}{'s' if replicas != 1 else ''} x {per_pod}")
    return total, parts


def requested_gpus(objects: list[Manifest]) -> tuple[int, str]:
    total, details = 0, []
    for manifest in objects:
        if (manifest.group, manifest.kind) != MPIJOB:
            continue
        gpus, parts = mpijob_gpus(manifest.doc)
        total += gpus
        if parts:
            suspended = ((manifest.doc.get("spec") or {}).get("runPolicy") or {}).get("suspend") is True
            details.append(f"{manifest.name}: {' + '.join(parts)}{' (suspended)' if suspended else ''}")
    return total, "; ".join(details)


def node_group_gpus(group: dict) -> tuple[int | None, str]:
    """GPUs the group holds at maxSize (None for an unknown instance type), and how."""
    types = group.get("instanceTypes") or [group.get("instanceType")]
    known = [catalog.lookup(str(name)) for name in types if name]
    if not known or any(t is None for t in known):
        return None, f"{group.get('name', '?')}: unknown instance type {', '.join(map(str, types))}"
    per_node = min(t.gpus for t in known)
    if per_node == 0:
        return 0, ""
    desired = group.get("desiredCapacity", _EKSCTL_DEFAULT_NODES)
    nodes = as_int(group.get("maxSize", desired))
    label = known[0].name if len(known) == 1 else "/".join(t.name for t in known)
    return nodes * per_node, f"{group.get('name', '?')}: {nodes} x {label} ({per_node} GPU{'s' if per_node != 1 else ''})"


def gpu_capacity(cluster_config: Manifest | None) -> tuple[int | None, str]:
    if cluster_config is None:
        return None, "no ClusterConfig"
    total, details = 0, []
    doc = cluster_config.doc
    for group in (doc.get("managedNodeGroups") or []) + (doc.get("nodeGroups") or []):
        if not isinstance(group, dict):
            continue
        gpus, detail = node_group_gpus(group)
        if detail:
            details.append(detail)
        if gpus is None:
            total = None
        elif total is not None:
            total += gpus
    return total, "; ".join(details)


def figures(base: Environment | None, head: Environment | None) -> tuple[Figure, Figure]:
    """(MPIJob GPUs, GPU node capacity) before and after; a side without the environment is 0."""
    def side(environment: Environment | None):
        if environment is None:
            return (0, ""), (0, "")
        return requested_gpus(environment.objects), gpu_capacity(environment.cluster_config)

    (gpus_before, gpus_before_how), (cap_before, cap_before_how) = side(base)
    (gpus_after, gpus_after_how), (cap_after, cap_after_how) = side(head)
    return (Figure(gpus_before, gpus_after, gpus_before_how, gpus_after_how),
            Figure(cap_before, cap_after, cap_before_how, cap_after_how))
