"""Place an environment's MPIJobs on a simulated cluster before paying for one.

    scripts/simulate [--env ENV] [--format text|json] [--timeout SECONDS]

Starts a local control plane (etcd, kube-apiserver, kube-scheduler, kwok, the MPI operator, and Kueue's
manager when the environment has Kueue: its HelmRelease or a ClusterQueue, live/kueue.py), makes one kwok
node per instance each eksctl node group can grow to (maxSize), with the instance type's cpu, memory, GPUs
and EFA interfaces from the catalogue, the group's labels, taints and zone; applies the rendered objects in
Flux's dependsOn order (the environment's ResourceFlavors, ClusterQueue and LocalQueue among them); lets Kueue
admit each job from its queue, the MPI operator create its pods and kube-scheduler place them.

Reports per MPIJob: scheduled (on which node groups); queued (Kueue holds it: its Workload waits for quota
that other jobs use, named with the quota); or NOT scheduled (it can never run as it is: more than the queue's
whole quota, no flavor or node that fits, with Kueue's or the scheduler's reason). Exit 0 when every job is
scheduled or queued behind jobs that are scheduled, 1 otherwise, 2 on input errors.

Not simulated, and said so: the FSx CSI driver (the claim is bound to a stub volume), the Job controller
(simulate makes the launcher Job's pod), controllers behind other HelmReleases and Flux sources (stored
only), kubelet reservations (allocatable is the instance's whole capacity).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes import client, config, dynamic, utils
from kubernetes.client.rest import ApiException
from kubernetes.dynamic.exceptions import DynamicApiError, ResourceNotFoundError

from ..core.credentials import mask_text
from ..core.errors import InputError
from ..facts import catalog
from ..render import platform
from ..render import repository as render
from ..schemas.checker import SchemaStore
from . import kueue
from .cluster import wait_established
from .control_plane import CORE, ControlPlane

DEFAULT_TIMEOUT = 60.0
SETTLE = 3.0
JOB_LABEL = "training.kubeflow.org/job-name"  # mpi-operator v0.8.2 labels each pod with its job
ROLE_LABEL = "training.kubeflow.org/job-role"
NODEGROUP_LABEL = "alpha.eksctl.io/nodegroup-name"  # eksctl's label on every node group's nodes
MANAGED_NODEGROUP_LABEL = "eks.amazonaws.com/nodegroup"  # EKS's, on managed node groups' nodes
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
FLUX_APIS = ("kustomize.toolkit.fluxcd.io", "source.toolkit.fluxcd.io", "helm.toolkit.fluxcd.io")


@dataclass
class PodPlace:
    name: str
    role: str
    node: str = ""
    node_group: str = ""
    reason: str = ""  # the scheduler's, while Pending


@dataclass
class Admission:
    """Kueue's view of a job: its Workload, and while that is not admitted, Kueue's reason."""

    workload: str = ""
    admitted: bool = False
    message: str = ""  # the QuotaReserved condition's, while false
    waiting_for_quota: bool = False  # Kueue holds it until other workloads release quota
    quota: str = ""  # the quota that holds it, and by whom
    held_by: list[str] = field(default_factory=list)  # the MPIJobs using that quota


@dataclass
class JobResult:
    namespace: str
    name: str
    expected: dict  # role -> replicas
    pods: list[PodPlace] = field(default_factory=list)
    error: str = ""
    admission: Admission | None = None  # None without Kueue
    launcher_refused: str = ""  # the API server's answer to the launcher pod simulate made

    @property
    def scheduled(self) -> bool:
        if self.error:
            return False
        placed = [p for p in self.pods if p.node]
        return len(placed) == sum(self.expected.values())

    @property
    def queued(self) -> bool:
        return not self.error and self.admission is not None and self.admission.waiting_for_quota

    @property
    def refused(self) -> bool:
        """Kueue will not admit it as it is (more than the whole quota, no flavor that fits, no queue)."""
        admission = self.admission
        return admission is not None and not admission.admitted and bool(admission.message) and not self.queued

    @property
    def unschedulable(self) -> bool:
        return bool(self.error) or self.refused or any(p.reason for p in self.pods if not p.node)

    @property
    def state(self) -> str:
        return "scheduled" if self.scheduled else "queued" if self.queued else "NOT scheduled"


@dataclass
class Simulation:
    environment: str
    node_groups: list[dict] = field(default_factory=list)  # name, instanceType, nodes
    notes: list[str] = field(default_factory=list)
    jobs: list[JobResult] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def fits(self) -> bool:
        """Every job scheduled, or queued behind jobs that are scheduled (they finish and free the quota)."""
        scheduled = {j.name for j in self.jobs if j.scheduled}
        return all(
            j.scheduled or (j.queued and j.admission.held_by and set(j.admission.held_by) <= scheduled)
            for j in self.jobs
        )


# --- nodes from the eksctl ClusterConfig ---------------------------------------------------------------------


# kwok nodes a simulation makes in all: each is an object the local control plane stores and kube-scheduler scores
# for every pod, so a hand-written maxSize of a billion would run out of memory instead of failing. Two groups at
# the EKS default quota of nodes per managed node group (450, facts/limits.py) fit.
MAX_SIMULATED_NODES = 1000


def _group_size(group: dict, name: str) -> int:
    value = group.get("maxSize", group.get("desiredCapacity", 1))
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"node group {name}: maxSize {value!r} is not a whole number of nodes")
    return value


def node_docs(cluster_config: dict) -> tuple[list[dict], list[dict]]:
    """(kwok Node objects, node group summaries) for every node group at its maxSize; one line refusing more
    than MAX_SIMULATED_NODES in all."""
    nodes, groups = [], []
    total = 0
    zones = cluster_config.get("availabilityZones") or []
    region = (cluster_config.get("metadata") or {}).get("region", "")
    for managed, key in ((True, "managedNodeGroups"), (False, "nodeGroups")):
        for group in cluster_config.get(key) or []:
            name = group.get("name", "")
            instance = catalog.lookup(str(group.get("instanceType", "")))
            if instance is None:
                raise InputError(f"node group {name}: instance type {group.get('instanceType')!r} not in the catalogue")
            count = _group_size(group, name)
            total += count
            if total > MAX_SIMULATED_NODES:
                raise InputError(
                    f"node group {name}: maxSize {count} makes more than {MAX_SIMULATED_NODES} nodes in all, more "
                    "than a simulation makes; lower maxSize (validate checks the sizes EKS accepts)"
                )
            groups.append({"name": name, "instanceType": instance.name, "nodes": count})
            group_zones = group.get("availabilityZones") or zones or [""]
            resources = {"cpu": str(instance.vcpus), "memory": f"{instance.memory_gib}Gi", "pods": "110"}
            if instance.gpus:
                resources["nvidia.com/gpu"] = str(instance.gpus)
            if group.get("efaEnabled") and instance.efa_interfaces:
                resources["vpc.amazonaws.com/efa"] = str(instance.efa_interfaces)
            for index in range(count):
                node = f"{name}-{index}"
                zone = group_zones[index % len(group_zones)]
                labels = {
                    **{str(k): str(v) for k, v in (group.get("labels") or {}).items()},
                    NODEGROUP_LABEL: name,
                    "node.kubernetes.io/instance-type": instance.name,
                    "kubernetes.io/hostname": node,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "type": "kwok",
                }
                if managed:
                    labels[MANAGED_NODEGROUP_LABEL] = name
                if zone:
                    labels["topology.kubernetes.io/zone"] = zone
                if region:
                    labels["topology.kubernetes.io/region"] = region
                taints = [
                    {k: str(v) for k, v in taint.items() if k in ("key", "value", "effect")}
                    for taint in group.get("taints") or []
                ]
                nodes.append(
                    {
                        "apiVersion": "v1",
                        "kind": "Node",
                        "metadata": {"name": node, "labels": labels, "annotations": {"kwok.x-k8s.io/node": "fake"}},
                        "spec": {"taints": taints} if taints else {},
                        "status": {"capacity": resources, "allocatable": dict(resources)},
                    }
                )
    return nodes, groups


# --- the cluster ---------------------------------------------------------------------------------------------


class Cluster:
    def __init__(self, plane: ControlPlane):
        self.client = client
        self.api = config.new_client_from_config(str(plane.kubeconfig))
        self.core = client.CoreV1Api(self.api)
        self.extensions = client.ApiextensionsV1Api(self.api)
        self.dynamic = dynamic.DynamicClient(self.api)

    def install_crds(self, docs: list[dict], timeout: float = 60) -> None:
        names = []
        for doc in docs:
            doc.pop("status", None)
            self.extensions.create_custom_resource_definition(doc)
            names.append(doc["metadata"]["name"])
        wait_established(self.extensions, names, timeout)
        self.dynamic = type(self.dynamic)(self.api)  # discovery again: the new kinds

    def ensure_namespace(self, name: str) -> None:
        for create in (
            lambda: self.core.create_namespace({"metadata": {"name": name}}),
            # No controller-manager here: nothing else makes the default ServiceAccount pods run as.
            lambda: self.core.create_namespaced_service_account(name, {"metadata": {"name": "default"}}),
        ):
            try:
                create()
            except ApiException as error:
                if error.status != 409:
                    raise

    def create(self, doc: dict) -> None:
        resource = self.dynamic.resources.get(api_version=doc["apiVersion"], kind=doc["kind"])
        namespace = (doc.get("metadata") or {}).get("namespace") or ("default" if resource.namespaced else None)
        if resource.namespaced:
            self.ensure_namespace(namespace)
        resource.create(body=doc, namespace=namespace)
        if doc["kind"] == "Namespace":
            self.ensure_namespace(doc["metadata"]["name"])


def _crd_docs(root: Path, kinds: set[str], with_kueue: bool) -> list[dict]:
    """The pinned CRDs (the tool's and platform.yaml's schema URLs; GITOPS_SCHEMA_DIR for offline copies) of
    the kinds the environment uses, and always the MPIJob's; Kueue's own come with it (live/kueue.py)."""
    sources = platform.schema_sources(root)
    store = SchemaStore(sources)
    docs, seen = [], set()
    for key in sorted(kinds | {"kubeflow.org/MPIJob"}):
        if key not in sources or key == "eksctl.io/ClusterConfig":
            continue
        if with_kueue and key.startswith(f"{kueue.GROUP}/"):
            continue
        document = store.document(key)
        for doc in document if isinstance(document, list) else [document]:
            if isinstance(doc, dict) and doc.get("kind") == "CustomResourceDefinition":
                name = doc["metadata"]["name"]
                if name not in seen:
                    seen.add(name)
                    docs.append(doc)
    return docs


def _flux_order(environment) -> list:
    """The environment's Flux Kustomizations, each after the ones it dependsOn."""
    by_name = {k.name: k for k in environment.kustomizations}
    ordered, done = [], set()

    def visit(kustomization, trail):
        if kustomization.name in done or kustomization.name in trail:
            return
        for name in kustomization.depends_on:
            if name in by_name:
                visit(by_name[name], trail | {kustomization.name})
        done.add(kustomization.name)
        ordered.append(kustomization)

    for kustomization in environment.kustomizations:
        visit(kustomization, frozenset())
    return ordered


def _error_line(error) -> str:
    body = getattr(error, "body", None)
    try:
        message = json.loads(body).get("message", "") if body else ""
    except (TypeError, ValueError):
        message = ""
    return mask_text(" ".join((message or str(error)).split())[:300])


# --- the run -------------------------------------------------------------------------------------------------


def simulate(root: Path, env: str, timeout: float = DEFAULT_TIMEOUT, progress=lambda line: None) -> Simulation:
    started = time.monotonic()
    (environment,) = render.render_repository(root, [env], progress=progress)
    if environment.cluster_config is None:
        raise InputError(f"{env}: no eksctl ClusterConfig (overlays/{env}/eksctl) to make nodes from")
    mpijobs = [m for m in environment.objects if m.group == "kubeflow.org" and m.kind == "MPIJob"]
    if not mpijobs:
        raise InputError(f"{env}: no MPIJob to simulate")
    nodes, groups = node_docs(environment.cluster_config.doc)
    kinds = {f"{m.group}/{m.kind}" for m in environment.objects if m.group}
    release = kueue.release_of(environment.objects)
    crds = _crd_docs(root, kinds, with_kueue=release is not None)
    kueue_crds = kueue.crd_docs() if release else []
    result = Simulation(env, node_groups=groups)

    plane = ControlPlane(components=(*CORE, "kube-scheduler", "kwok"))
    progress("starting etcd, kube-apiserver, kube-scheduler, kwok")
    plane.start()
    try:
        cluster = Cluster(plane)
        cluster.install_crds(crds)
        if release:
            progress(f"starting Kueue (release {release.name} in {release.namespace})")
            kueue.Kueue(plane, release, kueue_crds).start(max(started + timeout - time.monotonic(), 10.0))
            result.notes.extend(release.notes)
            cluster.install_crds([])  # discovery again: Kueue's kinds
        cluster.ensure_namespace("mpi-operator")  # the MPI operator's leader-election lease
        plane.add("mpi-operator")
        progress(f"making {len(nodes)} kwok nodes: " + ", ".join(f"{g['name']} {g['nodes']}" for g in groups))
        _make_nodes(cluster, nodes, timeout)
        _apply(cluster, environment, result, progress, with_kueue=release is not None)
        _wait(cluster, mpijobs, result, started + timeout, progress, with_kueue=release is not None, plane=plane)
    finally:
        plane.stop()
    result.seconds = time.monotonic() - started
    return result


def _make_nodes(cluster: Cluster, nodes: list[dict], timeout: float) -> None:
    for doc in nodes:
        status = doc["status"]
        cluster.core.create_node({k: v for k, v in doc.items() if k != "status"})
        cluster.core.patch_node_status(doc["metadata"]["name"], {"status": status})
    # The API server's TaintNodesByCondition admission adds node.kubernetes.io/not-ready to each new node;
    # the node lifecycle controller (kube-controller-manager, not run here) removes it once the node is
    # Ready. kwok makes the nodes Ready; this does the controller's part.
    deadline = time.monotonic() + timeout
    for doc in nodes:
        name = doc["metadata"]["name"]
        while True:
            node = cluster.core.read_node(name)
            if any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or []):
                break
            if time.monotonic() > deadline:
                raise InputError(f"kwok did not make node {name} Ready in {timeout:.0f} s")
            time.sleep(0.2)
        taints = [t.to_dict() for t in node.spec.taints or [] if not t.key.startswith("node.kubernetes.io/")]
        cluster.core.patch_node(name, {"spec": {"taints": [{k: v for k, v in t.items() if v} for t in taints]}})


def _apply(cluster: Cluster, environment, result: Simulation, progress, with_kueue: bool) -> None:
    for kustomization in _flux_order(environment):
        progress(f"applying {kustomization.name} ({len(kustomization.objects)} objects)")
        for manifest in [kustomization.manifest, *kustomization.objects]:
            doc = manifest.doc
            if manifest.kind == "Secret":
                continue  # nothing here reads them; their values stay out of the plane
            try:
                queue = (doc.get("metadata", {}).get("labels") or {}).get(QUEUE_LABEL)
                if manifest.kind == "MPIJob" and queue and not with_kueue:
                    doc = _unsuspended(doc, result)
                cluster.create(doc)
            except (ApiException, DynamicApiError, ResourceNotFoundError) as error:
                if getattr(error, "status", None) == 409:
                    continue  # the flux-system root entry appears once per environment
                line = f"{manifest.kind} {_ref(doc)} not applied: {_error_line(error)}"
                result.notes.append(line)
                if manifest.kind == "MPIJob":
                    result.jobs.append(JobResult(*_key(doc), expected={}, error=line))
                continue
            if manifest.kind == "PersistentVolumeClaim":
                _bind_stub(cluster, doc, result)


def _key(doc: dict) -> tuple[str, str]:
    metadata = doc.get("metadata") or {}
    return metadata.get("namespace") or "default", metadata.get("name", "")


def _ref(doc: dict) -> str:
    namespace, name = _key(doc)
    return f"{namespace}/{name}"


def _unsuspended(doc: dict, result: Simulation) -> dict:
    queue = doc["metadata"]["labels"][QUEUE_LABEL]
    result.notes.append(
        f"MPIJob {_ref(doc)} names Kueue queue {queue}, but the environment has no Kueue (no HelmRelease of its "
        "chart, no ClusterQueue): it runs as if admitted"
    )
    run_policy = (doc.get("spec") or {}).get("runPolicy") or {}
    if run_policy.get("suspend"):
        doc = json.loads(json.dumps(doc))
        doc["spec"]["runPolicy"]["suspend"] = False
    return doc


def _bind_stub(cluster: Cluster, claim: dict, result: Simulation) -> None:
    """No CSI driver provisions here: a stub PersistentVolume, bound to the claim as the PV controller would."""
    namespace, name = _key(claim)
    spec = claim.get("spec") or {}
    volume = f"stub-{namespace}-{name}"
    cluster.core.create_persistent_volume(
        {
            "metadata": {"name": volume},
            "spec": {
                "capacity": {"storage": ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")},
                "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
                "storageClassName": spec.get("storageClassName") or "",
                "claimRef": {"namespace": namespace, "name": name},
                "csi": {"driver": "stub.simulate.local", "volumeHandle": volume},
            },
        }
    )
    cluster.core.patch_persistent_volume_status(volume, {"status": {"phase": "Bound"}})
    # kube-scheduler's volume binding takes a claim as bound only with the PV controller's annotation too.
    cluster.core.patch_namespaced_persistent_volume_claim(
        name,
        namespace,
        {"metadata": {"annotations": {"pv.kubernetes.io/bind-completed": "yes"}}, "spec": {"volumeName": volume}},
    )
    cluster.core.patch_namespaced_persistent_volume_claim_status(name, namespace, {"status": {"phase": "Bound"}})
    result.notes.append(
        f"PersistentVolumeClaim {namespace}/{name} is bound to a stub PersistentVolume (no storage driver here)"
    )


def _expected(doc: dict) -> dict:
    specs = (doc.get("spec") or {}).get("mpiReplicaSpecs") or {}
    return {role.lower(): int((spec or {}).get("replicas", 1)) for role, spec in specs.items()}


def _wait(
    cluster: Cluster, mpijobs, result: Simulation, deadline: float, progress, with_kueue: bool, plane: ControlPlane
) -> None:
    failed = {(j.namespace, j.name) for j in result.jobs}
    jobs = [JobResult(*_key(m.doc), expected=_expected(m.doc)) for m in mpijobs if _key(m.doc) not in failed]
    result.jobs.extend(jobs)
    groups: dict[str, str] = {}
    last = ""
    settled_since: dict[str, tuple[str, float]] = {}
    while True:
        _still_running(plane)
        if with_kueue:
            _read_admissions(cluster, jobs)
        for job in jobs:
            job.pods = _pods(cluster, job, groups)
            if "launcher" in job.expected and not any(p.role == "launcher" for p in job.pods):
                _launcher_pod(cluster, job, result)
        line = "; ".join(_progress_line(j) for j in jobs)
        if line != last:
            progress(line)
            last = line
        now = time.monotonic()
        # Kueue and the scheduler retry when the cluster changes; a state that stays SETTLE seconds is the answer.
        for job in jobs:
            state = _settled_state(job)
            if not state:
                settled_since.pop(job.name, None)
            elif settled_since.get(job.name, ("", 0.0))[0] != state:
                settled_since[job.name] = (state, now)
        if all(j.scheduled or now - settled_since.get(j.name, ("", now))[1] >= SETTLE for j in jobs) or now > deadline:
            break
        time.sleep(0.5)
    for job in jobs:
        if not job.scheduled and not job.unschedulable and not job.queued:
            warning = _last_warning(cluster, job)
            waiting = job.admission.message if job.admission and job.admission.message else ""
            job.error = (
                f"not all pods placed within the time limit; {_missing(job)}"
                + (f"; last warning: {warning}" if warning else "")
                + (f"; {job.launcher_refused}" if job.launcher_refused else "")
                + (f"; Kueue: {waiting}" if waiting else "")
            )


def _still_running(plane: ControlPlane) -> None:
    """A controller that stopped makes every job wait forever: say which, with its log, instead."""
    for name, process in plane.processes.items():
        if process.poll() is not None:
            # mpi-operator v0.8.2 serves its health check on the fixed port 8080 (cmd/mpi-operator/app/server.go):
            # another simulation, or anything else on that port, stops it.
            raise InputError(f"{name} exited during the simulation: {mask_text(plane.log_tail(name))}")


def _progress_line(job: JobResult) -> str:
    if job.queued:
        return f"{job.name}: queued"
    if job.admission is not None and not job.admission.admitted:
        return f"{job.name}: waiting for Kueue"
    return f"{job.name}: {sum(1 for p in job.pods if p.node)}/{sum(job.expected.values())} pods placed"


def _settled_state(job: JobResult) -> str:
    """What the job is waiting on, when it is an answer (queued, refused, unschedulable); "" while it moves."""
    if job.queued or job.refused:
        return f"{job.admission.message}|{job.admission.quota}"
    if job.unschedulable:
        return "|".join(p.reason for p in job.pods if not p.node)
    return ""


# --- Kueue's admission ---------------------------------------------------------------------------------------

# Kueue v0.19.2's reason while the quota is used by others (pkg/scheduler/flavorassigner/flavorassigner.go,
# fitsResourceQuota), once per resource and flavor that holds the job.
_WAITING_FOR_QUOTA = re.compile(r"insufficient unused quota for (?P<resource>\S+) in flavor (?P<flavor>[^\s,]+)")


def _kueue_objects(cluster: Cluster, kind: str, namespace: str | None = None) -> list[dict]:
    resource = cluster.dynamic.resources.get(api_version=f"{kueue.GROUP}/v1beta2", kind=kind)
    return [item.to_dict() for item in resource.get(namespace=namespace).items]


def _owner_job(workload: dict) -> str:
    for owner in workload.get("metadata", {}).get("ownerReferences") or []:
        if owner.get("kind") == "MPIJob":
            return owner.get("name", "")
    return ""


def _condition(workload: dict, kind: str) -> dict:
    for condition in (workload.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return condition
    return {}


def _read_admissions(cluster: Cluster, jobs: list[JobResult]) -> None:
    workloads: dict[str, list[dict]] = {}
    for job in jobs:
        if job.namespace not in workloads:
            workloads[job.namespace] = _kueue_objects(cluster, "Workload", job.namespace)
    everything = [w for items in workloads.values() for w in items]
    for job in jobs:
        mine = [w for w in workloads[job.namespace] if _owner_job(w) == job.name]
        job.admission = _admission(cluster, mine[0], everything) if mine else Admission()


def _admission(cluster: Cluster, workload: dict, workloads: list[dict]) -> Admission:
    admission = Admission(workload=workload["metadata"]["name"])
    admission.admitted = _condition(workload, "Admitted").get("status") == "True"
    reserved = _condition(workload, "QuotaReserved")
    if admission.admitted or reserved.get("status") != "False":
        return admission
    admission.message = mask_text(" ".join(str(reserved.get("message", "")).split())[:500])
    held = list(dict.fromkeys((m["flavor"], m["resource"]) for m in _WAITING_FOR_QUOTA.finditer(admission.message)))
    if held:
        admission.waiting_for_quota = True
        queue = _cluster_queue(cluster, workload)
        parts, holders = [], set()
        for flavor, resource in held:
            part, names = _quota_holders(cluster, queue, flavor, resource, workloads)
            parts.append(part)
            holders.update(names)
        admission.quota = f"ClusterQueue {queue}'s " + "; ".join(parts)
        admission.held_by = sorted(holders)
    return admission


def _cluster_queue(cluster: Cluster, workload: dict) -> str:
    namespace = workload["metadata"]["namespace"]
    name = (workload.get("spec") or {}).get("queueName", "")
    for local in _kueue_objects(cluster, "LocalQueue", namespace):
        if local["metadata"]["name"] == name:
            return str((local.get("spec") or {}).get("clusterQueue", ""))
    return ""


def _nominal_quota(cluster: Cluster, queue: str, flavor: str, resource: str) -> str:
    for item in _kueue_objects(cluster, "ClusterQueue"):
        if item["metadata"]["name"] != queue:
            continue
        for group in (item.get("spec") or {}).get("resourceGroups") or []:
            for entry in group.get("flavors") or []:
                if entry.get("name") != flavor:
                    continue
                for quota in entry.get("resources") or []:
                    if quota.get("name") == resource:
                        return str(quota.get("nominalQuota", "0"))
    return "?"


def _usage(workload: dict, queue: str, flavor: str, resource: str):
    """The workload's admitted use of `resource` in `flavor` of ClusterQueue `queue` (status.admission)."""
    admission = (workload.get("status") or {}).get("admission") or {}
    if admission.get("clusterQueue") != queue or _condition(workload, "QuotaReserved").get("status") != "True":
        return 0
    total = 0
    for assignment in admission.get("podSetAssignments") or []:
        if (assignment.get("flavors") or {}).get(resource) == flavor:
            total += utils.parse_quantity(str((assignment.get("resourceUsage") or {}).get(resource, "0")))
    return total


_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "k": 10**3, "M": 10**6, "G": 10**9}


def _quantity(value, like: str) -> str:
    """`value` (a parsed quantity) in the unit of the quantity `like` (the quota's), when it divides evenly."""
    for suffix, factor in _SUFFIXES.items():
        if like.endswith(suffix) and value % factor == 0:
            return f"{int(value // factor)}{suffix}"
    return str(int(value)) if value == int(value) else str(value)


def _quota_holders(cluster: Cluster, queue: str, flavor: str, resource: str, workloads) -> tuple[str, list[str]]:
    """("gpu flavor has 16 nvidia.com/gpu, 16 in use by horovod-train", [holders])."""
    used = {}
    for workload in workloads:
        amount = _usage(workload, queue, flavor, resource)
        if amount:
            name = _owner_job(workload) or workload["metadata"]["name"]
            used[name] = used.get(name, 0) + amount
    quota = _nominal_quota(cluster, queue, flavor, resource)
    line = f"{flavor} flavor has {quota} {resource}"
    if used:
        line += f", {_quantity(sum(used.values()), quota)} in use by {', '.join(sorted(used))}"
    return line, sorted(used)


def _last_warning(cluster: Cluster, job: JobResult) -> str:
    """The MPI operator's or the Job's latest Warning (a pod the API server refused, for one)."""
    events = [
        e
        for name in (job.name, f"{job.name}-launcher")
        for e in cluster.core.list_namespaced_event(
            job.namespace, field_selector=f"involvedObject.name={name},type=Warning"
        ).items
    ]
    events.sort(key=lambda e: e.last_timestamp or e.event_time or e.metadata.creation_timestamp)
    return mask_text(" ".join(events[-1].message.split())[:300]) if events else ""


def _launcher_pod(cluster: Cluster, job: JobResult, result: Simulation) -> None:
    """mpi-operator v0.8.2 makes the launcher a batch/v1 Job (pkg/controller/mpi_job_controller.go,
    newLauncherJob: <job>-launcher), created once the workers are Ready, or at once and suspended while the
    MPIJob is suspended (Kueue's; it is resumed with the MPIJob); the Job controller (kube-controller-manager,
    not run here) would make its pod once the Job is not suspended. This makes it, from the Job's template."""
    name = f"{job.name}-launcher"
    if job.launcher_refused:
        return
    try:
        launcher = cluster.client.BatchV1Api(cluster.api).read_namespaced_job(name, job.namespace)
    except ApiException as error:
        if error.status == 404:
            return  # not created yet: the operator waits for the workers
        raise
    if launcher.spec.suspend:
        return
    template = cluster.api.sanitize_for_serialization(launcher.spec.template)
    metadata = template.setdefault("metadata", {})
    labels = metadata.setdefault("labels", {})
    labels.setdefault(JOB_LABEL, job.name)
    labels.setdefault(ROLE_LABEL, "launcher")
    metadata["generateName"] = f"{name}-"
    metadata["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": launcher.metadata.uid, "controller": True}
    ]
    try:
        cluster.core.create_namespaced_pod(job.namespace, template)
    except ApiException as error:
        if error.status not in (400, 403, 422):
            raise
        job.launcher_refused = f"launcher pod refused: {_error_line(error)}"  # the Job controller's FailedCreate
        return
    result.notes.append(
        f"Job {job.namespace}/{name} (the launcher): its pod is made by simulate (no Job controller here)"
    )


def _missing(job: JobResult) -> str:
    seen = {}
    for pod in job.pods:
        seen[pod.role] = seen.get(pod.role, 0) + 1
    parts = [f"{role} {seen.get(role, 0)}/{count} created" for role, count in job.expected.items()]
    return ", ".join(parts)


def _pods(cluster: Cluster, job: JobResult, groups: dict) -> list[PodPlace]:
    items = cluster.core.list_namespaced_pod(job.namespace, label_selector=f"{JOB_LABEL}={job.name}").items
    pods = []
    for pod in sorted(items, key=lambda p: p.metadata.name):
        place = PodPlace(pod.metadata.name, (pod.metadata.labels or {}).get(ROLE_LABEL, ""))
        if pod.spec.node_name:
            place.node = pod.spec.node_name
            if place.node not in groups:
                labels = cluster.core.read_node(place.node).metadata.labels or {}
                groups[place.node] = labels.get(NODEGROUP_LABEL, "")
            place.node_group = groups[place.node]
        else:
            place.reason = _reason(cluster, pod)
        pods.append(place)
    return pods


def _reason(cluster: Cluster, pod) -> str:
    for condition in pod.status.conditions or []:
        if condition.type == "PodScheduled" and condition.status == "False" and condition.message:
            return mask_text(" ".join(condition.message.split()))
    events = cluster.core.list_namespaced_event(
        pod.metadata.namespace, field_selector=f"involvedObject.name={pod.metadata.name},reason=FailedScheduling"
    ).items
    return mask_text(" ".join(events[-1].message.split())) if events else ""


# --- output --------------------------------------------------------------------------------------------------


def _placement(job: JobResult) -> str:
    counts: dict[tuple[str, str], int] = {}
    for pod in job.pods:
        counts[(pod.role, pod.node_group)] = counts.get((pod.role, pod.node_group), 0) + 1
    return ", ".join(f"{role} x{n} on {group or '?'}" for (role, group), n in sorted(counts.items()))


def text_report(simulation: Simulation) -> str:
    groups = ", ".join(f"{g['name']} {g['nodes']} x {g['instanceType']}" for g in simulation.node_groups)
    lines = [f"{simulation.environment}: nodes at each node group's maxSize: {groups}"]
    lines += [f"note: {note}" for note in simulation.notes]
    for job in simulation.jobs:
        if job.scheduled:
            lines.append(f"MPIJob {job.namespace}/{job.name}: scheduled: {_placement(job)}")
            continue
        if job.queued:
            lines.append(f"MPIJob {job.namespace}/{job.name}: queued: {job.admission.quota}")
            lines.append(f"  Kueue: {job.admission.message}")
            continue
        lines.append(f"MPIJob {job.namespace}/{job.name}: NOT scheduled")
        if job.error:
            lines.append(f"  {job.error}")
        elif job.refused:
            lines.append(f"  Kueue does not admit it: {job.admission.message}")
        for pod in job.pods:
            if pod.node:
                lines.append(f"  {pod.name}: on {pod.node_group} ({pod.node})")
            else:
                lines.append(f"  {pod.name}: Pending: {pod.reason or 'not scheduled yet'}")
        created = {p.role for p in job.pods}
        if "launcher" in job.expected and "launcher" not in created and not job.error and not job.refused:
            lines.append("  launcher: not created (the MPI operator waits for the workers to be Ready)")
    placed = sum(1 for j in simulation.jobs if j.scheduled)
    queued = sum(1 for j in simulation.jobs if j.queued)
    lines.append(
        f"{placed}/{len(simulation.jobs)} MPIJobs scheduled"
        + (f", {queued} queued" if queued else "")
        + f" ({simulation.seconds:.0f} s)"
    )
    return "\n".join(lines)


def _admission_json(admission: Admission | None) -> dict | None:
    if admission is None:
        return None
    return {
        "workload": admission.workload,
        "admitted": admission.admitted,
        "message": admission.message,
        "queued": admission.waiting_for_quota,
        "quota": admission.quota,
        "heldBy": admission.held_by,
    }


def json_report(simulation: Simulation) -> str:
    return json.dumps(
        {
            "environment": simulation.environment,
            "nodeGroups": simulation.node_groups,
            "notes": simulation.notes,
            "jobs": [
                {
                    "namespace": j.namespace,
                    "name": j.name,
                    "scheduled": j.scheduled,
                    "state": j.state,
                    "error": j.error,
                    "kueue": _admission_json(j.admission),
                    "pods": [
                        {"name": p.name, "role": p.role, "node": p.node, "nodeGroup": p.node_group, "reason": p.reason}
                        for p in j.pods
                    ],
                }
                for j in simulation.jobs
            ],
            "fits": simulation.fits,
            "seconds": round(simulation.seconds, 1),
        },
        indent=2,
    )
