"""Capacity rules: GPU node groups that grow from zero with Cluster Autoscaler, node group sizes eksctl, EKS
and EC2 Auto Scaling take, reserved capacity, and Kueue's quota against the jobs and the node groups."""

from __future__ import annotations

from dataclasses import dataclass

from ..facts import limits
from ..facts.eks import CAPACITY_RESERVATION_ID
from ..model import EFA, GPU, PodTemplate, Scope, kueue, mapping, plural, selects, sequence, untolerated
from ..model import autoscaling as ca
from ..model.mpi import mpijobs, replica_templates
from ..model.nodes import BLOCKING_EFFECTS, NODE_TEMPLATE_TAG, NodeGroup
from ..model.placeholders import holds_placeholder
from ..model.placement import efa_zone_spread, other_capacity
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
from ..model.reservations import Purchase
from .registry import Finding, category

rule = category("Capacity and queueing")


# --- growing GPU node groups from zero ------------------------------------------------------------


class Growth:
    """How the environment's node groups get nodes, as far as it shows: the Cluster Autoscalers it installs, or
    (when only the ClusterConfig and some files are given) the autoscaler the ClusterConfig prepares."""

    def __init__(self, scope: Scope):
        self.scope = scope
        self.cluster = ca.cluster_name(scope.cluster_config.doc)
        self.autoscalers = ca.autoscalers(scope)
        self.reads = ca.reads_node_groups(scope.cluster_config.doc)
        # Outside a whole environment, the ClusterConfig's autoscaler IAM says one runs with the chart's defaults.
        self.intended = not scope.complete and not self.autoscalers and ca.intends_autoscaler(scope.cluster_config.doc)

    def managed(self, group: NodeGroup) -> bool:
        """Whether a visible autoscaler discovers the group's Auto Scaling group."""
        tags = ca.asg_tags(group, self.cluster)
        if self.intended:
            return ca.Autoscaler(None, [ca.chart_default_discovery(self.cluster)]).discovers(tags)
        return any(a.discovers(tags) for a in self.autoscalers)

    def nothing_grows(self) -> bool:
        """A whole environment with no autoscaler; stuck_pods asks first that nothing else adds nodes."""
        return self.scope.complete and not self.autoscalers

    def template(self, group: NodeGroup) -> ca.TemplateNode:
        return ca.template_node(group, self.scope.cluster_config.doc, self.reads)

    def hidden(self, group: NodeGroup) -> bool:
        """A managed group whose labels, taints and tags reach the autoscaler by no way: EKS copies none of them to
        its Auto Scaling group (aws/containers-roadmap#608), propagateASGTags is off and no autoscaler role in the
        ClusterConfig may call eks:DescribeNodegroup."""
        return group.managed and group.doc.get("propagateASGTags") is not True and not self.reads


def _gap(growth: Growth, group: NodeGroup, template: PodTemplate) -> tuple[str, str, set[str]] | None:
    """(field of the group to fix, what the autoscaler's node lacks, which of labels, taints, efa) when Cluster
    Autoscaler would never start a node of the empty group for the pod; None when it would."""
    node = growth.template(group)  # selects() and untolerated() read its labels and taints as a group's
    missing = []
    if not selects(template, node):
        keys = [str(k) for k, v in template.node_selector.items() if node.labels.get(str(k)) != str(v)]
        what = ", ".join(keys) or "by node affinity"
        missing.append(("labels", "labels", f"lacks the labels the pods select ({what})"))
    extra = untolerated(template, node)
    if extra:
        missing.append(("taints", "tags", f"has taints the pods do not tolerate ({', '.join(map(str, extra))})"))
    efa = template.request(EFA)
    if efa > node.resources.get(EFA, 0):
        missing.append(("efa", "tags", f"lacks {efa:g} {EFA} (the tag {NODE_TEMPLATE_TAG}/resources/{EFA})"))
    if not missing:
        return None
    kinds = {kind for kind, _, _ in missing}
    if growth.hidden(group):
        return "propagateASGTags", _HIDDEN, kinds
    return missing[0][1], " and ".join(why for _, _, why in missing), kinds


_HIDDEN = (
    "lacks all of the group's labels, taints and tags (propagateASGTags is not true and no autoscaler role in the "
    "ClusterConfig may call eks:DescribeNodegroup)"
)


def _gpu_pods(scope: Scope) -> list[PodTemplate]:
    """Pod templates of workloads that wait for GPU nodes: they request GPUs or EFA interfaces (not DaemonSets,
    whose pods the autoscaler does not start nodes for)."""
    return [t for t in scope.pod_templates if t.replicas and (t.request(GPU) > 0 or t.request(EFA) > 0)]


@dataclass
class _Stuck:
    group: NodeGroup
    why: str
    kinds: set
    pods: list


def stuck_pods(scope: Scope) -> dict[tuple[tuple, str], _Stuck]:
    """(group path, field) -> why, for the pods that only GPU node groups at 0 nodes can run and that nothing will
    ever start a node for: an autoscaler manages the groups but builds nodes the pods do not fit, or (in a whole
    environment) nothing scales groups that start with 0 nodes. Empty where Karpenter, Fargate or EKS Auto Mode may
    add other nodes (model/placement.py other_capacity): the ClusterConfig's groups are then not all there is."""
    found: dict[tuple[tuple, str], _Stuck] = {}
    if other_capacity(scope):
        return found
    growth = Growth(scope)
    for template in _gpu_pods(scope):
        blocked = []
        for group in [g for g in scope.node_groups if selects(template, g) and not untolerated(template, g)]:
            gap = None
            if growth.managed(group) and ca.min_size(group) == 0:
                gap = _gap(growth, group, template)
            elif growth.nothing_grows() and not growth.managed(group) and ca.desired_size(group) == 0:
                field = "desiredCapacity" if "desiredCapacity" in group.doc else "minSize"
                gap = (field, "it starts with 0 nodes and nothing in this environment scales it up", {"empty"})
            if gap is None:
                break
            blocked.append((group, gap))
        else:
            for group, (field, why, kinds) in blocked:
                stuck = found.setdefault((group.path, field), _Stuck(group, why, set(), []))
                stuck.kinds |= kinds
                stuck.pods.append(template)
    return found


def _pods_named(pods: list[PodTemplate]) -> str:
    return ", ".join(dict.fromkeys(t.full_label for t in pods))


@rule(
    "gpu-group-cannot-scale-from-zero",
    "error",
    requires=("cluster",),
    premise="Nothing but the ClusterConfig's node groups adds nodes (no Karpenter, from its objects or the "
    "ClusterConfig's karpenter, no Fargate, no EKS Auto Mode), and pods of the environment that request GPUs or EFA "
    "interfaces can run only on GPU node groups that can be at 0 nodes: minSize 0 under a Cluster Autoscaler that "
    "discovers them (one the environment installs, or, without the whole environment, the one the ClusterConfig's "
    "autoscaler IAM prepares), or desiredCapacity 0 in a whole environment that installs no autoscaler.",
    consequence="job",
    description="A GPU node group at 0 nodes is never grown for the pods that need it",
    remediation="Give the group the node-template tags its labels, taints (value:Effect) and EFA interfaces need, set "
    "propagateASGTags: true or give the autoscaler eksctl's autoScaler policy (it then reads a managed group from "
    "EKS); without an autoscaler, install one (overlays/base/cluster-autoscaler) or start the group with nodes.",
    docs="""Cluster Autoscaler starts a node for a pending pod only if the node it imagines for a group fits the
      pod. A group with no node has nothing to copy, so it builds one (kubernetes/autoscaler
      cluster-autoscaler-1.34.5, cloudprovider/aws/aws_manager.go buildNodeFromTemplate) from the instance type
      (CPU, memory, GPUs), the Auto Scaling group's tags `k8s.io/cluster-autoscaler/node-template/label/<key>`,
      `.../taint/<key>` (`value:Effect`) and `.../resources/<name>` (EFA interfaces are known only from
      `.../resources/vpc.amazonaws.com/efa`), and, for a managed group whose autoscaler may call
      `eks:DescribeNodegroup` (eksctl's autoScaler policy), the group's labels, taints and tags as EKS returns
      them. EKS copies none of a managed group's tags to its Auto Scaling group (aws/containers-roadmap#608);
      eksctl's `propagateASGTags` copies its labels, its tags and its taints without their effect (v0.230.0,
      pkg/cfn/manager/nodegroup.go). An autoscaler manages a group when its `--node-group-auto-discovery` tags
      are on the group's Auto Scaling group: EKS puts the chart's default ones (`k8s.io/cluster-autoscaler/enabled`,
      `k8s.io/cluster-autoscaler/<cluster>`) on every managed group's, eksctl puts them on a self-managed group's
      only with `iam.withAddonPolicies.autoScaler` (pkg/cfn/builder/nodegroup.go). A group no autoscaler
      discovers (AWS's p4de reference, scaled by hand) is not this rule's, and neither is an autoscaler whose
      groups are named (`--nodes`), nor a cluster where something else adds nodes for pending pods: Karpenter
      (its objects or chart, or the ClusterConfig's `karpenter`, which eksctl installs), EKS Auto Mode
      (`autoModeConfig.enabled`) or a Fargate profile. The pods stay Pending for ever. Gaps no visible pod trips
      are gpu-group-node-template-incomplete's.""",
)
def gpu_group_cannot_scale_from_zero(scope: Scope):
    for (path, field), stuck in stuck_pods(scope).items():
        pods = _pods_named(stuck.pods)
        if "empty" in stuck.kinds:
            message = f"{stuck.group.describe()}: {stuck.why}, and {pods} can run on no other group"
        else:
            message = (
                f"{stuck.group.describe()} can be at 0 nodes, and the node Cluster Autoscaler then builds for it "
                f"{stuck.why}, so it never starts one for {pods} (which no other group runs)"
            )
        yield Finding(scope.cluster_config, message, (*path, field))


def _template_gaps(growth: Growth, group: NodeGroup) -> list[tuple[str, str, str]]:
    """(kind, field, what) for each thing the autoscaler's node for the empty group lacks of its real nodes."""
    node = growth.template(group)
    labels = {str(k): str(v) for k, v in mapping(group.doc, "labels").items()}
    missing_labels = [f"{k}={v}" for k, v in labels.items() if node.labels.get(k) != v]
    missing_taints = [t for t in group.taints if t.effect in BLOCKING_EFFECTS and t not in node.taints]
    interfaces = (group.smallest("efa_interfaces") or 0) if group.efa_enabled else 0
    short_efa = interfaces > node.resources.get(EFA, 0)
    if growth.hidden(group) and (missing_labels or missing_taints or short_efa):
        return [("hidden", "propagateASGTags", _HIDDEN)]
    gaps = []
    if missing_labels:
        what = f"the labels {', '.join(missing_labels)} (tags {NODE_TEMPLATE_TAG}/label/<key>)"
        gaps.append(("labels", "labels", f"lacks {what}, so pods selecting them never get a node"))
    for taint in missing_taints:
        tag = f"{NODE_TEMPLATE_TAG}/taint/{taint.key}: {taint.value}:{taint.effect}"
        gaps.append(
            (
                "taints",
                "tags",
                f"lacks the taint {taint} (tag {tag}), so pods that do not tolerate it start GPU nodes they cannot use",
            )
        )
    if short_efa:
        tag = f"{NODE_TEMPLATE_TAG}/resources/{EFA}: '{interfaces}'"
        gaps.append(
            (
                "efa",
                "tags",
                f"lacks its {plural(interfaces, 'EFA interface')} (tag {tag}), so pods requesting EFA never get a node",
            )
        )
    return gaps


@rule(
    "gpu-group-node-template-incomplete",
    "warning",
    requires=("cluster",),
    premise="A Cluster Autoscaler discovers a GPU node group (one the environment installs, or, without the whole "
    "environment, the one the ClusterConfig's autoscaler IAM prepares) whose minSize is 0, and the node it builds "
    "for the group while it has none lacks a label, taint or EFA interface of the group's nodes that no visible "
    "pod needs yet.",
    consequence="risk",
    description="Cluster Autoscaler's node for an empty GPU node group lacks labels, taints or EFA interfaces",
    remediation="Tag the group with the node-template tags of its labels, taints (value:Effect) and EFA interfaces "
    "(the environment generator writes them), and set propagateASGTags: true or give the autoscaler eksctl's "
    "autoScaler policy.",
    docs="""The same node Cluster Autoscaler builds for a group at 0 nodes (see
      gpu-group-cannot-scale-from-zero), where no pod of the environment trips over it yet: a job that selects a
      missing label or requests EFA later waits for ever, and a missing taint lets pods that do not tolerate it
      start GPU nodes they cannot run on (idle until scaled down). The autoscaler copies real nodes while the
      group has some, so with minSize above 0 nothing is reported.""",
)
def gpu_group_node_template_incomplete(scope: Scope):
    growth = Growth(scope)
    stuck = stuck_pods(scope)
    tripped = {(s.group.path, kind) for s in stuck.values() for kind in s.kinds}
    for group in gpu_groups(scope):
        if not growth.managed(group) or ca.min_size(group) != 0:
            continue
        for kind, field, what in _template_gaps(growth, group):
            if (group.path, kind) in tripped or (kind == "hidden" and (group.path, field) in stuck):
                continue
            yield Finding(
                scope.cluster_config,
                f"{group.describe()} can be at 0 nodes, and the node Cluster Autoscaler then builds for it {what}",
                (*group.path, field),
            )


# --- Kueue ------------------------------------------------------------------------------------

# Kueue v0.19.2 gives a job without a queue label the namespace's LocalQueue of this name, when there is one
# (pkg/controller/jobframework/defaults.go ApplyDefaultLocalQueueWithManagedJobsNamespaceSelector, called by the
# MPIJob webhook; pkg/controller/constants DefaultLocalQueueName).
DEFAULT_LOCAL_QUEUE = "default"


def effective_queue(scope: Scope, job) -> str | None:
    """The queue Kueue files the job under: its label, or the namespace's default LocalQueue. None says only that
    the job names no queue: whether Kueue still manages it is runs_outside_kueue's."""
    name = queue_name(job)
    if name:
        return name
    if find(scope, "LocalQueue", DEFAULT_LOCAL_QUEUE, scope.namespace_of(job)) is not None:
        return DEFAULT_LOCAL_QUEUE
    return None


def runs_outside_kueue(scope: Scope, job) -> bool:
    """Whether the job surely starts at once, outside any quota: it names no queue, and Kueue either is not
    installed or is configured (visibly) without manageJobsWithoutQueueName, which would suspend it until admitted
    (v0.19.2 pkg/controller/jobframework/reconciler.go)."""
    return not effective_queue(scope, job) and kueue.manages_unlabelled(scope) is False


def _pod_request(template, resource: str) -> float:
    """What Kueue counts for one pod: its containers, or its largest init container if that is more."""
    init = max((c.request(resource) for c in template.init_containers), default=0.0)
    return max(template.request(resource), init)


def _queued_jobs(scope: Scope):
    """(MPIJob, its ClusterQueue or None, why none) for every MPIJob Kueue queues."""
    for job in mpijobs(scope.objects):
        name = effective_queue(scope, job)
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


def _cohort(cluster_queue) -> str:
    """The cohort a ClusterQueue borrows from: spec.cohortName (v1beta2) or spec.cohort (v1beta1)."""
    spec = mapping(cluster_queue.doc, "spec")
    return str(spec.get("cohortName") or spec.get("cohort") or "")


def _fmt(resource: str, value: float) -> str:
    return f"{value / 2**30:g}Gi" if resource == "memory" else f"{value:g}"


@rule(
    "queue-quota-exceeded",
    "error",
    requires=("environment",),
    premise="Kueue is installed in the whole environment, and an MPIJob is queued (its queue label, or its "
    "namespace's LocalQueue named default) in a queue that does not exist or does not take its namespace, or whose "
    "ClusterQueue borrows from no cohort and cannot hold the job's pods.",
    consequence="job",
    description="An MPIJob needs more than its Kueue ClusterQueue can ever admit",
    remediation="Make the job smaller (workers, GPUs per worker) or raise the ClusterQueue's quota together with "
    "the node group's maxSize (overlays/<env>/settings.yaml: queue and gpuNodeGroup); name a LocalQueue of the "
    "job's namespace whose ClusterQueue selects that namespace.",
    docs="""Kueue admits a job whole: all its pods of one kind must fit one flavor's quota, and a resource the
      ClusterQueue does not cover cannot be admitted at all. A job above that stays suspended in the queue for
      ever, with no error anywhere but its Workload's status. Pods count as Kueue counts them: their
      containers' requests, or their largest init container's when that is more. A ClusterQueue in a cohort
      (`spec.cohortName`, v1beta1 `spec.cohort`) may borrow its neighbours' unused quota, so its quota alone says
      nothing; and where Kueue is not installed the label does nothing.""",
)
def queue_quota_exceeded(scope: Scope):
    if not kueue.installed(scope):
        return
    for job, cluster_queue, missing in _queued_jobs(scope):
        if cluster_queue is None:
            path = ("metadata", "labels", QUEUE_LABEL) if queue_name(job) else ("metadata",)
            yield Finding(job, f"{missing}, so the job is never admitted", path)
            continue
        if _cohort(cluster_queue):
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
    "warning",
    requires=("cluster", "environment"),
    premise="The whole environment is visible with its ClusterConfig, and a Kueue flavor's nominal quota of a "
    "resource is more than the node groups carrying the flavor's nodeLabels hold at maxSize.",
    consequence="risk",
    description="A Kueue flavor's quota is more than its node groups hold at maxSize",
    remediation="Lower the quota to what the flavor's node groups hold at maxSize, or raise maxSize "
    "(overlays/<env>/settings.yaml: queue and gpuNodeGroup, which the generators keep in step).",
    docs="""Kueue admits jobs against quota, not against nodes: with a quota above what the flavor's node groups
      can ever hold, it can admit a job whose pods then stay Pending, holding the nodes that did start, and
      blocking the jobs behind it until Kueue's waitForPodsReady timeout requeues it. Jobs that fit the nodes
      run, so it is a warning. A flavor's node groups are those whose node labels include its `nodeLabels`;
      capacity is maxSize x the instance type's vCPUs, memory, GPUs and (with efaEnabled) EFA interfaces.""",
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
    "warning",
    requires=("environment",),
    premise="The whole environment is visible, the MPIJob's namespace has a Kueue LocalQueue but none named "
    "default, the job names no queue, and Kueue's configuration is visible (a HelmRelease of its chart, or its "
    "kueue-manager-config ConfigMap) and does not set manageJobsWithoutQueueName.",
    consequence="risk",
    description="An MPIJob names no Kueue queue in a namespace that has one",
    remediation=f"Label the MPIJob with {QUEUE_LABEL}: <the namespace's LocalQueue> (scripts/new-job does), or "
    "name the namespace's LocalQueue default.",
    docs=f"""Kueue leaves a job without the `{QUEUE_LABEL}` label alone unless its configuration sets
      `manageJobsWithoutQueueName` (false by default) or the namespace has a LocalQueue named `default`, which
      Kueue v0.19.2 gives such jobs (pkg/controller/jobframework/defaults.go). The job then starts at once,
      outside the quota, and its pods take GPU nodes the queued jobs were admitted for; two such jobs can each
      start half their workers and wait for each other. It runs when the nodes are free, so it is a warning.
      Kueue's configuration is read from a HelmRelease of its chart (`managerConfig.controllerManagerConfigYaml`,
      charts/kueue/values.yaml) and from the ConfigMap its release manifests install (`kueue-manager-config`,
      key `controller_manager_config.yaml`, config/components/manager); where Kueue is installed but neither
      shows its configuration whole (valuesFrom, only its objects), nothing is reported.""",
)
def mpijob_without_queue(scope: Scope):
    queued_namespaces = {scope.namespace_of(m) for m in scope.of("LocalQueue", QUEUE_GROUP)}
    for job in mpijobs(scope.objects):
        namespace = scope.namespace_of(job)
        if namespace in queued_namespaces and runs_outside_kueue(scope, job):
            yield Finding(job, f"namespace {namespace} has a LocalQueue but the job names no queue", ("metadata",))


@rule(
    "gpu-jobs-exceed-capacity",
    "warning",
    requires=("cluster",),
    premise="The ClusterConfig's GPU node groups are visible with MPIJobs that Kueue surely leaves alone (no queue "
    "label, no default LocalQueue, and Kueue not installed or visibly configured without "
    "manageJobsWithoutQueueName), and those jobs' GPUs together with the ClusterQueues' GPU quota are more than the "
    "GPU node groups hold at maxSize.",
    consequence="risk",
    description="The GPU quota and the MPIJobs outside any queue need more GPUs together than the GPU nodes hold",
    remediation="Put the jobs in the namespace's Kueue queue, so they run one after another as the quota allows, "
    "or lower the quota to leave room for them.",
    docs="""GPUs are counted over what is visible, not job by job. MPIJobs that no queue admits start at
      once, and Kueue admits queued jobs up to the ClusterQueues' GPU quota, which the generators set to all
      the GPU nodes hold at maxSize. When the jobs outside a queue plus that quota exceed the nodes, an
      admitted job's workers stay Pending behind the unqueued ones (Kueue evicts and requeues it after its
      waitForPodsReady timeout, again and again), and two unqueued jobs can each start half their workers.
      Each job can still run when the others are done, so it is a warning. Queued jobs above the quota are fine:
      they wait their turn, and so are jobs without a queue that Kueue manages (`manageJobsWithoutQueueName`:
      it keeps them suspended); where Kueue's configuration is not visible, jobs without a queue are not
      counted.""",
)
def gpu_jobs_exceed_capacity(scope: Scope):
    held = capacity(gpu_groups(scope)) if gpu_groups(scope) else None
    if held is None:
        return
    demand = [
        (job, sum((t.replicas or 0) * t.request(GPU) for t in replica_templates(job).values()))
        for job in mpijobs(scope.objects)
        if runs_outside_kueue(scope, job)
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


def _purchase_problems(group: NodeGroup) -> list[tuple[str, str]]:
    """(field, what EC2 refuses) for the group's reservation, Capacity Block and Spot settings."""
    purchase = Purchase.of(group)
    problems = []
    # A variable or a placeholder (cr-xxxxxxxxxxxxxxxxx) is a value still to come: placeholder-value reports the latter.
    rid = purchase.reservation_id
    written = rid and "${" not in rid and not holds_placeholder(rid)
    if written and not CAPACITY_RESERVATION_ID.match(purchase.reservation_id):
        problems.append(
            ("capacityReservation", f"{purchase.reservation_id!r} is not a capacity reservation id (cr-...)")
        )
    if purchase.reservation_id and len(group.instance_types) > 1:
        problems.append(
            (
                "instanceTypes",
                "a capacity reservation is for one instance type, and EC2 refuses to launch the others into it: "
                "set instanceType alone",
            )
        )
    if purchase.block and not purchase.reservation_id and not purchase.resource_group:
        problems.append(
            (
                "instanceMarketOptions",
                "a Capacity Block is launched into only by its id: set capacityReservationTarget.capacityReservationID",
            )
        )
    if purchase.spot and purchase.targeted and not purchase.block:
        problems.append(("spot", "Spot instances cannot launch into a capacity reservation"))
    return problems


@rule(
    "reserved-capacity-invalid",
    "error",
    requires=("cluster",),
    premise="A node group of the ClusterConfig targets a capacity reservation or Capacity Block "
    "(capacityReservation, instanceMarketOptions.marketType capacity-block).",
    consequence="ec2",
    description="A node group's capacity reservation or Capacity Block settings are ones EC2 refuses to launch",
    remediation="Target the reservation by its id (cr- and 17 hex digits) from a group of its one instance type; a "
    "Capacity Block needs capacityReservationTarget.capacityReservationID; Spot cannot use a reservation.",
    docs="""eksctl v0.230.0 checks only the shape of `capacityReservation` and `instanceMarketOptions`
      (pkg/apis/eksctl.io/v1alpha5/validation.go: one of preference or target, `capacity-block` the only market
      type, no market type without a reservation) and writes them into the launch template
      (pkg/cfn/builder/managed_launch_template.go). EC2 then refuses every launch of: a reservation id that is
      not one, an instance type the targeted reservation is not for, a Capacity Block without its reservation id
      (EC2 User Guide, "Launch instances using Capacity Blocks"), a Spot instance into a reservation. The group
      never gets a node. eksctl makes a managed Capacity Block group CAPACITY_BLOCK whatever `spot` says
      (pkg/cfn/builder/managed_nodegroup.go), so Spot is only refused beside an On-Demand reservation. A
      reservation id that is still a placeholder (`cr-xxxxxxxxxxxxxxxxx`) is left to placeholder-value.""",
)
def reserved_capacity_invalid(scope: Scope):
    for group in scope.node_groups:
        for field, problem in _purchase_problems(group):
            yield Finding(scope.cluster_config, f"{group.describe()}: {problem}", (*group.path, field))


def _zones(scope: Scope, group: NodeGroup) -> int:
    """How many zones the group launches in: its own subnets or zones, else the cluster's."""
    own = len(group.subnets) or len(group.zones)
    return own or len(sequence(scope.cluster_config.doc, "availabilityZones"))


def _purchase_risks(scope: Scope, group: NodeGroup) -> list[tuple[str, str]]:
    purchase = Purchase.of(group)
    risks = []
    # An EFA group spread in a way eksctl or EKS refuses is efa-node-group-not-single-az's error, not also a risk here.
    spread = (purchase.targeted or purchase.block) and _zones(scope, group) > 1
    if spread and efa_zone_spread(group) is None:
        where = "availabilityZones" if group.zones else "subnets" if group.subnets else "availabilityZones"
        risks.append(
            (
                where,
                f"the group launches in {_zones(scope, group)} zones but its reservation is in one: EC2 refuses the "
                "launches in the others, so nodes come late or not at all when the Auto Scaling group picks them",
            )
        )
    if purchase.block:
        for field in ("desiredCapacity", "minSize"):
            if isinstance(group.doc.get(field), int) and group.doc[field] > 0:
                risks.append(
                    (
                        field,
                        f"{field} {group.doc[field]}: creating or updating the group outside the block's window "
                        "fails (instances launch only while it is active); 0 lets it wait",
                    )
                )
                break
        if isinstance(group.doc.get("maxSize"), int) and group.doc["maxSize"] > CAPACITY_BLOCK_MAX_INSTANCES:
            risks.append(
                (
                    "maxSize",
                    f"a Capacity Block holds at most {CAPACITY_BLOCK_MAX_INSTANCES} instances: launches beyond the "
                    "block's fail",
                )
            )
    if purchase.spot and group.efa_enabled:
        risks.append(("spot", "Spot on an efaEnabled group: one reclaimed node ends the whole MPI job"))
    return risks


@rule(
    "reserved-capacity-at-risk",
    "warning",
    requires=("cluster",),
    premise="A node group of the ClusterConfig targets a capacity reservation or Capacity Block, or is Spot with "
    "efaEnabled.",
    consequence="risk",
    description="A node group's reservation, Capacity Block or Spot settings work only some of the time",
    remediation="Give a reserved group the reservation's one zone (availabilityZones or one subnet); start a Capacity "
    "Block group at desiredCapacity 0 with maxSize at most the block's instances; keep Spot off EFA groups.",
    docs="""What launches, but not always: a reservation (and a Capacity Block) is in one zone, and EC2 refuses
      instances launched into it from a subnet of another (EC2 User Guide, "Launch instances using Capacity
      Blocks"), so a group spread over several zones (its own, or the cluster's when it names none) gets nodes
      only as often as the Auto Scaling group picks the right zone. It is a warning where
      efa-node-group-not-single-az, for a similar spread, is an error: eksctl gives a managed group with a
      reservation no placement group (pkg/cfn/builder/managed_launch_template.go), so the launches succeed in the
      reservation's zone after retries and EKS refuses no node group update; an EFA group eksctl refuses outright
      for its zones, or spreads with a cluster placement group, is that rule's alone. A Capacity Block launches
      only while it is active: AWS asks for desired capacity 0 when creating a group before then and when
      updating one (Amazon EKS User Guide, "Create self-managed nodes with Capacity Blocks for ML" and "...managed
      node group with Capacity Blocks"); a desired size of 1 is fine while the block runs. A block holds 1 to 64
      instances. A reclaimed Spot node ends the whole MPI job it was part of.""",
)
def reserved_capacity_at_risk(scope: Scope):
    for group in scope.node_groups:
        for field, problem in _purchase_risks(scope, group):
            yield Finding(scope.cluster_config, f"{group.describe()}: {problem}", (*group.path, field))


@rule(
    "efa-reservation-without-placement-group",
    "warning",
    requires=("cluster",),
    premise="An efaEnabled managed node group of the ClusterConfig has a capacityReservation that is not a Capacity "
    "Block, and names no placement group.",
    consequence="performance",
    description="eksctl makes no cluster placement group for an EFA node group with a capacity reservation",
    remediation="Create the On-Demand Capacity Reservation in a cluster placement group (EC2 User Guide, "
    '"Capacity Reservations for cluster placement groups"), or give the group placement.groupName.',
    docs="""For an efaEnabled managed group eksctl v0.230.0 creates a cluster placement group unless the group
      has a placement or any capacityReservation (pkg/cfn/builder/managed_launch_template.go: "A reservation
      should already be created with a placement group"). A reservation outside a cluster placement group puts
      the EFA nodes wherever EC2 has room, with longer network paths between them than the placement group
      gives. A Capacity Block's instances are placed together by EC2 already; a self-managed group always gets
      its placement group (pkg/cfn/builder/nodegroup.go).""",
)
def efa_reservation_without_placement_group(scope: Scope):
    for group in scope.node_groups:
        purchase = Purchase.of(group)
        efa = group.managed and group.efa_enabled and not mapping(group.doc, "placement")
        if efa and purchase.reservation and not purchase.block:
            yield Finding(
                scope.cluster_config,
                f"{group.describe()}: with a capacity reservation eksctl makes no cluster placement group for its "
                "EFA nodes; create the reservation in one",
                (*group.path, "capacityReservation"),
            )


# --- node group sizes ---------------------------------------------------------------------------


@rule(
    "node-group-size-invalid",
    "error",
    requires=("cluster",),
    premise="A node group of the ClusterConfig sets minSize, desiredCapacity or maxSize.",
    consequence="eksctl",
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
    premise="A managed node group of the ClusterConfig has a maxSize above EKS's default quota; the account's own "
    "quota is not visible.",
    consequence="risk",
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
