"""GPU rules: what pods ask for against what the ClusterConfig's node groups can give."""

from __future__ import annotations

from ..model import GPU, MPIJOB, PodTemplate, Scope, mapping, plural, quantity
from .registry import Finding, category

rule = category("GPUs")

# Resources the API server only accepts with requests equal to limits.
_EXACT_PREFIXES = ("nvidia.com/", "vpc.amazonaws.com/efa", "hugepages-", "aws.amazon.com/")

# Workloads that must land on a node group (DaemonSets may legitimately select none).
_PLACED_KINDS = ("MPIJob", "Deployment", "StatefulSet", "ReplicaSet", "Job", "CronJob", "Pod")


def gpu_templates(scope: Scope) -> list[PodTemplate]:
    return [t for t in scope.pod_templates if t.request(GPU) > 0]


def _uses_other_capacity(scope: Scope) -> bool:
    """Karpenter or Fargate can add nodes the ClusterConfig does not list."""
    doc = scope.cluster_config.doc if scope.cluster_config else {}
    return bool(doc.get("karpenter") or doc.get("fargateProfiles") or mapping(doc, "autoModeConfig").get("enabled"))


@rule(
    "gpu-request-exceeds-node",
    "error",
    requires=("cluster",),
    description="A pod requests more GPUs than one node of its node group has",
    remediation="Lower the pod's nvidia.com/gpu to at most the GPUs of the node group's instance type, "
    "or move it to a node group with larger instances.",
    docs="""A pod's GPUs must all come from one node. The node group is the one the pod's nodeSelector,
      required node affinity and tolerations admit; GPU counts come from the instance catalogue
      (the tool's `facts/catalog.py`).""",
)
def gpu_request_exceeds_node(scope: Scope):
    for template in gpu_templates(scope):
        gpus = template.request(GPU)
        selected, groups = scope.placement(template)
        if not groups or any(g.smallest("gpus") is None for g in selected):
            continue  # no-node-group-matches, or an instance type the catalogue does not know
        with_gpus = [g for g in groups if g.smallest("gpus") > 0]
        if with_gpus and all(g.smallest("gpus") < gpus for g in with_gpus):
            sizes = ", ".join(f"{g.describe()} has {g.smallest('gpus')}" for g in with_gpus)
            message = f"{template.label} requests {plural(gpus, 'GPU')} but {sizes}"
        elif not with_gpus and not any(g.smallest("gpus") > 0 for g in selected):
            names = ", ".join(g.describe() for g in groups)
            message = f"{template.label} requests {plural(gpus, 'GPU')} but can only run on {names}, without GPUs"
        else:
            continue  # a GPU group it selects but does not tolerate: gpu-taint-not-tolerated
        yield Finding(template.owner, message, (*template.containers[0].path, "resources"))


@rule(
    "gpu-capacity-exceeded",
    "error",
    requires=("cluster",),
    description="The MPIJob's workers need more GPU nodes than the node group's maxSize allows",
    remediation="Lower Worker.replicas (and -np), or raise maxSize of the node group.",
    docs="""All workers must run at once for the MPI world to start; workers that do not fit stay Pending
      and the job never starts, while the nodes that did start sit idle and are billed. Capacity is maxSize x
      the workers that fit on one node.""",
)
def gpu_capacity_exceeded(scope: Scope):
    if _uses_other_capacity(scope):
        return
    for template in gpu_templates(scope):
        if (template.owner.group, template.owner.kind) != MPIJOB or template.role != "Worker":
            continue
        gpus = template.request(GPU)
        _, groups = scope.placement(template)
        figures = [(g, g.smallest("gpus"), g.max_size) for g in groups]
        if not figures or any(count is None or size is None for _, count, size in figures):
            continue
        fits = sum(size * int(count // gpus) for _, count, size in figures)
        if 0 < fits < template.replicas:
            groups_text = ", ".join(f"{g.describe()} maxSize {size}" for g, _, size in figures)
            yield Finding(
                template.owner,
                f"{plural(template.replicas, 'worker')} x {plural(gpus, 'GPU')} need room for "
                f"{template.replicas} pods but {groups_text} fits {fits}",
                (*template.path[:-2], "replicas"),
            )


@rule(
    "no-node-group-matches",
    "error",
    requires=("cluster",),
    description="A workload's nodeSelector or node affinity matches no node group of the cluster",
    remediation="Make the nodeSelector or affinity match a node group's labels (or instance type), or add the "
    "labels to that node group in the ClusterConfig.",
    docs="""A pod whose selectors match no node stays Pending forever. Node labels are the group's `labels`
      plus those EKS and eksctl add (`eks.amazonaws.com/nodegroup`, `node.kubernetes.io/instance-type`,
      `topology.kubernetes.io/zone` for a single-zone group). Skipped when Karpenter, Fargate or Auto Mode can
      add other nodes.""",
)
def no_node_group_matches(scope: Scope):
    if _uses_other_capacity(scope) or not scope.node_groups:
        return
    for template in scope.pod_templates:
        if template.owner.kind not in _PLACED_KINDS:
            continue
        if not template.node_selector and not template.required_terms:
            continue
        selected, _ = scope.placement(template)
        if not selected:
            wanted = ", ".join(f"{k}={v}" for k, v in template.node_selector.items()) or "its node affinity"
            yield Finding(
                template.owner,
                f"{template.label} selects {wanted}, which no node group's nodes carry",
                (*template.path, "nodeSelector" if template.node_selector else "affinity"),
            )


@rule(
    "extended-resource-limit-mismatch",
    "error",
    description="A GPU, EFA or huge-pages request is not equal to its limit",
    remediation="Set the same value under resources.requests and resources.limits (or only under limits).",
    docs="""Extended resources (`nvidia.com/gpu`, `vpc.amazonaws.com/efa`) and huge pages cannot be
      overcommitted: the API server rejects a pod whose request differs from its limit, or that requests one
      without a limit. For an MPIJob the job is accepted and only its pods fail, so nothing starts.""",
)
def extended_resource_limit_mismatch(scope: Scope):
    for template in scope.pod_templates:
        for container in template.containers + template.init_containers:
            requests = mapping(container.spec, "resources", "requests")
            limits = mapping(container.spec, "resources", "limits")
            for name in sorted(set(requests) | set(limits)):
                if not str(name).startswith(_EXACT_PREFIXES):
                    continue
                if name in requests and name not in limits:
                    message = f"requests {name} {requests[name]} without a limit"
                elif name in requests and quantity(requests[name]) != quantity(limits[name]):
                    message = f"requests {name} {requests[name]} but limits it to {limits[name]}"
                else:
                    continue
                yield Finding(
                    template.owner,
                    f"{template.container_label(container)} {message}",
                    (*container.path, "resources", "requests", name),
                )
