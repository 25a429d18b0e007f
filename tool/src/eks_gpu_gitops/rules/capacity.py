"""Capacity rules: GPU node groups that grow from zero with Cluster Autoscaler, node group sizes eksctl, EKS
and EC2 Auto Scaling take, and Kueue's quota against the jobs and the node groups."""

from __future__ import annotations

from ..facts import limits
from ..facts.eks import CAPACITY_RESERVATION_ID
from ..model import EFA, GPU, Scope, mapping, plural, sequence
from ..model.mpi import mpijobs, replica_templates
from ..model.nodes import NODE_TEMPLATE_TAG, NodeGroup, node_groups
from ..model.plugins import gpu_groups
from ..model.queues import GROUP as QUEUE_GROUP
from ..model.queues import (
    QUEUE_LABEL,
    capacity,
    find,
    flavor_groups,
    gpu_quota,
    queue_name,
    resource_groups,
    selects_namespace,
)
from .registry import Finding, category

rule = category("Capacity and queueing")

AUTOSCALER_MARKERS = ("cluster-autoscaler",)


def autoscaler_installed(scope: Scope) -> bool:
    """A Cluster Autoscaler release or Deployment among what Flux applies."""
    for manifest in scope.objects:
        if manifest.kind == "HelmRelease":
            chart = str(mapping(manifest.doc, "spec", "chart", "spec").get("chart", ""))
            if any(marker in chart for marker in AUTOSCALER_MARKERS):
                return True
        if manifest.kind == "Deployment" and any(marker in manifest.name for marker in AUTOSCALER_MARKERS):
            return True
    return False


def _starts_empty(group: NodeGroup) -> bool:
    size = group.doc.get("minSize", group.doc.get("desiredCapacity"))
    return size == 0


# eksctl's autoScaler policy (v0.230.0, pkg/cfn/builder/statement.go autoScalerStatements) includes this.
DESCRIBE_NODEGROUP = "eks:DescribeNodegroup"


def _grants_describe(policy: dict) -> bool:
    """An inline IAM policy document with a statement allowing eks:DescribeNodegroup."""
    for statement in sequence(policy, "Statement") or [mapping(policy, "Statement")]:
        actions = statement.get("Action", []) if isinstance(statement, dict) else []
        actions = [actions] if isinstance(actions, str) else actions
        if statement.get("Effect") == "Allow" and any(a in (DESCRIBE_NODEGROUP, "eks:*", "*") for a in actions):
            return True
    return False


def autoscaler_reads_node_groups(cluster_config: dict) -> bool:
    """Whether the ClusterConfig lets a Cluster Autoscaler service account call eks:DescribeNodegroup:
    eksctl's autoScaler policy (a Pod Identity association, an IRSA service account, or a node group's
    addon policy) or an inline statement naming it. Policy ARNs cannot be read here and do not count."""
    iam = mapping(cluster_config, "iam")
    for association in sequence(iam, "podIdentityAssociations"):
        if isinstance(association, dict) and "autoscaler" in str(association.get("serviceAccountName", "")):
            if mapping(association, "wellKnownPolicies").get("autoScaler") is True:
                return True
            if _grants_describe(mapping(association, "permissionPolicy")):
                return True
    for account in sequence(iam, "serviceAccounts"):
        if isinstance(account, dict) and "autoscaler" in str(mapping(account, "metadata").get("name", "")):
            if mapping(account, "wellKnownPolicies").get("autoScaler") is True:
                return True
            if _grants_describe(mapping(account, "attachPolicy")):
                return True
    return any(
        mapping(group.doc, "iam", "withAddonPolicies").get("autoScaler") is True
        for group in node_groups(cluster_config)
    )


def _template_problems(group: NodeGroup, reads_node_groups: bool) -> list[tuple[tuple, str]]:
    """What Cluster Autoscaler would get wrong about the group's nodes while it has none.

    It builds them from the Auto Scaling group's node-template tags and, for a managed group, from what EKS's
    DescribeNodegroup returns (the group's labels, taints with their effect, and its tags' resources/ entries;
    cluster-autoscaler-1.34.5, cloudprovider/aws/aws_manager.go buildNodeFromTemplate). EKS copies no managed
    group's tags to its Auto Scaling group (aws/containers-roadmap#608); eksctl's propagateASGTags does, with
    the labels and the taints (v0.230.0, pkg/cfn/manager/nodegroup.go propagateManagedNodeGroupTagsToASGTask)."""
    tags = {str(k): str(v) for k, v in mapping(group.doc, "tags").items()}
    propagated = group.doc.get("propagateASGTags") is True
    from_api = group.managed and reads_node_groups
    if group.managed and not propagated and not from_api:
        return [
            (
                ("propagateASGTags",),
                "propagateASGTags is not true and no autoscaler role in the ClusterConfig may call "
                "eks:DescribeNodegroup, so none of its labels, taints or node-template tags reach Cluster "
                "Autoscaler (EKS copies no node group tags to its Auto Scaling group)",
            )
        ]
    problems = []
    for key, value in mapping(group.doc, "labels").items():
        tag = f"{NODE_TEMPLATE_TAG}/label/{key}"
        if not from_api and tags.get(tag, str(value) if propagated else None) != str(value):
            problems.append((("labels",), f"label {key}={value} has no {tag} tag (or propagateASGTags)"))
    for taint in group.taints:
        tag = f"{NODE_TEMPLATE_TAG}/taint/{taint.key}"
        wanted = f"{taint.value}:{taint.effect}"
        if not from_api and tags.get(tag) != wanted:
            # eksctl's propagateASGTags writes the value without the effect, which the autoscaler skips.
            problems.append((("tags",), f"taint {taint} needs the tag {tag}: {wanted!r}"))
    interfaces = group.smallest("efa_interfaces") or 0
    if group.efa_enabled and interfaces:
        tag = f"{NODE_TEMPLATE_TAG}/resources/{EFA}"
        if tags.get(tag) != str(interfaces):
            problems.append(
                (("tags",), f"its {plural(interfaces, 'EFA interface')} need the tag {tag}: '{interfaces}'")
            )
    return problems


@rule(
    "gpu-group-cannot-scale-from-zero",
    "error",
    requires=("cluster",),
    description="A GPU node group that starts empty cannot be grown from zero by Cluster Autoscaler",
    remediation="Install Cluster Autoscaler (overlays/base/cluster-autoscaler), set propagateASGTags: true (or give "
    "the autoscaler eksctl's autoScaler policy, which reads managed groups from EKS), and give the group the "
    "node-template tags its labels, taints (value:Effect) and EFA interfaces need (the environment generator "
    "writes them).",
    docs="""A group with minSize 0 has no node to copy, so Cluster Autoscaler builds one from the
      autoscaling group's tags (kubernetes/autoscaler cluster-autoscaler-1.34.5, cloudprovider/aws/README.md
      and aws_manager.go): `k8s.io/cluster-autoscaler/node-template/label/<key>`, `.../taint/<key>` with
      `value:Effect`, and `.../resources/<name>`. It knows GPUs from the instance type but not
      `vpc.amazonaws.com/efa`. EKS copies none of a managed group's tags to its autoscaling group
      (aws/containers-roadmap#608): eksctl's `propagateASGTags` does (v0.230.0, with the labels, and the taints
      without their effect, which the autoscaler ignores), and an autoscaler allowed `eks:DescribeNodegroup`
      (eksctl's autoScaler policy) reads a managed group's labels, taints and tags from EKS. With neither, or
      without the tags, a job's workers stay Pending at zero nodes for ever; without an autoscaler at all,
      nothing grows the group.""",
)
def gpu_group_cannot_scale_from_zero(scope: Scope):
    installed = autoscaler_installed(scope)
    reads_node_groups = autoscaler_reads_node_groups(scope.cluster_config.doc)
    for group in gpu_groups(scope):
        if not _starts_empty(group):
            continue
        if scope.complete and not installed:
            yield Finding(
                scope.cluster_config,
                f"{group.describe()} starts with 0 nodes and nothing in this environment scales it up",
                (*group.path, "minSize"),
            )
            continue
        for field, problem in _template_problems(group, reads_node_groups):
            yield Finding(scope.cluster_config, f"{group.describe()} starts empty: {problem}", (*group.path, *field))


# --- Kueue ------------------------------------------------------------------------------------


def _pod_request(template, resource: str) -> float:
    """What Kueue counts for one pod: its containers, or its largest init container if that is more."""
    init = max((c.request(resource) for c in template.init_containers), default=0.0)
    return max(template.request(resource), init)


def _queued_jobs(scope: Scope):
    """(MPIJob, its ClusterQueue or None, why none) for every MPIJob that names a queue."""
    for job in mpijobs(scope.objects):
        name = queue_name(job)
        if not name:
            continue
        namespace = scope.namespace_of(job)
        local = find(scope, "LocalQueue", name, namespace)
        if local is None:
            yield job, None, f"its queue {name!r} is no LocalQueue in namespace {namespace}"
            continue
        cluster_queue = str(mapping(local.doc, "spec").get("clusterQueue", ""))
        found = find(scope, "ClusterQueue", cluster_queue)
        if found is None:
            yield job, None, f"LocalQueue {name} points at no ClusterQueue {cluster_queue!r}"
        elif not selects_namespace(found, namespace, _namespace_labels(scope, namespace)):
            yield job, None, f"ClusterQueue {cluster_queue}'s namespaceSelector does not take jobs from {namespace}"
        else:
            yield job, found, None


def _namespace_labels(scope: Scope, namespace: str) -> dict[str, str]:
    for manifest in scope.of("Namespace"):
        if manifest.name == namespace:
            return {str(k): str(v) for k, v in mapping(manifest.doc, "metadata", "labels").items()}
    return {}


def _fmt(resource: str, value: float) -> str:
    return f"{value / 2**30:g}Gi" if resource == "memory" else f"{value:g}"


@rule(
    "queue-quota-exceeded",
    "error",
    requires=("environment",),
    description="An MPIJob needs more than its Kueue ClusterQueue can ever admit",
    remediation="Make the job smaller (workers, GPUs per worker) or raise the ClusterQueue's quota together with "
    "the node group's maxSize (overlays/<env>/settings.yaml: queue and gpuNodeGroup); name a LocalQueue of the "
    "job's namespace whose ClusterQueue selects that namespace.",
    docs="""Kueue admits a job whole: all its pods of one kind must fit one flavor's quota, and a resource the
      ClusterQueue does not cover cannot be admitted at all. A job above that stays suspended in the queue for
      ever, with no error anywhere but its Workload's status. Pods count as Kueue counts them: their
      containers' requests, or their largest init container's when that is more.""",
)
def queue_quota_exceeded(scope: Scope):
    for job, cluster_queue, missing in _queued_jobs(scope):
        if cluster_queue is None:
            yield Finding(job, f"{missing}, so the job is never admitted", ("metadata", "labels", QUEUE_LABEL))
            continue
        groups = resource_groups(cluster_queue)
        for template in replica_templates(job).values():
            replicas = template.replicas or 0
            resources = {
                str(name)
                for container in template.containers + template.init_containers
                for section in ("requests", "limits")
                for name in mapping(container.spec, "resources", section)
            }
            demand = {r: _pod_request(template, r) * replicas for r in sorted(resources)}
            demand = {r: v for r, v in demand.items() if v > 0}
            uncovered = [r for r in demand if not any(r in covered for covered, _ in groups)]
            if uncovered:
                yield Finding(
                    job,
                    f"{template.label}s request {', '.join(uncovered)}, which ClusterQueue {cluster_queue.name} "
                    "does not cover, so the job is never admitted",
                    (*template.path[:-2], "template", "spec"),
                )
                continue
            for covered, flavors in groups:
                wanted = {r: v for r, v in demand.items() if r in covered}
                if wanted and not any(all(f.quota.get(r, 0) >= v for r, v in wanted.items()) for f in flavors):
                    largest = {r: max((f.quota.get(r, 0) for f in flavors), default=0) for r in wanted}
                    short = [r for r, v in wanted.items() if largest[r] < v]
                    yield Finding(
                        job,
                        f"{plural(replicas, template.label)} need "
                        + ", ".join(f"{_fmt(r, wanted[r])} {r}" for r in short)
                        + f" but no flavor of ClusterQueue {cluster_queue.name} holds more than "
                        + ", ".join(f"{_fmt(r, largest[r])}" for r in short)
                        + ", so the job is never admitted",
                        (*template.path[:-2], "replicas"),
                    )


@rule(
    "queue-quota-exceeds-capacity",
    "error",
    requires=("cluster", "environment"),
    description="A Kueue flavor's quota is more than its node groups hold at maxSize",
    remediation="Lower the quota to what the flavor's node groups hold at maxSize, or raise maxSize "
    "(overlays/<env>/settings.yaml: queue and gpuNodeGroup, which the generators keep in step).",
    docs="""Kueue admits jobs against quota, not against nodes: with a quota above what the flavor's node groups
      can ever hold, it admits a job whose pods then stay Pending, holding the nodes that did start, and
      blocking the jobs behind it. A flavor's node groups are those whose node labels include its
      `nodeLabels`; capacity is maxSize x the instance type's vCPUs, memory, GPUs and (with efaEnabled) EFA
      interfaces.""",
)
def queue_quota_exceeds_capacity(scope: Scope):
    for cluster_queue in scope.of("ClusterQueue", QUEUE_GROUP):
        for _, flavors in resource_groups(cluster_queue):
            for flavor in flavors:
                groups = flavor_groups(scope, flavor.name)
                if groups is None:
                    continue
                held = capacity(groups)
                if held is None:
                    continue
                for resource, quota in flavor.quota.items():
                    if resource in held and quota > held[resource]:
                        names = ", ".join(g.name for g in groups) or "no node group"
                        yield Finding(
                            cluster_queue,
                            f"flavor {flavor.name} has a {resource} quota of {_fmt(resource, quota)} but its node "
                            f"groups ({names}) hold {_fmt(resource, held[resource])} at maxSize",
                            flavor.paths[resource],
                        )


@rule(
    "mpijob-without-queue",
    "error",
    requires=("environment",),
    description="An MPIJob names no Kueue queue in a namespace that has one",
    remediation=f"Label the MPIJob with {QUEUE_LABEL}: <the namespace's LocalQueue> (scripts/new-job does).",
    docs=f"""Kueue leaves a job without the `{QUEUE_LABEL}` label alone (its default configuration does not manage
      jobs without one): the job starts at once, outside the quota, and its pods take GPU nodes the queued
      jobs were admitted for. Two such jobs can each start half their workers and block each other.""",
)
def mpijob_without_queue(scope: Scope):
    queued_namespaces = {scope.namespace_of(m) for m in scope.of("LocalQueue", QUEUE_GROUP)}
    for job in mpijobs(scope.objects):
        namespace = scope.namespace_of(job)
        if not queue_name(job) and namespace in queued_namespaces:
            yield Finding(job, f"namespace {namespace} has a LocalQueue but the job names no queue", ("metadata",))


@rule(
    "gpu-jobs-exceed-capacity",
    "error",
    requires=("cluster",),
    description="The GPU quota and the MPIJobs outside any queue need more GPUs together than the GPU nodes hold",
    remediation="Put the jobs in the namespace's Kueue queue, so they run one after another as the quota allows, "
    "or lower the quota to leave room for them.",
    docs="""GPUs are counted over the whole environment, not job by job. MPIJobs that no queue admits start at
      once, and Kueue admits queued jobs up to the ClusterQueues' GPU quota, which the generators set to all
      the GPU nodes hold at maxSize. When the jobs outside a queue plus that quota exceed the nodes, an
      admitted job's workers stay Pending behind the unqueued ones (Kueue evicts and requeues it after its
      waitForPodsReady timeout, again and again), and two unqueued jobs can each start half their workers.
      Queued jobs above the quota are fine: they wait their turn.""",
)
def gpu_jobs_exceed_capacity(scope: Scope):
    held = capacity(gpu_groups(scope)) if gpu_groups(scope) else None
    if held is None:
        return
    demand = [
        (job, sum((t.replicas or 0) * t.request(GPU) for t in replica_templates(job).values()))
        for job in mpijobs(scope.objects)
        if not queue_name(job)
    ]
    unqueued = [job for job, gpus in demand if gpus > 0]
    quota = gpu_quota(scope)
    total = sum(gpus for _, gpus in demand) + quota
    if unqueued and (quota > 0 or len(unqueued) > 1) and total > held[GPU]:
        queued = f" and the queues' {quota:g} GPUs of quota" if quota else ""
        for job in unqueued:
            yield Finding(
                job,
                f"{plural(len(unqueued), 'MPIJob')} outside a queue{queued} need {total:g} GPUs together, the "
                f"GPU node groups hold {held[GPU]:g} at maxSize",
                ("metadata", "name"),
            )


# --- reserved and Spot capacity -----------------------------------------------------------------

# A Capacity Block holds 1 to 64 instances (AWS EC2 User Guide, "Capacity Blocks for ML").
CAPACITY_BLOCK_MAX_INSTANCES = limits.CAPACITY_BLOCK_MAX_INSTANCES


def _purchase_problems(scope: Scope, group: NodeGroup) -> list[tuple[str, str]]:
    """(field, what cannot work) for the group's reservation, capacity block and Spot settings."""
    doc = group.doc
    reservation = mapping(doc, "capacityReservation")
    target = mapping(reservation, "capacityReservationTarget")
    reservation_id = str(target.get("capacityReservationID", "") or "")
    block = mapping(doc, "instanceMarketOptions").get("marketType") == "capacity-block"
    spot = doc.get("spot") is True
    problems = []
    if reservation_id and not CAPACITY_RESERVATION_ID.match(reservation_id):
        problems.append(("capacityReservation", f"{reservation_id!r} is not a capacity reservation id (cr-...)"))
    if reservation_id and not block and len(group.instance_types) > 1:
        problems.append(("instanceTypes", "a capacity reservation is for one instance type: set instanceType alone"))
    if (reservation or block) and len(group.zones) + len(group.subnets) != 1:
        problems.append(
            ("availabilityZones", "a reservation lives in one availability zone; give the group exactly one")
        )
    if block:
        if not reservation_id:
            problems.append(
                ("instanceMarketOptions", "a Capacity Block needs capacityReservationTarget.capacityReservationID")
            )
        if len(group.instance_types) != 1 or not doc.get("instanceType"):
            problems.append(("instanceTypes", "a Capacity Block is for one instance type: set instanceType alone"))
        for field in ("minSize", "desiredCapacity"):
            if isinstance(doc.get(field), int) and doc[field] > 0:
                problems.append(
                    (field, f"{field} {doc[field]}: instances launch only while the block is active; use 0")
                )
        if isinstance(doc.get("maxSize"), int) and doc["maxSize"] > CAPACITY_BLOCK_MAX_INSTANCES:
            problems.append(("maxSize", f"a Capacity Block holds at most {CAPACITY_BLOCK_MAX_INSTANCES} instances"))
    if spot:
        if reservation or block:
            problems.append(("spot", "Spot and a capacity reservation exclude each other"))
        if group.efa_enabled:
            problems.append(("spot", "Spot on an efaEnabled group: one reclaimed node ends the whole MPI job"))
        if scope.production and (group.smallest("gpus") or 0) > 0:
            problems.append(("spot", f"Spot GPU nodes in {scope.env}: Spot is for development environments"))
    return problems


@rule(
    "reserved-capacity-invalid",
    "error",
    requires=("cluster",),
    description="A node group's capacity reservation, Capacity Block or Spot settings cannot work",
    remediation="Target the reservation by id (cr-...) from a group in its one zone with its one instance type; "
    "for a Capacity Block set marketType capacity-block, minSize and desiredCapacity 0 and maxSize at most 64; "
    "keep Spot to development groups without EFA.",
    docs="""eksctl v0.230.0 (pkg/apis/eksctl.io/v1alpha5/validation.go) checks the shape of `capacityReservation`
      and `instanceMarketOptions`, not what EC2 then refuses: a reservation and a Capacity Block live in one
      zone and are for one instance type; a Capacity Block needs its reservation id, holds 1 to 64 instances,
      and launches nothing before it starts (the group must be able to stay at 0); Spot cannot use a
      reservation. Spot is for development only and never with EFA: a reclaimed node ends the whole MPI job.
      A warning, not an error: eksctl makes no cluster placement group for an efaEnabled group that has a
      reservation (`pkg/cfn/builder/managed_launch_template.go`), so an On-Demand Capacity Reservation for EFA
      nodes should be created in a cluster placement group.""",
)
def reserved_capacity_invalid(scope: Scope):
    for group in scope.node_groups:
        for field, problem in _purchase_problems(scope, group):
            yield Finding(scope.cluster_config, f"{group.describe()}: {problem}", (*group.path, field))
        block = mapping(group.doc, "instanceMarketOptions").get("marketType") == "capacity-block"
        if group.efa_enabled and mapping(group.doc, "capacityReservation") and not block:
            yield Finding(
                scope.cluster_config,
                f"{group.describe()}: with a capacity reservation eksctl makes no cluster placement group for "
                "its EFA nodes; create the reservation in one (a Capacity Block needs none)",
                (*group.path, "capacityReservation"),
                severity="warning",
            )


# --- node group sizes ---------------------------------------------------------------------------


@rule(
    "node-group-size-invalid",
    "error",
    requires=("cluster",),
    description="A node group's minSize, desiredCapacity or maxSize is one eksctl, EKS or EC2 Auto Scaling refuses",
    remediation="Keep 0 <= minSize <= desiredCapacity <= maxSize (maxSize at least 1 in a managed group); for a GPU "
    "group that starts empty set desiredCapacity 0 and maxSize to the nodes jobs may use "
    "(overlays/<env>/settings.yaml, gpuNodeGroup).",
    docs="""eksctl v0.230.0 refuses a desiredCapacity below minSize or above maxSize, and a maxSize below minSize,
      where a missing minSize is desiredCapacity or else 2 (pkg/apis/eksctl.io/v1alpha5/validation.go
      ValidateManagedNodeGroup; pkg/cfn/builder/nodegroup.go for unmanaged groups). What it lets through, EKS and
      EC2 Auto Scaling refuse when the stack is created: a negative size, a managed group's maxSize of 0 (the EKS
      API takes it from 1), a size beyond 32 bits. `eksctl create cluster` fails, or its CloudFormation stack
      rolls back, and no node of the group exists.""",
)
def node_group_size_invalid(scope: Scope):
    for group in scope.node_groups:
        for field, problem in limits.node_group_size_problems(group.doc, group.managed):
            yield Finding(scope.cluster_config, f"{group.describe()}: {problem}", (*group.path, field))


@rule(
    "node-group-above-eks-quota",
    "warning",
    requires=("cluster",),
    description="A managed node group's maxSize is above EKS's default quota of nodes per managed node group",
    remediation=f"Lower maxSize to at most {limits.MANAGED_NODE_GROUP_NODES}, or have the account's quota (Service "
    "Quotas, Amazon EKS, Nodes per managed node group) raised first and suppress this with the reason.",
    docs=f"""Amazon EKS allows {limits.MANAGED_NODE_GROUP_NODES} nodes per managed node group unless the account's
      quota has been raised (Amazon EKS User Guide, "Amazon EKS service quotas"; adjustable): with the default,
      creating or scaling the group beyond it fails. A warning, as the validator cannot see the account's quota;
      the generators never write more (scripts/new-environment --nodes).""",
)
def node_group_above_eks_quota(scope: Scope):
    for group in scope.node_groups:
        size = group.doc.get("maxSize")
        if group.managed and type(size) is int and limits.MANAGED_NODE_GROUP_NODES < size <= limits.API_INTEGER_MAX:
            yield Finding(
                scope.cluster_config,
                f"{group.describe()}: maxSize {size} is more than the {limits.MANAGED_NODE_GROUP_NODES} nodes EKS "
                "allows a managed node group unless the account's quota is raised",
                (*group.path, "maxSize"),
            )


# --- images (Hygiene and security; beside image-tag-latest in the catalogue) -----------------------
