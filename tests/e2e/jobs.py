"""Reading MPIJobs, their Kueue Workloads and their pods off the loop's cluster, for the tests' assertions."""

from __future__ import annotations

from kubernetes.client.rest import ApiException

from eks_gpu_gitops.facts import catalog

# eksctl v0.230.0 labels every node of a group with its name (pkg/apis/eksctl.io/v1alpha5/defaults.go
# setDefaultNodeLabels); the kwok nodes carry it too (live/simulate.py node_docs).
NODEGROUP_LABEL = "alpha.eksctl.io/nodegroup-name"
# mpi-operator v0.8.2 labels (pkg/apis/kubeflow/v2beta1/constants.go): the job's name and the pod's role.
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
ROLE_LABEL = "training.kubeflow.org/job-role"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def custom(loop):
    return loop.cluster.client.CustomObjectsApi(loop.cluster.api)


def mpijob(loop, namespace: str, name: str) -> dict | None:
    try:
        return custom(loop).get_namespaced_custom_object("kubeflow.org", "v2beta1", namespace, "mpijobs", name)
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def workloads_of(loop, namespace: str, name: str) -> list[dict]:
    """Kueue's Workloads owned by the MPIJob (ownerReference kind MPIJob, that name)."""
    try:
        items = custom(loop).list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", namespace, "workloads")
    except ApiException:
        return []
    return [
        w
        for w in items["items"]
        if any(o.get("kind") == "MPIJob" and o.get("name") == name for o in w["metadata"].get("ownerReferences") or [])
    ]


def condition(obj: dict, kind: str) -> dict:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), {})


def admitted(workload: dict) -> bool:
    return condition(workload, "Admitted").get("status") == "True"


def pod_set_counts(workload: dict) -> dict[str, int]:
    return {p["name"]: p.get("count", 1) for p in (workload.get("spec") or {}).get("podSets") or []}


def describe_workloads(workloads: list[dict]) -> str:
    if not workloads:
        return "none"
    return "; ".join(
        f"{w['metadata']['name']} podSets {pod_set_counts(w)} "
        + ", ".join(
            f"{c['type']}={c['status']} {c.get('reason', '')}: {' '.join(str(c.get('message', '')).split())[:300]}"
            for c in (w.get("status") or {}).get("conditions") or []
        )
        for w in workloads
    )


def pods(loop, namespace: str, name: str) -> list:
    return loop.cluster.core.list_namespaced_pod(namespace, label_selector=f"{JOB_NAME_LABEL}={name}").items


def node_groups_by_node(loop) -> dict[str, str]:
    return {
        n.metadata.name: (n.metadata.labels or {}).get(NODEGROUP_LABEL, "") for n in loop.cluster.core.list_node().items
    }


def gpu_groups(loop) -> set[str]:
    """The environment's node groups whose instance type has GPUs (the catalogue)."""
    return {g["name"] for g in loop.node_groups if catalog.lookup(g["instanceType"]).gpus}


def describe_pods(loop, found: list) -> str:
    groups = node_groups_by_node(loop)
    return (
        "; ".join(
            f"{p.metadata.name} ({(p.metadata.labels or {}).get(ROLE_LABEL)}) {p.status.phase} on "
            f"{p.spec.node_name or '-'} (group {groups.get(p.spec.node_name or '', '-') or '-'})"
            for p in found
        )
        or "none"
    )


def running_as_expected(loop, namespace: str, name: str, workers: int) -> bool:
    """The launcher and `workers` workers Running, workers on a GPU group's nodes, the launcher off them."""
    found = [p for p in pods(loop, namespace, name) if not p.metadata.deletion_timestamp]
    groups, gpu = node_groups_by_node(loop), gpu_groups(loop)
    roles = {"launcher": [], "worker": []}
    for pod in found:
        if pod.status.phase != "Running":
            return False
        roles.setdefault((pod.metadata.labels or {}).get(ROLE_LABEL), []).append(groups.get(pod.spec.node_name, ""))
    return (
        len(roles["launcher"]) == 1
        and roles["launcher"][0] not in gpu
        and roles["launcher"][0] != ""
        and len(roles["worker"]) == workers
        and all(group in gpu for group in roles["worker"])
    )


def workers_of(job: dict) -> int:
    return int(job["spec"]["mpiReplicaSpecs"]["Worker"].get("replicas", 1))
