"""Is the cluster the kubeconfig points at ready for an environment?

    scripts/status [--env ENV] [--context CTX] [--format text|json]

What is checked comes from the environment's rendered manifests and eksctl ClusterConfig: the nodes of
each node group (allocatable nvidia.com/gpu and vpc.amazonaws.com/efa against the instance catalogue),
the health of each GPU node, the device plugin DaemonSets, the MPIJob CRD and the MPI operator, the FSx
CSI driver and its controller, the StorageClasses and claims, the Flux Kustomizations, and the MPIJobs.

GPU node health (`node-health GROUP`) is what the EKS node monitoring agent writes on the node: the conditions
AcceleratedHardwareReady, ContainerRuntimeReady, KernelReady, NetworkingReady and StorageReady. One that is False
fails, naming the node, the condition, the agent's reason and message; the fix is to cordon and drain the node,
and says what the group's repair does (EKS node auto repair when its ClusterConfig has `nodeRepairConfig:
{enabled: true}`, otherwise terminating the drained instance by hand). GPU nodes that carry none of the
conditions warn, once per group: the agent (the EKS add-on eks-node-monitoring-agent) is not running there.

A finished MPIJob shows its launcher's verdict: the last line of the launcher container's termination message
(an nccl-tests job writes `fabric-check: PASS|FAIL ...` to /dev/termination-log), in the fail line when the
MPIJob Failed and in the ok line when it Succeeded.

One line per check, `ok|warn|fail <check>: <what> (fix: ...)`, or with --format json a list of
{check, status, message, fix}. Exit status: 0 every check ok (warnings allowed), 1 a check failed,
2 a usage or input error (unknown environment, no kubeconfig, unknown context, unreachable API server),
in one line. The kubeconfig is $KUBECONFIG or ~/.kube/config.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from ..core.credentials import mask_text
from ..core.errors import InputError
from ..facts import catalog
from ..model.kinds import FLUX_KUSTOMIZATION
from ..model.manifest import Environment
from ..model.node_health import AGENT, AGENT_CONDITIONS, REPAIR_AFTER_MINUTES, repair_enabled, repair_override
from ..render.repository import environment_names
from .cluster import Cluster, one_line_errors

# eksctl v0.230.0 labels the nodes of every node group, managed or not, alpha.eksctl.io/nodegroup-name
# (pkg/apis/eksctl.io/v1alpha5/defaults.go setNodeGroupBaseDefaults -> setDefaultNodeLabels); EKS adds
# eks.amazonaws.com/nodegroup to a managed group's nodes (types.go EKSNodeGroupNameLabel, which eksctl
# itself uses for unowned managed groups).
NODEGROUP_LABELS = ("alpha.eksctl.io/nodegroup-name", "eks.amazonaws.com/nodegroup")
GPU = "nvidia.com/gpu"
EFA = "vpc.amazonaws.com/efa"
MPIJOB_CRD = "mpijobs.kubeflow.org"
MPIJOB_VERSION = "v2beta1"
# kubeflow/mpi-operator v0.8.2 manifests/overlays/standalone: Deployment mpi-operator in namespace mpi-operator.
MPI_OPERATOR = ("mpi-operator", "mpi-operator")
FSX_DRIVER = "fsx.csi.aws.com"
# The aws-fsx-csi-driver chart's controller Deployment, in the HelmRelease's targetNamespace.
FSX_CONTROLLER = "fsx-csi-controller"
FSX_RELEASE = "aws-fsx-csi-driver"

OK, WARN, FAIL = "ok", "warn", "fail"


@dataclass
class Check:
    check: str
    status: str  # ok | warn | fail
    message: str
    fix: str = ""

    def line(self) -> str:
        fix = f" (fix: {self.fix})" if self.fix else ""
        return f"{self.status} {self.check}: {self.message}{fix}"


def _missing(error) -> bool:
    return getattr(error, "status", None) == 404


def _condition(conditions, kind: str):
    for condition in conditions or []:
        get = condition.get if isinstance(condition, dict) else lambda key, c=condition: getattr(c, key, None)
        if get("type") == kind:
            return get("status"), get("message") or get("reason") or ""
    return None, ""


def _one_line(text, limit: int = 200) -> str:
    """Cluster text masked (before it is cut, so that no half secret escapes the mask), on one line, trimmed."""
    return " ".join(mask_text(str(text)).split())[:limit]


def _quantity(value) -> int:
    try:
        return int(str(value or "0"))
    except ValueError:
        return 0


# --- node groups ---------------------------------------------------------------------------------------


def node_groups(environment: Environment) -> list[dict]:
    doc = environment.cluster_config.doc if environment.cluster_config else {}
    groups = []
    for key in ("managedNodeGroups", "nodeGroups"):
        groups.extend(g for g in doc.get(key) or [] if isinstance(g, dict) and g.get("name"))
    return groups


def _group_nodes(nodes, name: str) -> list:
    return [n for n in nodes if any((n.metadata.labels or {}).get(label) == name for label in NODEGROUP_LABELS)]


def _instance_type(group: dict) -> str:
    return group.get("instanceType") or (group.get("instanceTypes") or [""])[0]


def group_gpus(group: dict) -> int:
    known = catalog.lookup(_instance_type(group))
    return known.gpus if known else 0


def check_node_group(group: dict, nodes) -> Check:
    name = group["name"]
    instance = _instance_type(group)
    known = catalog.lookup(instance)
    gpus = known.gpus if known else 0
    efa = known.efa_interfaces if known and group.get("efaEnabled") else 0
    minimum = int(group.get("minSize", group.get("desiredCapacity", 1)) or 0)
    check = f"nodes {name}"
    mine = _group_nodes(nodes, name)
    if not mine:
        if minimum == 0:
            return Check(check, OK, f"0 nodes ({instance}); the group scales from zero (minSize 0)")
        return Check(
            check,
            FAIL,
            f"0 nodes labelled {NODEGROUP_LABELS[0]}={name}, minSize {minimum}",
            f"eksctl create nodegroup --config-file <ClusterConfig> --include={name}",
        )
    problems = []
    for node in mine:
        allocatable = node.status.allocatable or {} if node.status else {}
        ready, _ = _condition(node.status.conditions if node.status else None, "Ready")
        if ready != "True":
            problems.append(f"{node.metadata.name} not Ready")
        if _quantity(allocatable.get(GPU)) < gpus:
            problems.append(f"{node.metadata.name} {GPU} {_quantity(allocatable.get(GPU))}/{gpus}")
        if _quantity(allocatable.get(EFA)) < efa:
            problems.append(f"{node.metadata.name} {EFA} {_quantity(allocatable.get(EFA))}/{efa}")
    wants = ", ".join(f"{resource} {count}" for resource, count in ((GPU, gpus), (EFA, efa)) if count)
    if problems:
        return Check(
            check,
            FAIL,
            f"{len(mine)} node(s) ({instance}{', each ' + wants if wants else ''}): " + "; ".join(problems),
            "check the node's kubelet and the device plugin pods on it (kubectl describe node)",
        )
    return Check(check, OK, f"{len(mine)} node(s) Ready ({instance}{', each ' + wants if wants else ''})")


# --- GPU node health --------------------------------------------------------------------------------------


# The node monitoring agent's conditions (model/node_health.py): a node without any of them has no agent reporting.


def _agent_conditions(node) -> dict[str, object]:
    """The agent's conditions on a node that say True or False (the agent sets no other status)."""
    conditions = node.status.conditions if node.status else None
    return {c.type: c for c in conditions or [] if c.type in AGENT_CONDITIONS and c.status in ("True", "False")}


_INSTANCE_ID = re.compile(r"i-[0-9a-f]{8,17}")


def _instance_id(node) -> str:
    # spec.providerID of an EC2 node: aws:///<zone>/<instance id>
    # The kubelet sets it, so it is taken only when it is an instance id: it goes into a command people paste.
    provider = (node.spec.provider_id if node.spec else None) or ""
    last = provider.rsplit("/", 1)[-1]
    return last if _INSTANCE_ID.fullmatch(last) else "<the node's instance id, from spec.providerID>"


def what_repair_does(group: dict, node, condition: str, reason: str) -> str:
    name = group["name"]
    if not repair_enabled(group):
        return (
            f"repair is off for node group {name} (no nodeRepairConfig: {{enabled: true}}): once drained, terminate "
            f"the instance (aws ec2 terminate-instances --instance-ids {_instance_id(node)}) and the group "
            "replaces it, or turn nodeRepairConfig on in the ClusterConfig"
        )
    override = repair_override(group, condition, reason)
    if override:
        return (
            f"EKS node auto repair (on for {name}) will {override.get('repairAction')} it "
            f"{override.get('minRepairWaitTimeMins')} minutes after the agent detected it (nodeRepairConfigOverrides)"
        )
    delay = REPAIR_AFTER_MINUTES.get(condition)
    when = f"when it has been False for {delay} minutes" if delay else "when the condition's repair wait is over"
    return f"EKS node auto repair (on for {name}) will reboot or replace it {when}"


def _unhealthy(group: dict, node, condition) -> Check:
    node_name = node.metadata.name
    return Check(
        f"node-health {group['name']}",
        FAIL,
        f"{node_name} {condition.type} False: {_one_line(condition.reason or 'no reason')}: "
        f"{_one_line(condition.message or 'no message')}",
        f"kubectl cordon {node_name}, then kubectl drain {node_name} --ignore-daemonsets --delete-emptydir-data "
        f"so the job's pods move; {what_repair_does(group, node, condition.type, condition.reason or '')}",
    )


def check_node_health(group: dict, nodes) -> list[Check]:
    """The node monitoring agent's conditions on each node of a GPU node group: a fail per condition that is
    False, one warning for the nodes that report none, one ok for the nodes whose conditions are all True."""
    check = f"node-health {group['name']}"
    checks, silent, healthy, read = [], [], [], set()
    for node in _group_nodes(nodes, group["name"]):
        conditions = _agent_conditions(node)
        false = [c for _, c in sorted(conditions.items()) if c.status == "False"]
        checks.extend(_unhealthy(group, node, condition) for condition in false)
        if not conditions:
            silent.append(node.metadata.name)
        elif not false:
            healthy.append(node.metadata.name)
            read.update(conditions)
    if silent:
        checks.append(
            Check(
                check,
                WARN,
                f"no health reported by {len(silent)} node(s) ({', '.join(silent)}): none carries the node "
                f"monitoring agent's conditions ({', '.join(AGENT_CONDITIONS)}), so the agent is not running there",
                f"install the EKS add-on {AGENT} (in the ClusterConfig's addons, then eksctl create addon "
                f"--config-file <ClusterConfig>); if it is installed, look for its pod on these nodes "
                f"(kubectl get pods -A -o wide | grep {AGENT})",
            )
        )
    if healthy:
        conditions = ", ".join(c for c in AGENT_CONDITIONS if c in read)
        checks.append(Check(check, OK, f"{len(healthy)} node(s) healthy, agent conditions read: {conditions} True"))
    return checks


# --- workloads -----------------------------------------------------------------------------------------


def check_daemonset(apps, namespace: str, name: str) -> Check:
    from kubernetes.client.rest import ApiException

    check = f"daemonset {namespace}/{name}"
    try:
        status = apps.read_namespaced_daemon_set_status(name, namespace).status
    except ApiException as error:
        if not _missing(error):
            raise
        return Check(check, FAIL, "not found", "flux reconcile kustomization infrastructure --with-source")
    desired, ready = status.desired_number_scheduled or 0, status.number_ready or 0
    if desired == 0:
        return Check(check, OK, "no node to run on yet (0 scheduled)")
    if ready < desired:
        return Check(check, FAIL, f"{ready}/{desired} ready", f"kubectl -n {namespace} describe daemonset {name}")
    return Check(check, OK, f"{ready}/{desired} ready")


def check_deployment(apps, namespace: str, name: str, fix: str) -> Check:
    from kubernetes.client.rest import ApiException

    check = f"deployment {namespace}/{name}"
    try:
        status = apps.read_namespaced_deployment_status(name, namespace).status
    except ApiException as error:
        if not _missing(error):
            raise
        return Check(check, FAIL, "not found", fix)
    available, message = _condition(status.conditions, "Available")
    replicas = f"{status.available_replicas or 0}/{status.replicas or 0} available"
    if available != "True":
        return Check(
            check, FAIL, f"not Available: {message or replicas}", f"kubectl -n {namespace} describe deployment {name}"
        )
    return Check(check, OK, replicas)


def check_mpijob_crd(extensions) -> Check:
    from kubernetes.client.rest import ApiException

    check = f"crd {MPIJOB_CRD}"
    try:
        crd = extensions.read_custom_resource_definition(MPIJOB_CRD)
    except ApiException as error:
        if not _missing(error):
            raise
        return Check(check, FAIL, "not installed", "flux reconcile kustomization mpi-operator --with-source")
    established, _ = _condition(crd.status.conditions if crd.status else None, "Established")
    served = [v.name for v in crd.spec.versions if v.served]
    if established != "True" or MPIJOB_VERSION not in served:
        return Check(
            check,
            FAIL,
            f"{MPIJOB_VERSION} not served (served: {', '.join(served) or 'none'}; Established {established})",
            "install the MPI operator v0.8.x (kubeflow.org/v2beta1)",
        )
    return Check(check, OK, f"{MPIJOB_VERSION} served")


def check_csi_driver(storage) -> Check:
    from kubernetes.client.rest import ApiException

    check = f"csidriver {FSX_DRIVER}"
    try:
        storage.read_csi_driver(FSX_DRIVER)
    except ApiException as error:
        if not _missing(error):
            raise
        return Check(check, FAIL, "not registered", f"flux reconcile helmrelease {FSX_RELEASE} -n flux-system")
    return Check(check, OK, "registered")


def check_storage_class(storage, name: str) -> Check:
    from kubernetes.client.rest import ApiException

    check = f"storageclass {name}"
    try:
        found = storage.read_storage_class(name)
    except ApiException as error:
        if not _missing(error):
            raise
        return Check(check, FAIL, "not found", "flux reconcile kustomization infrastructure --with-source")
    return Check(check, OK, f"provisioner {found.provisioner}")


def check_claim(core, namespace: str, name: str) -> Check:
    from kubernetes.client.rest import ApiException

    check = f"claim {namespace}/{name}"
    try:
        claim = core.read_namespaced_persistent_volume_claim(name, namespace)
    except ApiException as error:
        if not _missing(error):
            raise
        return Check(check, FAIL, "not found", "flux reconcile kustomization training --with-source")
    phase = claim.status.phase if claim.status else None
    if phase != "Bound":
        return Check(check, FAIL, f"{phase or 'no phase'}, not Bound", f"kubectl -n {namespace} describe pvc {name}")
    return Check(check, OK, f"Bound to {claim.spec.volume_name or 'a volume'}")


def check_kustomization(custom, namespace: str, name: str) -> Check:
    from kubernetes.client.rest import ApiException

    check = f"kustomization {namespace}/{name}"
    fix = f"flux reconcile kustomization {name} -n {namespace} --with-source"
    try:
        found = custom.get_namespaced_custom_object(
            "kustomize.toolkit.fluxcd.io", "v1", namespace, "kustomizations", name
        )
    except ApiException as error:
        if not _missing(error):
            raise
        return Check(
            check, FAIL, "not found", fix if name != "flux-system" else "flux bootstrap (see docs/operations.md)"
        )
    ready, message = _condition((found.get("status") or {}).get("conditions"), "Ready")
    message = _one_line(message)
    if ready == "True":
        return Check(check, OK, f"Ready: {message}" if message else "Ready")
    if ready == "False":
        return Check(check, FAIL, f"not Ready: {message}", fix)
    return Check(check, WARN, f"reconciling: {message}" if message else "no Ready condition yet", fix)


def _replica_phase(statuses: dict, kind: str) -> str:
    counts = statuses.get(kind) or {}
    parts = [f"{counts[k]} {k}" for k in ("active", "succeeded", "failed") if counts.get(k)]
    return f"{kind.lower()} {', '.join(parts) or 'none'}"


# The labels the MPI operator v0.8.2 puts on the launcher pod (pkg/controller/mpi_job_controller.go,
# newLauncherPodTemplate -> defaultLabels; the keys are pkg/apis/kubeflow/v2beta1/constants.go's).
def launcher_selector(name: str) -> str:
    return (
        f"training.kubeflow.org/operator-name=mpi-operator,training.kubeflow.org/job-name={name},"
        "training.kubeflow.org/job-role=launcher"
    )


def _launcher_container(job: dict) -> str:
    # The operator runs the launcher template's first container (newLauncherPodTemplate: Containers[0]).
    spec = ((job.get("spec") or {}).get("mpiReplicaSpecs") or {}).get("Launcher") or {}
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or [{}]
    return (containers[0] or {}).get("name") or "launcher"


def _termination_message(pod, container: str) -> str:
    for status in (pod.status.container_statuses if pod.status else None) or []:
        if status.name != container:
            continue
        # With restartPolicy OnFailure the container restarts in the same pod: the run that ended is lastState.
        for state in (status.state, status.last_state):
            terminated = state.terminated if state else None
            if terminated and (terminated.message or "").strip():
                return terminated.message
    return ""


def launcher_verdict(core, namespace: str, job: dict) -> str:
    """The last line of the newest launcher pod's termination message (a job that writes its verdict to
    /dev/termination-log), masked and on one line; "" without one."""
    from kubernetes.client.rest import ApiException

    try:
        pods = core.list_namespaced_pod(namespace, label_selector=launcher_selector(job["metadata"]["name"])).items
    except ApiException:
        return ""  # no right to read pods there: the job's own status still says what it can
    container = _launcher_container(job)
    for pod in sorted(pods, key=lambda p: p.metadata.creation_timestamp, reverse=True):
        message = mask_text(_termination_message(pod, container))
        lines = [line for line in message.splitlines() if line.strip()]
        if lines:
            return _one_line(lines[-1])
    return ""


def check_mpijob(custom, core, namespace: str, name: str) -> Check:
    from kubernetes.client.rest import ApiException

    check = f"mpijob {namespace}/{name}"
    try:
        job = custom.get_namespaced_custom_object("kubeflow.org", MPIJOB_VERSION, namespace, "mpijobs", name)
    except ApiException as error:
        if not _missing(error):
            raise
        return Check(check, WARN, "not on the cluster (not applied yet, or deleted after it ran)")
    status = job.get("status") or {}
    statuses = status.get("replicaStatuses") or {}
    phases = f"{_replica_phase(statuses, 'Launcher')}; {_replica_phase(statuses, 'Worker')}"
    conditions = status.get("conditions") or []
    for kind in ("Failed", "Succeeded", "Running", "Suspended", "Created"):
        state, message = _condition(conditions, kind)
        if state != "True":
            continue
        verdict = launcher_verdict(core, namespace, job) if kind in ("Failed", "Succeeded") else ""
        if kind == "Failed":
            fix = f"kubectl -n {namespace} logs job/{name}-launcher"
            launcher = f"; launcher: {verdict}" if verdict else ""
            return Check(check, FAIL, f"Failed: {_one_line(message)}{launcher} ({phases})", fix)
        if verdict:
            return Check(check, OK, f"{kind}: {verdict} ({phases})")
        if kind == "Suspended":
            return _suspended(check, job_workload(custom, namespace, job), phases)
        return Check(check, OK if kind in ("Running", "Succeeded") else WARN, f"{kind} ({phases})")
    return Check(check, WARN, f"no condition yet ({phases})")


# Kueue v0.19.2 holds a job it has not admitted suspended, and says why in its Workload's QuotaReserved condition
# (pkg/scheduler/flavorassigner/flavorassigner.go fitsResourceQuota). The reason is "Pending" unless the alpha feature
# gate UnadmittedWorkloadsObservability is on (pkg/workload/workload.go UnadmittedWorkloadReasonWithFallback); then
# it is ExceedsMaxQuota or NoMatchingFlavor when the job can never fit (apis/kueue/v1beta2/workload_types.go). The
# message tells the two apart in both cases: "... > maximum capacity (Q)" when a pod set asks more than the
# ClusterQueue can ever hold in a flavor, "insufficient unused quota ..., N more needed" when it fits once other
# jobs finish (a flavor that could hold it later).
NEVER_ADMITTED = ("ExceedsMaxQuota", "NoMatchingFlavor")
ABOVE_QUOTA, WAITS = "> maximum capacity", "more needed"


def never_admitted(reason: str, message: str) -> bool:
    """Kueue can never admit the job as it stands: waiting does not help."""
    return reason in NEVER_ADMITTED or (ABOVE_QUOTA in message and WAITS not in message)


KUEUE_GROUP, KUEUE_VERSION = "kueue.x-k8s.io", "v1beta2"
QUOTA_FIX = "lower the job's workers (or what each asks) or raise the queue's quota with scripts/scale"


def job_workload(custom, namespace: str, job: dict) -> dict | None:
    """The newest Kueue Workload owned by the MPIJob (Kueue's job reconciler makes one per job, with an
    ownerReference to it), or None: no Workload, or no Kueue (its CRD absent) or no right to read them."""
    from kubernetes.client.rest import ApiException

    try:
        workloads = custom.list_namespaced_custom_object(KUEUE_GROUP, KUEUE_VERSION, namespace, "workloads")["items"]
    except ApiException:
        return None
    uid, name = job["metadata"].get("uid"), job["metadata"]["name"]
    owned = [
        w
        for w in workloads
        if any(
            o.get("kind") == "MPIJob" and o.get("name") == name and (not uid or o.get("uid") == uid)
            for o in w["metadata"].get("ownerReferences") or []
        )
    ]
    return max(owned, key=lambda w: w["metadata"].get("creationTimestamp") or "", default=None)


def _suspended(check: str, workload: dict | None, phases: str) -> Check:
    """A suspended MPIJob with Kueue's reason: fail when Kueue can never admit it, warn while it waits."""
    if workload is None:
        return Check(
            check,
            WARN,
            f"Suspended, and no Kueue Workload for it ({phases})",
            "check its kueue.x-k8s.io/queue-name label names a LocalQueue, and that Kueue runs",
        )
    conditions = (workload.get("status") or {}).get("conditions") or []
    reserved = next((c for c in conditions if c.get("type") == "QuotaReserved"), {})
    queue = (workload.get("spec") or {}).get("queueName") or "its queue"
    said = _one_line(reserved.get("message") or reserved.get("reason") or "no reason yet", 400)
    if reserved.get("status") != "False":
        return Check(check, WARN, f"Suspended: Kueue: {said} ({phases})")
    if never_admitted(str(reserved.get("reason") or ""), str(reserved.get("message") or "")):
        return Check(check, FAIL, f"Suspended, never admitted by {queue}: Kueue: {said} ({phases})", QUOTA_FIX)
    return Check(
        check,
        WARN,
        f"Suspended, waits for quota in {queue}: Kueue: {said} ({phases})",
        f"it starts when the jobs ahead of it finish; to start it sooner, {QUOTA_FIX}",
    )


# --- the environment ---------------------------------------------------------------------------------


def _objects(environment: Environment, group_kind: tuple[str, str]) -> list[tuple[str, str]]:
    return sorted({(m.namespace, m.name) for m in environment.objects if m.group_kind == group_kind})


def _fsx_namespace(environment: Environment) -> str:
    for manifest in environment.objects:
        if manifest.group_kind == ("helm.toolkit.fluxcd.io", "HelmRelease") and manifest.name == FSX_RELEASE:
            spec = manifest.doc.get("spec") or {}
            return spec.get("targetNamespace") or manifest.namespace or "kube-system"
    return "kube-system"


@one_line_errors
def run_checks(cluster: Cluster, environment: Environment) -> list[Check]:
    from kubernetes import client

    core, apps = client.CoreV1Api(cluster.api), client.AppsV1Api(cluster.api)
    storage, custom = client.StorageV1Api(cluster.api), client.CustomObjectsApi(cluster.api)
    extensions = client.ApiextensionsV1Api(cluster.api)
    checks = []
    nodes = core.list_node().items
    for group in node_groups(environment):
        checks.append(check_node_group(group, nodes))
        if group_gpus(group):
            checks.extend(check_node_health(group, nodes))
    for namespace, name in _objects(environment, ("apps", "DaemonSet")):
        checks.append(check_daemonset(apps, namespace, name))
    kustomizations = {(k.manifest.namespace or "flux-system", k.name) for k in environment.kustomizations}
    kustomizations.update(_objects(environment, FLUX_KUSTOMIZATION))
    if any(name == "mpi-operator" for _, name in kustomizations) or _objects(environment, ("kubeflow.org", "MPIJob")):
        checks.append(check_mpijob_crd(extensions))
        checks.append(
            check_deployment(
                apps, *MPI_OPERATOR, "flux reconcile kustomization mpi-operator -n flux-system --with-source"
            )
        )
    classes = [m for m in environment.objects if m.group_kind == ("storage.k8s.io", "StorageClass")]
    if any(m.doc.get("provisioner") == FSX_DRIVER for m in classes):
        checks.append(check_csi_driver(storage))
        checks.append(
            check_deployment(
                apps,
                _fsx_namespace(environment),
                FSX_CONTROLLER,
                f"flux reconcile helmrelease {FSX_RELEASE} -n flux-system",
            )
        )
    checks.extend(check_storage_class(storage, m.name) for m in sorted(classes, key=lambda m: m.name))
    for namespace, name in _objects(environment, ("", "PersistentVolumeClaim")):
        checks.append(check_claim(core, namespace, name))
    for namespace, name in sorted(kustomizations):
        checks.append(check_kustomization(custom, namespace, name))
    for namespace, name in _objects(environment, ("kubeflow.org", "MPIJob")):
        checks.append(check_mpijob(custom, core, namespace, name))
    return checks


def choose_environment(root: Path, env: str | None) -> str:
    names = environment_names(root)
    if env:
        if env not in names:
            raise InputError(f"unknown environment {env!r}; known: {', '.join(names) or 'none'}")
        return env
    if len(names) == 1:
        return names[0]
    raise InputError(f"name the environment with --env; known: {', '.join(names) or 'none'}")


def report(checks: list[Check], form: str) -> str:
    # Messages repeat what the cluster says (Flux's Ready message can quote a source URL or an apply
    # error): masked like every other output of the tools.
    checks = [Check(c.check, c.status, mask_text(c.message), mask_text(c.fix)) for c in checks]
    if form == "json":
        return json.dumps([asdict(c) for c in checks], indent=2)
    return "\n".join(c.line() for c in checks)
