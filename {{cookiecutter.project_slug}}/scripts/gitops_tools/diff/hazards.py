"""Changes that Kubernetes or Flux cannot simply apply, and deletions that lose data.

Each rule reads one object change with its environment's two renders and returns notices
that say what will happen on the cluster. Rules are pure functions; `notices` runs them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from ..manifests import Environment, FluxKustomization, Manifest
from .impact import MPIJOB
from .model import CHANGED, DANGER, INFO, REMOVED, WARNING, Figure, Notice, ObjectChange

FSX_PROVISIONER = "fsx.csi.aws.com"
FORCE_ANNOTATION = "kustomize.toolkit.fluxcd.io/force"
STORAGE_CLASS = ("storage.k8s.io", "StorageClass")
PVC = ("", "PersistentVolumeClaim")
NAMESPACE = ("", "Namespace")
JOB = ("batch", "Job")
CLUSTER_CONFIG = ("eksctl.io", "ClusterConfig")
WORKLOADS = {("apps", "Deployment"), ("apps", "DaemonSet"), ("apps", "ReplicaSet"), ("apps", "StatefulSet")}

# Fields the API server refuses to change on an existing object.
STORAGE_CLASS_IMMUTABLE = ("parameters", "provisioner", "reclaimPolicy", "volumeBindingMode")
STATEFULSET_IMMUTABLE = ("selector", "volumeClaimTemplates", "serviceName", "podManagementPolicy")
# PVC spec fields that may change after creation: a storage increase, the attributes class.
PVC_MUTABLE = ("resources", "volumeAttributesClassName")
# eksctl node group fields it does not change on an existing group.
NODEGROUP_FIXED = ("instanceType", "instanceTypes", "amiFamily", "availabilityZones", "subnets",
                   "efaEnabled", "privateNetworking", "volumeSize", "volumeType")


@dataclass
class Context:
    """One environment's two renders and all its changes."""
    name: str
    base: Environment | None
    head: Environment | None
    changes: list[ObjectChange]

    def kustomization(self, manifest: Manifest | None, side: str) -> FluxKustomization | None:
        environment = self.head if side == "head" else self.base
        if manifest is None or environment is None:
            return None
        return next((k for k in environment.kustomizations if k.name == manifest.source), None)

    def dependents(self, name: str) -> list[str]:
        kustomizations = self.head.kustomizations if self.head else []
        return [k.name for k in kustomizations if name in k.depends_on]

    def find(self, side: str, group_kind: tuple[str, str], name: str) -> Manifest | None:
        environment = self.head if side == "head" else self.base
        if environment is None:
            return None
        return next((m for m in environment.objects if (m.group, m.kind) == group_kind and m.name == name), None)


def _spec(manifest: Manifest | None) -> dict:
    return (manifest.doc.get("spec") or {}) if manifest else {}


def _changed_fields(before: dict, after: dict, fields) -> list[str]:
    return [field for field in fields if before.get(field) != after.get(field)]


def _prunes(kustomization: FluxKustomization | None) -> bool:
    return bool(kustomization and (kustomization.manifest.doc.get("spec") or {}).get("prune") is True)


def _forced(change: ObjectChange, context: Context) -> bool:
    kustomization = context.kustomization(change.after, "head")
    spec_force = bool(kustomization and (kustomization.manifest.doc.get("spec") or {}).get("force") is True)
    return spec_force or (change.after is not None and change.after.annotations.get(FORCE_ANNOTATION) == "enabled")


def _immutable(change: ObjectChange, context: Context, fields: list[str], recreated: str,
               severity: str = DANGER) -> Notice:
    listed = ", ".join(f"`{field}`" for field in fields)
    if _forced(change, context):
        happens = f"Force is on, so Flux deletes and re-creates it: {recreated}"
    else:
        owner = change.after.source if change.after else "?"
        waiting = context.dependents(owner)
        blocked = f"; {', '.join(f'`{name}`' for name in waiting)} waits for it" if waiting else ""
        happens = (f"The API server rejects the update, so Flux Kustomization `{owner}` fails to apply"
                   f"{blocked}. To apply it, delete the object (or set the annotation `{FORCE_ANNOTATION}: "
                   f"enabled`) and Flux re-creates it: {recreated}")
    return Notice(severity, change.key.resource, "cannot change in place",
                  f"Changes {listed}, which cannot change on an existing object. {happens}")


def reclaim_policy(storage_class: Manifest | None) -> str | None:
    if storage_class is None:
        return None
    return str(storage_class.doc.get("reclaimPolicy") or "Delete")


def _volume_fate(claim: Manifest, context: Context, side: str) -> tuple[str, str]:
    """(severity, sentence) for what deleting this claim does to its volume."""
    class_name = _spec(claim).get("storageClassName")
    storage_class = context.find(side, STORAGE_CLASS, str(class_name)) if class_name else None
    policy = reclaim_policy(storage_class)
    fsx = storage_class is not None and storage_class.doc.get("provisioner") == FSX_PROVISIONER
    volume = "FSx for Lustre file system" if fsx else "volume"
    if policy == "Retain":
        return WARNING, (f"its {volume} is kept (reclaimPolicy Retain) but released: it keeps costing "
                         f"money and a new claim does not bind to it without manual steps")
    if policy is None:
        which = f"StorageClass `{class_name}` is not in this environment" if class_name else "no storageClassName"
        return DANGER, f"{which}, so its {volume} is deleted if that class's reclaimPolicy is Delete (the default)"
    return DANGER, f"its {volume} and all data on it are deleted (reclaimPolicy {policy})"


# --- rules: each takes (change, context) and returns a list of notices --------------------------

def storage_class_changed(change: ObjectChange, context: Context) -> list[Notice]:
    fields = _changed_fields(change.before.doc, change.after.doc, STORAGE_CLASS_IMMUTABLE)
    if not fields:
        return []
    return [_immutable(change, context, fields,
                       "volumes that exist keep their old settings; only claims made afterwards use the new ones.")]


def claim_changed(change: ObjectChange, context: Context) -> list[Notice]:
    before, after = _spec(change.before), _spec(change.after)
    fields = _changed_fields(before, after, sorted((before.keys() | after.keys()) - set(PVC_MUTABLE)))
    _, fate = _volume_fate(change.before, context, "base")
    recreated = f"the claim is deleted and made again, and {fate}."
    old_size, new_size = claim_size(change.before), claim_size(change.after)
    notices = []
    if fields:
        notices.append(_immutable(change, context, fields, recreated))
    if old_size is not None and new_size is not None and new_size < old_size:
        notices.append(_immutable(change, context, ["resources.requests.storage (smaller)"], recreated))
    elif old_size is not None and new_size is not None and new_size > old_size:
        notices.append(_expansion(change, context))
    return notices


def _expansion(change: ObjectChange, context: Context) -> Notice:
    class_name = _spec(change.after).get("storageClassName")
    storage_class = context.find("head", STORAGE_CLASS, str(class_name)) if class_name else None
    if storage_class is not None and storage_class.doc.get("allowVolumeExpansion") is True:
        return Notice(INFO, change.key.resource, "volume grows",
                      "The volume is expanded in place. It cannot shrink again, and a bigger file system costs more.")
    return Notice(DANGER, change.key.resource, "cannot grow",
                  f"The API server rejects the bigger size: StorageClass `{class_name}` does not set "
                  f"allowVolumeExpansion: true.")


def job_changed(change: ObjectChange, context: Context) -> list[Notice]:
    fields = _changed_fields(_spec(change.before), _spec(change.after), ("template", "selector", "completionMode"))
    if not fields:
        return []
    return [_immutable(change, context, fields, "the Job is deleted and created again, so it runs again.")]


def workload_changed(change: ObjectChange, context: Context) -> list[Notice]:
    immutable = STATEFULSET_IMMUTABLE if change.key.kind == "StatefulSet" else ("selector",)
    fields = _changed_fields(_spec(change.before), _spec(change.after), immutable)
    if not fields:
        return []
    return [_immutable(change, context, fields, "it is deleted and created again, and all its pods restart.")]


def immutable_data_changed(change: ObjectChange, context: Context) -> list[Notice]:
    """A Secret or ConfigMap marked `immutable: true` keeps its data for good."""
    if change.before.doc.get("immutable") is not True:
        return []
    fields = _changed_fields(change.before.doc, change.after.doc, ("data", "stringData", "binaryData", "immutable"))
    if not fields:
        return []
    return [_immutable(change, context, fields,
                       "pods that mount it keep the old content until they restart.")]


def moved(change: ObjectChange, context: Context) -> list[Notice]:
    """Moving an object between Flux Kustomizations races the old owner's prune."""
    old_owner = context.kustomization(change.before, "base")
    if not change.moved_from or not _prunes(old_owner):
        return []
    new_owner = change.after.source or f"clusters/{context.name}"
    lost = ""
    severity = WARNING
    if (change.key.group, change.key.kind) == PVC:
        severity, fate = _volume_fate(change.before, context, "base")
        lost = f" Deleting the claim means {fate}."
    elif (change.key.group, change.key.kind) == NAMESPACE:
        severity, lost = DANGER, " Deleting the namespace deletes everything in it."
    return [Notice(severity, change.key.resource, "moves between Kustomizations",
                   f"Moves from Flux Kustomization `{old_owner.name}` to `{new_owner}`. If `{old_owner.name}` "
                   f"reconciles first, it prunes the object and `{new_owner}` creates it again.{lost}")]


def mpijob_changed(change: ObjectChange, context: Context) -> list[Notice]:
    if _spec(change.before) == _spec(change.after):
        return []
    return [Notice(WARNING, change.key.resource, "running job keeps its spec",
                   "If this MPIJob is running, the MPI operator does not restart it: pods that exist keep "
                   "the old spec and mpirun keeps its process count. The new spec takes effect when the "
                   "MPIJob is created again (delete it and Flux re-creates it; training starts over, "
                   "from its checkpoints if it writes any).")]


def cluster_config_changed(change: ObjectChange, context: Context) -> list[Notice]:
    notices = [Notice(INFO, change.key.resource, "applied by eksctl, not Flux",
                      "Flux never applies the ClusterConfig: run eksctl for this change (node group sizes: "
                      "`eksctl scale nodegroup`; a new Kubernetes version: `eksctl upgrade cluster`).")]
    before = {g.get("name"): g for g in _node_groups(change.before)}
    for group in _node_groups(change.after):
        old = before.get(group.get("name"))
        fields = _changed_fields(old, group, NODEGROUP_FIXED) if old else []
        if fields:
            listed = ", ".join(f"`{field}`" for field in fields)
            notices.append(Notice(WARNING, change.key.resource, "node group must be replaced",
                                  f"Node group `{group.get('name')}` changes {listed}, which eksctl does not change "
                                  f"on an existing group: create a group under a new name, move the workload, "
                                  f"then delete the old group."))
    return notices


def _node_groups(manifest: Manifest | None) -> list[dict]:
    doc = manifest.doc if manifest else {}
    return [g for g in (doc.get("managedNodeGroups") or []) + (doc.get("nodeGroups") or []) if isinstance(g, dict)]


def removed(change: ObjectChange, context: Context) -> list[Notice]:
    owner = context.kustomization(change.before, "base")
    if owner is None or not _prunes(owner):
        return []  # counted by `orphans`
    group_kind = (change.before.group, change.before.kind)
    if group_kind == PVC:
        severity, fate = _volume_fate(change.before, context, "base")
        return [Notice(severity, change.key.resource, "data loss" if severity == DANGER else "volume released",
                       f"Flux Kustomization `{owner.name}` prunes: the claim is deleted, and {fate}.")]
    if group_kind == STORAGE_CLASS:
        return _storage_class_removed(change, context, owner)
    if group_kind == NAMESPACE:
        return [Notice(DANGER, change.key.resource, "data loss",
                       f"Flux Kustomization `{owner.name}` prunes: deleting the namespace deletes everything in "
                       f"it, claims and their volumes included, also objects that are not in Git.")]
    if group_kind == MPIJOB:
        return [Notice(WARNING, change.key.resource, "job stops",
                       f"Flux Kustomization `{owner.name}` prunes: the MPIJob and its pods are deleted, so a "
                       f"running training run stops.")]
    return []


def _storage_class_removed(change: ObjectChange, context: Context, owner: FluxKustomization) -> list[Notice]:
    doc = change.before.doc
    if doc.get("provisioner") != FSX_PROVISIONER or reclaim_policy(change.before) != "Delete":
        return []
    claims_removed = [c.key.resource for c in context.changes
                      if c.status == REMOVED and (c.key.group, c.key.kind) == PVC
                      and _spec(c.before).get("storageClassName") == change.key.name]
    if claims_removed:
        return [Notice(DANGER, change.key.resource, "data loss",
                       f"Flux Kustomization `{owner.name}` prunes this FSx class (reclaimPolicy Delete) together "
                       f"with {', '.join(claims_removed)}: their file systems and data are deleted.")]
    return [Notice(WARNING, change.key.resource, "FSx class removed",
                   f"Flux Kustomization `{owner.name}` prunes this FSx class (reclaimPolicy Delete). File systems "
                   f"made from it stay, and each is still deleted with its claim; new claims of the class stay "
                   f"Pending.")]


def orphans(context: Context) -> list[Notice]:
    """Removed objects whose owner does not prune stay on the cluster: one notice per owner."""
    left: dict[str, int] = {}
    for change in context.changes:
        if change.status != REMOVED or change.before.source == "eksctl":
            continue
        owner = context.kustomization(change.before, "base")
        if owner is not None and not _prunes(owner):
            left[owner.name] = left.get(owner.name, 0) + 1
    return [Notice(INFO, f"Kustomization {name}", "left on the cluster",
                   f"{count} removed object{'s stay' if count != 1 else ' stays'} on the cluster: Flux "
                   f"Kustomization `{name}` does not prune.") for name, count in left.items()]


def capacity(context: Context, gpus: Figure, nodes: Figure) -> list[Notice]:
    if context.head is None or nodes.after is None or not (gpus.changed or nodes.changed):
        return []
    if gpus.after > nodes.after:
        return [Notice(WARNING, "GPU capacity", "not enough GPUs",
                       f"MPIJobs ask for {gpus.after} GPUs but the GPU node groups hold at most {nodes.after} "
                       f"(maxSize x GPUs per node): workers that do not fit stay Pending.")]
    return []


def environment_level(context: Context) -> list[Notice]:
    if context.base is None:
        return [Notice(INFO, f"environment {context.name}", "new environment",
                       f"Create the cluster with `eksctl create cluster -f rendered/{context.name}/eksctl.yaml` "
                       f"(scripts/render), then `flux bootstrap` it with `--path clusters/{context.name}`.")]
    if context.head is None:
        return [Notice(WARNING, f"environment {context.name}", "environment removed",
                       f"If clusters/{context.name}/flux-system stays in Git, Flux prunes what the removed "
                       f"Kustomizations applied (see the notices below); if it goes too, Flux's sync fails on the "
                       f"missing path and changes nothing. The cluster itself stays until `eksctl delete cluster`.")]
    return []


CHANGED_RULES = {
    STORAGE_CLASS: storage_class_changed,
    PVC: claim_changed,
    JOB: job_changed,
    MPIJOB: mpijob_changed,
    CLUSTER_CONFIG: cluster_config_changed,
    ("", "Secret"): immutable_data_changed,
    ("", "ConfigMap"): immutable_data_changed,
    **{group_kind: workload_changed for group_kind in WORKLOADS},
}


def notices(context: Context, gpus: Figure, nodes: Figure) -> list[Notice]:
    found = environment_level(context)
    for change in context.changes:
        group_kind = (change.key.group, change.key.kind)
        if change.status == CHANGED and change.moved_from:
            found.extend(moved(change, context))
        if change.status == CHANGED and group_kind in CHANGED_RULES:
            found.extend(CHANGED_RULES[group_kind](change, context))
        elif change.status == REMOVED:
            found.extend(removed(change, context))
    found.extend(orphans(context))
    found.extend(capacity(context, gpus, nodes))
    return found


# --- quantities ------------------------------------------------------------------------------------

_QUANTITY = re.compile(r"^([0-9.]+(?:[eE][-+]?[0-9]+)?)([A-Za-z]*)$")
_FACTORS = {
    "": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
}


def parse_quantity(value) -> Decimal | None:
    """A Kubernetes quantity ("1200Gi", "1.2T", "5e3") in base units, or None."""
    match = _QUANTITY.match(str(value).strip())
    if not match or match.group(2) not in _FACTORS:
        return None
    try:
        return Decimal(match.group(1)) * _FACTORS[match.group(2)]
    except InvalidOperation:
        return None


def claim_size(claim: Manifest | None) -> Decimal | None:
    requests = (_spec(claim).get("resources") or {}).get("requests") or {}
    return parse_quantity(requests["storage"]) if "storage" in requests else None

