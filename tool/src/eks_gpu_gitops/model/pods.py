"""Pod templates and containers, wherever a workload kind keeps them, with their resource requests."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from .fields import integer, mapping, quantity, sequence
from .kinds import MPIJOB
from .manifest import Manifest

# Where each workload kind keeps its pod spec, and how many pods it makes at once.
_TEMPLATE_PATHS = {
    ("", "Pod"): ("spec",),
    ("apps", "Deployment"): ("spec", "template", "spec"),
    ("apps", "StatefulSet"): ("spec", "template", "spec"),
    ("apps", "ReplicaSet"): ("spec", "template", "spec"),
    ("apps", "DaemonSet"): ("spec", "template", "spec"),
    ("batch", "Job"): ("spec", "template", "spec"),
    ("batch", "CronJob"): ("spec", "jobTemplate", "spec", "template", "spec"),
}


@dataclass
class Container:
    spec: dict
    path: tuple  # inside the owning object
    init: bool = False

    @property
    def name(self) -> str:
        return str(self.spec.get("name", ""))

    def request(self, resource: str) -> float:
        """The effective request: requests, else limits (Kubernetes copies limits into
        requests when only limits are set)."""
        for section in ("requests", "limits"):
            value = mapping(self.spec, "resources", section).get(resource)
            if value is not None:
                return quantity(value) or 0.0
        return 0.0

    def has(self, section: str, resource: str) -> bool:
        return resource in mapping(self.spec, "resources", section)

    @property
    def argv(self) -> list[str]:
        return [str(a) for a in sequence(self.spec, "command") + sequence(self.spec, "args")]

    def argv_path(self, index: int) -> tuple:
        """The field path of argv[index] (command first, then args)."""
        command = sequence(self.spec, "command")
        if index < len(command):
            return (*self.path, "command", index)
        return (*self.path, "args", index - len(command))

    @property
    def env(self) -> list[dict]:
        return [e for e in sequence(self.spec, "env") if isinstance(e, dict)]


@dataclass
class PodTemplate:
    owner: Manifest
    role: str  # MPIJob replica type ("Launcher", "Worker"), "" for other workloads
    replicas: int | None  # pods made from it at once; None for a DaemonSet (one per node)
    spec: dict
    path: tuple  # of the pod spec inside the owner

    @property
    def label(self) -> str:
        """How messages name these pods; the report already names the object."""
        return f"{self.role} pod" if self.role else "pod"

    @property
    def full_label(self) -> str:
        return f"{self.owner.kind}/{self.owner.name}" + (f" {self.role}" if self.role else "")

    def container_label(self, container: Container) -> str:
        return f"{self.role + ' ' if self.role else ''}container {container.name}"

    @cached_property
    def containers(self) -> list[Container]:
        return [
            Container(c, (*self.path, "containers", i))
            for i, c in enumerate(sequence(self.spec, "containers"))
            if isinstance(c, dict)
        ]

    @cached_property
    def init_containers(self) -> list[Container]:
        return [
            Container(c, (*self.path, "initContainers", i), init=True)
            for i, c in enumerate(sequence(self.spec, "initContainers"))
            if isinstance(c, dict)
        ]

    def request(self, resource: str) -> float:
        """Total over the (app) containers: what the scheduler must find on one node."""
        return sum(c.request(resource) for c in self.containers)

    @property
    def tolerations(self) -> list[dict]:
        return [t for t in sequence(self.spec, "tolerations") if isinstance(t, dict)]

    @property
    def pod_labels(self) -> list[dict[str, str]]:
        """The label sets of the pods it makes: the template's labels, and for an MPIJob's pods also those the
        operator sets, one set per worker (kubeflow/mpi-operator v0.8.2, pkg/controller/mpi_job_controller.go
        defaultLabels, newWorker, newLauncher; keys in pkg/apis/kubeflow/v2beta1/constants.go)."""
        own = {str(k): str(v) for k, v in mapping(self.owner.doc, *self.path[:-1], "metadata", "labels").items()}
        if (self.owner.group, self.owner.kind) != MPIJOB:
            return [own]
        as_worker = mapping(self.owner.doc, "spec").get("runLauncherAsWorker") is True
        labels = {
            **own,
            "training.kubeflow.org/operator-name": "mpi-operator",
            "training.kubeflow.org/job-name": self.owner.name,
            "training.kubeflow.org/job-role": self.role.lower(),
        }
        if self.role != "Worker":
            return [{**labels, "training.kubeflow.org/replica-index": "0"} if as_worker else labels]
        first = 1 if as_worker else 0
        return [
            {**labels, "training.kubeflow.org/replica-index": str(index)}
            for index in range(first, first + max(self.replicas or 0, 1))
        ]

    @property
    def extended_resources(self) -> list[str]:
        """The extended resources (nvidia.com/gpu, vpc.amazonaws.com/efa) its containers and init
        containers request or limit: a name with a domain outside kubernetes.io (apimachinery's
        IsExtendedResourceName; a limit alone is copied into requests before admission)."""
        names = set()
        for container in self.containers + self.init_containers:
            for section in ("requests", "limits"):
                names.update(str(n) for n in mapping(container.spec, "resources", section))
        return sorted(n for n in names if "/" in n and "kubernetes.io/" not in n and not n.startswith("requests."))

    @property
    def effective_tolerations(self) -> list[dict]:
        """Its tolerations once admitted on EKS: every EKS platform version enables the
        ExtendedResourceToleration admission plugin (docs.aws.amazon.com/eks/latest/userguide/
        platform-versions.html), which adds key <resource>, operator Exists, effect NoSchedule for each
        extended resource the pod requests (kubernetes plugin/pkg/admission/extendedresourcetoleration/
        admission.go). NoExecute taints and other keys still need a written toleration."""
        added = [{"key": name, "operator": "Exists", "effect": "NoSchedule"} for name in self.extended_resources]
        return self.tolerations + added

    @property
    def node_selector(self) -> dict:
        return mapping(self.spec, "nodeSelector")

    @property
    def required_terms(self) -> list[dict]:
        return [
            t
            for t in sequence(
                mapping(self.spec, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"),
                "nodeSelectorTerms",
            )
            if isinstance(t, dict)
        ]

    @property
    def volumes(self) -> dict[str, tuple[int, dict]]:
        return {str(v.get("name")): (i, v) for i, v in enumerate(sequence(self.spec, "volumes")) if isinstance(v, dict)}

    def claims(self) -> list[tuple[str, tuple]]:
        """(claimName, field path) of each PersistentVolumeClaim volume."""
        return [
            (
                str(v["persistentVolumeClaim"]["claimName"]),
                (*self.path, "volumes", i, "persistentVolumeClaim", "claimName"),
            )
            for i, v in self.volumes.values()
            if mapping(v, "persistentVolumeClaim").get("claimName")
        ]


def pod_templates(manifest: Manifest) -> list[PodTemplate]:
    if (manifest.group, manifest.kind) == MPIJOB:
        found = []
        for role, replica_spec in mapping(manifest.doc, "spec", "mpiReplicaSpecs").items():
            if isinstance(replica_spec, dict):
                replicas = integer(replica_spec.get("replicas"), 1 if role == "Launcher" else 0)
                found.append(
                    PodTemplate(
                        manifest,
                        str(role),
                        replicas,
                        mapping(replica_spec, "template", "spec"),
                        ("spec", "mpiReplicaSpecs", role, "template", "spec"),
                    )
                )
        return found
    path = _TEMPLATE_PATHS.get((manifest.group, manifest.kind))
    if path is None:
        return []
    spec = mapping(manifest.doc, *path)
    if manifest.kind == "DaemonSet":
        replicas = None
    elif manifest.kind in ("Job", "CronJob"):
        job = (
            mapping(manifest.doc, "spec")
            if manifest.kind == "Job"
            else mapping(manifest.doc, "spec", "jobTemplate", "spec")
        )
        replicas = integer(job.get("parallelism"), 1)
    elif manifest.kind == "Pod":
        replicas = 1
    else:
        replicas = integer(mapping(manifest.doc, "spec").get("replicas"), 1)
    return [PodTemplate(manifest, "", replicas, spec, path)]


def selector_matches(selector: dict, labels: dict[str, str]) -> bool:
    """Whether a label selector (matchLabels, matchExpressions) selects an object with these labels."""
    for key, value in mapping(selector, "matchLabels").items():
        if labels.get(str(key)) != str(value):
            return False
    for expression in sequence(selector, "matchExpressions"):
        if not isinstance(expression, dict):
            return False
        value = labels.get(str(expression.get("key", "")))
        values = [str(v) for v in sequence(expression, "values")]
        operator = expression.get("operator")
        matched = {
            "In": value in values,
            "NotIn": value not in values,
            "Exists": value is not None,
            "DoesNotExist": value is None,
        }.get(operator, False)
        if not matched:
            return False
    return True
