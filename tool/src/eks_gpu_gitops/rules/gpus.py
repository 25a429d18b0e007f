"""GPU rules: what pods ask for against what the ClusterConfig's node groups can give."""

from __future__ import annotations

from ..model import GPU, PodTemplate, Scope, mapping, plural, quantity
from ..model.mpi import mpijobs, replica_templates
from ..model.placement import largest, other_capacity, placement_known, unknown_label_keys
from .registry import Finding, category

rule = category("GPUs")

# Resources the API server only accepts with requests equal to limits.
_EXACT_PREFIXES = ("nvidia.com/", "vpc.amazonaws.com/efa", "hugepages-", "aws.amazon.com/")

# Workloads that must land on a node group (DaemonSets may legitimately select none).
_PLACED_KINDS = ("MPIJob", "Deployment", "StatefulSet", "ReplicaSet", "Job", "CronJob", "Pod")


def gpu_templates(scope: Scope) -> list[PodTemplate]:
    return [t for t in scope.pod_templates if t.request(GPU) > 0]


@rule(
    "gpu-request-exceeds-node",
    "error",
    requires=("cluster",),
    description="A pod requests more GPUs than any node of its node groups has",
    remediation="Lower the pod's nvidia.com/gpu to at most the GPUs of the node group's instance type, "
    "or move it to a node group with larger instances.",
    docs="""A pod's GPUs must all come from one node, so a pod that asks for more than the largest instance
      type of every node group it can run on stays Pending. The node groups are those the pod's nodeSelector,
      required node affinity and tolerations admit; GPU counts come from the instance catalogue (the tool's
      `facts/catalog.py`). Skipped where other nodes can appear (Karpenter, Fargate, EKS Auto Mode) or the pod
      selects on a node label the ClusterConfig does not set.""",
    premise="The ClusterConfig lists every node the pod can run on (no Karpenter, Fargate or Auto Mode), fixes "
    "the node labels it selects on, and the node groups it admits are of known instance types.",
    consequence="job",
)
def gpu_request_exceeds_node(scope: Scope):
    for template in gpu_templates(scope):
        if not placement_known(scope, template):
            continue
        gpus = template.request(GPU)
        selected, groups = scope.placement(template)
        if not groups or any(largest(g, "gpus") is None for g in selected):
            continue  # no-node-group-matches, or an instance type the catalogue does not know
        with_gpus = [g for g in groups if largest(g, "gpus") > 0]
        if with_gpus and all(largest(g, "gpus") < gpus for g in with_gpus):
            sizes = ", ".join(f"{g.describe()} has {largest(g, 'gpus')}" for g in with_gpus)
            message = f"{template.label} requests {plural(gpus, 'GPU')} but {sizes}"
        elif not with_gpus and not any(largest(g, "gpus") > 0 for g in selected):
            names = ", ".join(g.describe() for g in groups)
            message = f"{template.label} requests {plural(gpus, 'GPU')} but can only run on {names}, without GPUs"
        else:
            continue  # a GPU group it selects but does not tolerate: gpu-taint-not-tolerated
        yield Finding(template.owner, message, (*template.containers[0].path, "resources"))


def _workers_that_fit(groups, gpus: float) -> dict[str, tuple[int, int]]:
    """Node group name: (GPUs of its largest node, workers of `gpus` each that fit at maxSize)."""
    return {g.name: (largest(g, "gpus"), g.max_size * int(largest(g, "gpus") // gpus)) for g in groups}


def _taken_by_launcher(scope: Scope, launcher: PodTemplate | None, worker_groups, gpus: float) -> int:
    """Worker places a GPU launcher takes when it can only run on the workers' node groups: the fewest its
    GPUs cost on one node of those groups."""
    needed = launcher.request(GPU) if launcher else 0
    if needed <= 0 or not placement_known(scope, launcher):
        return 0
    _, admitted = scope.placement(launcher)
    if any(largest(g, "gpus") is None for g in admitted):
        return 0
    groups = [g for g in admitted if largest(g, "gpus") >= needed]
    names = {g.name for g in worker_groups}
    if not groups or any(g.name not in names for g in groups):
        return 0
    return min(int(largest(g, "gpus") // gpus) - int((largest(g, "gpus") - needed) // gpus) for g in groups)


@rule(
    "gpu-capacity-exceeded",
    "error",
    requires=("cluster",),
    description="The MPIJob's GPU pods need more GPU nodes than the node groups' maxSize allows",
    remediation="Lower Worker.replicas (and -np), remove GPUs from the launcher, or raise maxSize of the node group.",
    docs="""All workers must run at once for the MPI world to start; workers that do not fit stay Pending
      and the job never starts, while the nodes that did start sit idle and are billed. Capacity is maxSize x
      the workers that fit on the group's largest node. A launcher that requests GPUs and can only run on the
      workers' node groups takes a node's GPUs too (a launcher GPU on an 8-GPU node leaves no room for an
      8-GPU worker). Skipped where other nodes can appear (Karpenter, Fargate, EKS Auto Mode).""",
    premise="The ClusterConfig lists every node the MPIJob's GPU workers can run on, and the node groups they "
    "can use have a maxSize (or desiredCapacity) and known instance types.",
    consequence="job",
)
def gpu_capacity_exceeded(scope: Scope):
    for job in mpijobs(scope.objects):
        templates = replica_templates(job)
        worker = templates.get("Worker")
        if not worker or worker.request(GPU) <= 0 or not placement_known(scope, worker):
            continue
        gpus = worker.request(GPU)
        _, groups = scope.placement(worker)
        if not groups or any(largest(g, "gpus") is None or g.max_size is None for g in groups):
            continue
        figures = _workers_that_fit(groups, gpus)
        fits = sum(count for _, count in figures.values())
        taken = _taken_by_launcher(scope, templates.get("Launcher"), groups, gpus)
        if fits > 0 and fits - taken < worker.replicas:
            groups_text = ", ".join(f"{g.describe()} maxSize {g.max_size}" for g in groups)
            by_launcher = f", {taken} of them taken by the launcher's GPUs" if taken else ""
            yield Finding(
                job,
                f"{plural(worker.replicas, 'worker')} x {plural(gpus, 'GPU')} need room for "
                f"{worker.replicas} pods but {groups_text} fits {fits}{by_launcher}",
                (*worker.path[:-2], "replicas"),
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
      add other nodes, and for a selector on a label the ClusterConfig does not fix: a zone or instance type
      the group leaves open, a host name, a label its kubelet gets another way (kubeletExtraArgs
      node-labels, its own bootstrap), or a prefixed label (`nvidia.com/gpu.present`,
      `feature.node.kubernetes.io/...`) that a labeller such as node-feature-discovery may set at run time,
      unless the whole environment is visible and runs no such labeller.""",
    premise="The ClusterConfig lists every node (no Karpenter, Fargate or Auto Mode) and fixes every node label "
    "the workload's nodeSelector or required node affinity names.",
    consequence="job",
)
def no_node_group_matches(scope: Scope):
    if other_capacity(scope) or not scope.node_groups:
        return
    for template in scope.pod_templates:
        if template.owner.kind not in _PLACED_KINDS:
            continue
        if not template.node_selector and not template.required_terms:
            continue
        if unknown_label_keys(scope, template, scope.node_groups):
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
      without a limit ("must be equal to ... limit", "Limit must be set for non overcommitable resources").
      For an MPIJob or a Deployment the workload is accepted and only its pods are refused, so nothing
      starts.""",
    premise="A container requests or limits nvidia.com/..., vpc.amazonaws.com/efa, aws.amazon.com/... or huge pages.",
    consequence="job",
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
