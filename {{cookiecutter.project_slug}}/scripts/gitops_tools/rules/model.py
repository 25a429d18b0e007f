"""What rules read: one environment's rendered objects, its ClusterConfig and its Flux graph,
with the views several rules share (pod templates, node groups, resource quantities).

Rendered objects may be malformed (the schema check reports that); these helpers never
raise on a wrong type, they treat it as absent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property

from .. import catalog
from ..manifests import FluxKustomization, Manifest

GPU = "nvidia.com/gpu"
EFA = "vpc.amazonaws.com/efa"
MPIJOB = ("kubeflow.org", "MPIJob")
FLUX_KUSTOMIZATION = ("kustomize.toolkit.fluxcd.io", "Kustomization")
PRODUCTION_NAMES = ("prod", "production")


def mapping(value, *keys) -> dict:
    """value[k1][k2]... as a dict, {} where any step is missing or not a mapping."""
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, dict) else {}


def sequence(value, *keys) -> list:
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, list) else []


_QUANTITY = re.compile(r"^([+-]?\d+(?:\.\d+)?|[+-]?\.\d+)(?:[eE]([+-]?\d+))?([a-zA-Z]*)$")
_FACTORS = {
    "": 1, "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
    "Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60,
}


def quantity(value) -> float | None:
    """A Kubernetes resource quantity ("500m", "2", "864Gi") as a number; None when malformed."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    match = _QUANTITY.match(str(value).strip())
    if not match or match.group(3) not in _FACTORS:
        return None
    number = float(match.group(1)) * (10 ** int(match.group(2)) if match.group(2) else 1)
    return number * _FACTORS[match.group(3)]


def plural(count: int | float, word: str) -> str:
    count = int(count) if float(count).is_integer() else count
    return f"{count} {word}{'' if count == 1 else 's'}"


# --- pod templates ------------------------------------------------------------------------

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
    path: tuple          # inside the owning object
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
    role: str           # MPIJob replica type ("Launcher", "Worker"), "" for other workloads
    replicas: int | None  # pods made from it at once; None for a DaemonSet (one per node)
    spec: dict
    path: tuple         # of the pod spec inside the owner

    @property
    def label(self) -> str:
        """How messages name these pods; the report already names the object."""
        return f"{self.role} pod" if self.role else "pod"

    @property
    def full_label(self) -> str:
        return f"{self.owner.kind}/{self.owner.name}" + (f" {self.role}" if self.role else "")

    def container_label(self, container: "Container") -> str:
        return f"{self.role + ' ' if self.role else ''}container {container.name}"

    @cached_property
    def containers(self) -> list[Container]:
        return [Container(c, (*self.path, "containers", i)) for i, c in enumerate(sequence(self.spec, "containers"))
                if isinstance(c, dict)]

    @cached_property
    def init_containers(self) -> list[Container]:
        return [Container(c, (*self.path, "initContainers", i), init=True)
                for i, c in enumerate(sequence(self.spec, "initContainers")) if isinstance(c, dict)]

    def request(self, resource: str) -> float:
        """Total over the (app) containers: what the scheduler must find on one node."""
        return sum(c.request(resource) for c in self.containers)

    @property
    def tolerations(self) -> list[dict]:
        return [t for t in sequence(self.spec, "tolerations") if isinstance(t, dict)]

    @property
    def node_selector(self) -> dict:
        return mapping(self.spec, "nodeSelector")

    @property
    def required_terms(self) -> list[dict]:
        return [t for t in sequence(mapping(self.spec, "affinity", "nodeAffinity",
                                            "requiredDuringSchedulingIgnoredDuringExecution"), "nodeSelectorTerms")
                if isinstance(t, dict)]

    @property
    def volumes(self) -> dict[str, tuple[int, dict]]:
        return {str(v.get("name")): (i, v) for i, v in enumerate(sequence(self.spec, "volumes")) if isinstance(v, dict)}

    def claims(self) -> list[tuple[str, tuple]]:
        """(claimName, field path) of each PersistentVolumeClaim volume."""
        return [(str(v["persistentVolumeClaim"]["claimName"]),
                 (*self.path, "volumes", i, "persistentVolumeClaim", "claimName"))
                for i, v in self.volumes.values()
                if mapping(v, "persistentVolumeClaim").get("claimName")]


def _int(value, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def pod_templates(manifest: Manifest) -> list[PodTemplate]:
    if (manifest.group, manifest.kind) == MPIJOB:
        found = []
        for role, replica_spec in mapping(manifest.doc, "spec", "mpiReplicaSpecs").items():
            if isinstance(replica_spec, dict):
                replicas = _int(replica_spec.get("replicas"), 1 if role == "Launcher" else 0)
                found.append(PodTemplate(manifest, str(role), replicas, mapping(replica_spec, "template", "spec"),
                                         ("spec", "mpiReplicaSpecs", role, "template", "spec")))
        return found
    path = _TEMPLATE_PATHS.get((manifest.group, manifest.kind))
    if path is None:
        return []
    spec = mapping(manifest.doc, *path)
    if manifest.kind == "DaemonSet":
        replicas = None
    elif manifest.kind in ("Job", "CronJob"):
        job = mapping(manifest.doc, "spec") if manifest.kind == "Job" else mapping(manifest.doc, "spec", "jobTemplate", "spec")
        replicas = _int(job.get("parallelism"), 1)
    elif manifest.kind == "Pod":
        replicas = 1
    else:
        replicas = _int(mapping(manifest.doc, "spec").get("replicas"), 1)
    return [PodTemplate(manifest, "", replicas, spec, path)]


# --- node groups --------------------------------------------------------------------------

_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


@dataclass(frozen=True)
class Taint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return f"{self.key}{'=' + self.value if self.value else ''}:{self.effect}"


@dataclass
class NodeGroup:
    doc: dict
    path: tuple   # ("managedNodeGroups", index) or ("nodeGroups", index)

    @property
    def name(self) -> str:
        return str(self.doc.get("name", ""))

    @property
    def instance_types(self) -> list[str]:
        if self.doc.get("instanceType"):
            return [str(self.doc["instanceType"])]
        return [str(t) for t in sequence(self.doc, "instanceTypes")]

    @property
    def instances(self) -> list[catalog.InstanceType] | None:
        """Catalogue entries of every instance type, or None when one is unknown."""
        found = [catalog.lookup(t) for t in self.instance_types]
        return found if found and all(found) else None

    def smallest(self, attribute: str) -> int | None:
        """The least of an instance figure (gpus, efa_interfaces) over the group's types."""
        instances = self.instances
        return min(getattr(i, attribute) for i in instances) if instances else None

    @property
    def efa_enabled(self) -> bool:
        return self.doc.get("efaEnabled") is True

    @property
    def zones(self) -> list[str]:
        return [str(z) for z in sequence(self.doc, "availabilityZones")]

    @property
    def subnets(self) -> list:
        subnets = self.doc.get("subnets")
        return subnets if isinstance(subnets, list) else []

    @property
    def max_size(self) -> int | None:
        for key in ("maxSize", "desiredCapacity", "minSize"):
            if isinstance(self.doc.get(key), int):
                return self.doc[key]
        return None

    @cached_property
    def labels(self) -> dict[str, str]:
        """The node labels pods can select: the group's own plus those EKS and eksctl add."""
        labels = {"kubernetes.io/os": "linux", "alpha.eksctl.io/nodegroup-name": self.name,
                  "eks.amazonaws.com/nodegroup": self.name,
                  "eks.amazonaws.com/capacityType": "SPOT" if self.doc.get("spot") else "ON_DEMAND"}
        types = self.instance_types
        if len(types) == 1:
            labels["node.kubernetes.io/instance-type"] = labels["beta.kubernetes.io/instance-type"] = types[0]
            # Graviton families carry a "g" right after the generation digit: m7g, c6gn, g5g.
            graviton = re.match(r"^[a-z]+\d+g", types[0].split(".")[0])
            labels["kubernetes.io/arch"] = "arm64" if graviton else "amd64"
        if len(self.zones) == 1:
            labels["topology.kubernetes.io/zone"] = labels["failure-domain.beta.kubernetes.io/zone"] = self.zones[0]
        labels.update({str(k): str(v) for k, v in mapping(self.doc, "labels").items()})
        return labels

    @cached_property
    def taints(self) -> list[Taint]:
        raw = self.doc.get("taints")
        found = []
        if isinstance(raw, list):
            for taint in raw:
                if isinstance(taint, dict):
                    effect = str(taint.get("effect", ""))
                    found.append(Taint(str(taint.get("key", "")), str(taint.get("value", "") or ""),
                                       _EFFECTS.get(effect, effect)))
        elif isinstance(raw, dict):   # unmanaged groups' old form: key: "value:Effect"
            for key, text in raw.items():
                value, _, effect = str(text).rpartition(":")
                found.append(Taint(str(key), value, _EFFECTS.get(effect, effect)))
        return found

    def describe(self) -> str:
        return f"node group {self.name} ({', '.join(self.instance_types) or 'no instance type'})"


def tolerates(tolerations: list[dict], taint: Taint) -> bool:
    for toleration in tolerations:
        effect = toleration.get("effect")
        if effect and effect != taint.effect:
            continue
        operator = toleration.get("operator", "Equal")
        key = toleration.get("key")
        if not key:
            if operator == "Exists":
                return True
            continue
        if key == taint.key and (operator == "Exists" or str(toleration.get("value", "") or "") == taint.value):
            return True
    return False


def untolerated(template: PodTemplate, group: NodeGroup) -> list[Taint]:
    return [t for t in group.taints if t.effect in BLOCKING_EFFECTS and not tolerates(template.tolerations, t)]


def _expression_matches(expression: dict, labels: dict[str, str]) -> bool:
    key = str(expression.get("key", ""))
    operator = expression.get("operator")
    values = [str(v) for v in sequence(expression, "values")]
    value = labels.get(key)
    if operator == "In":
        return value in values
    if operator == "NotIn":
        return value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    if operator in ("Gt", "Lt") and value is not None and values:
        try:
            return int(value) > int(values[0]) if operator == "Gt" else int(value) < int(values[0])
        except ValueError:
            return False
    return False


def selects(template: PodTemplate, group: NodeGroup) -> bool:
    """Whether the pod's nodeSelector and required node affinity admit the group's nodes."""
    labels = group.labels
    for key, value in template.node_selector.items():
        if labels.get(str(key)) != str(value):
            return False
    terms = template.required_terms
    if terms:
        return any(all(_expression_matches(e, labels) for e in sequence(term, "matchExpressions")
                       if isinstance(e, dict))
                   for term in terms if sequence(term, "matchExpressions") or sequence(term, "matchFields"))
    return True


# --- the scope ----------------------------------------------------------------------------


@dataclass
class Scope:
    """One environment as rules see it.

    objects: everything Flux applies (the Flux entry points included), or the plain inputs.
    complete: the objects are the whole environment, so "X is absent" is a finding.
    kustomizations: the Flux entry points with what each applies (empty outside a repository).
    """

    env: str
    objects: list[Manifest]
    cluster_config: Manifest | None = None
    kustomizations: list[FluxKustomization] = field(default_factory=list)
    complete: bool = False
    kubernetes_version: str = ""
    settings: dict = field(default_factory=dict)

    @property
    def production(self) -> bool:
        return self.env in PRODUCTION_NAMES or self.env.startswith(tuple(f"{n}-" for n in PRODUCTION_NAMES))

    def has(self, context: str) -> bool:
        return {"cluster": self.cluster_config is not None, "environment": self.complete,
                "flux": bool(self.kustomizations)}[context]

    def of(self, kind: str, group: str | None = None) -> list[Manifest]:
        return [m for m in self.objects if m.kind == kind and (group is None or m.group == group)]

    @cached_property
    def pod_templates(self) -> list[PodTemplate]:
        return [t for m in self.objects for t in pod_templates(m)]

    @cached_property
    def node_groups(self) -> list[NodeGroup]:
        if self.cluster_config is None:
            return []
        return [NodeGroup(g, (section, i)) for section in ("managedNodeGroups", "nodeGroups")
                for i, g in enumerate(sequence(self.cluster_config.doc, section)) if isinstance(g, dict)]

    @cached_property
    def _target_namespaces(self) -> dict[int, str]:
        found = {}
        for kustomization in self.kustomizations:
            target = mapping(kustomization.manifest.doc, "spec").get("targetNamespace")
            if target:
                for manifest in kustomization.objects:
                    found[id(manifest)] = str(target)
        return found

    def namespace_of(self, manifest: Manifest) -> str:
        """Where a namespaced object lands: the Flux targetNamespace, its own, or default."""
        return self._target_namespaces.get(id(manifest)) or manifest.namespace or "default"

    def placement(self, template: PodTemplate) -> tuple[list[NodeGroup], list[NodeGroup]]:
        """(groups the pod's selectors admit, those of them whose taints it also tolerates)."""
        selected = [g for g in self.node_groups if selects(template, g)]
        return selected, [g for g in selected if not untolerated(template, g)]
