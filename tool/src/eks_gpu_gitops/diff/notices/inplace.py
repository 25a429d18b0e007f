"""Changes Kubernetes, Flux or eksctl cannot apply to an object that already exists, and what
happens instead. Each rule takes (change, context) and returns notices; `notices` picks the rule,
unless Flux does not update the object at all."""

from __future__ import annotations

from ...core.escaping import code_span
from ...model import CLUSTER_CONFIG, MPIJOB, PVC, STORAGE_CLASS, node_groups
from ..model import DANGER, INFO, WARNING, Notice, ObjectChange
from .catalogue import notice_kind
from .context import FORCE_ANNOTATION, Context, changed_fields, claim_size, forced, not_updated, spec, volume_fate

JOB = ("batch", "Job")
WORKLOADS = (("apps", "Deployment"), ("apps", "DaemonSet"), ("apps", "ReplicaSet"), ("apps", "StatefulSet"))

# Fields the API server refuses to change on an existing object.
STORAGE_CLASS_FIXED = ("parameters", "provisioner", "reclaimPolicy", "volumeBindingMode")
STATEFULSET_FIXED = ("selector", "volumeClaimTemplates", "serviceName", "podManagementPolicy")
JOB_FIXED = ("template", "selector", "completionMode")
IMMUTABLE_DATA_FIXED = ("data", "stringData", "binaryData", "immutable")
# The only PVC spec fields that may change after creation: a storage increase, the attributes class.
PVC_MUTABLE = ("resources", "volumeAttributesClassName")
# Node group fields eksctl does not change on an existing group.
NODEGROUP_FIXED = (
    "instanceType",
    "instanceTypes",
    "amiFamily",
    "availabilityZones",
    "subnets",
    "efaEnabled",
    "privateNetworking",
    "volumeSize",
    "volumeType",
)


IMMUTABLE_FIELD = notice_kind(
    "immutable-field",
    DANGER,
    title="cannot change in place",
    description="A field that cannot change on an existing object changes",
    docs="""The API server rejects an update of a StorageClass's parameters, provisioner, reclaim policy or
    binding mode, a claim's class, access modes or a smaller size, a Job's pod template, a workload's selector
    (and a StatefulSet's claim templates, service and pod management), and the data of a Secret or ConfigMap
    marked immutable. The Flux Kustomization that applies it fails, and every Kustomization that depends on it
    waits. Delete the object (or set `kustomize.toolkit.fluxcd.io/force: enabled`) and Flux re-creates it, at
    the cost the notice names: a re-created claim loses its volume where the class deletes it.""",
)
VOLUME_EXPANDS = notice_kind(
    "volume-expands",
    INFO,
    title="volume grows",
    description="A claim asks for more storage and its class allows expansion",
    docs="""The volume is expanded in place (for FSx for Lustre, in steps the file system type allows). It
    cannot shrink again, and a bigger file system costs more.""",
)
VOLUME_CANNOT_EXPAND = notice_kind(
    "volume-cannot-expand",
    DANGER,
    title="cannot grow",
    description="A claim asks for more storage but its class does not allow expansion",
    docs="""Without `allowVolumeExpansion: true` on the claim's StorageClass, the API server rejects the bigger
    size and the Flux Kustomization fails. Allow expansion on the class (a change of its own) first.""",
)
RUNNING_JOB_KEEPS_SPEC = notice_kind(
    "running-job-keeps-spec",
    WARNING,
    title="running job keeps its spec",
    description="An MPIJob's spec changes, which a running job does not pick up",
    docs="""The MPI operator does not restart a running MPIJob: pods that exist keep the old spec and mpirun keeps
    its process count. The new spec takes effect when the MPIJob is created again (delete it and Flux
    re-creates it; training starts over, from its checkpoints if it writes any).""",
    once_per_report=True,
)
APPLIED_BY_EKSCTL = notice_kind(
    "applied-by-eksctl",
    INFO,
    title="applied by eksctl, not Flux",
    description="The eksctl ClusterConfig changes, which Flux never applies",
    docs="""The ClusterConfig is rendered like every manifest but only eksctl reads it: node group sizes change
    with `eksctl scale nodegroup`, a Kubernetes version with `eksctl upgrade cluster`, new node groups with
    `eksctl create nodegroup`.""",
    once_per_report=True,
)
NODE_GROUP_REPLACED = notice_kind(
    "node-group-replaced",
    WARNING,
    title="node group must be replaced",
    description="A node group field that eksctl does not change on an existing group changes",
    docs="""eksctl does not change a node group's instance type, AMI family, zones, subnets, EFA, networking or
    volume once the group exists. Create a group under a new name, move the workload, then delete the old
    group.""",
)
CHANGE_NOT_APPLIED = notice_kind(
    "change-not-applied",
    WARNING,
    title="Flux does not apply it",
    description="An object changes but a Flux label or annotation keeps Flux from applying the change",
    docs="""`kustomize.toolkit.fluxcd.io/reconcile: disabled` or `kustomize.toolkit.fluxcd.io/ssa: Ignore` (on the
    object in Git or the one in the cluster), or `kustomize.toolkit.fluxcd.io/ssa: IfNotPresent` (in Git:
    create, never update), make kustomize-controller leave the object as it is, so the change never reaches
    the cluster.""",
)


def cannot_change(change: ObjectChange, context: Context, fields: list[str], recreated: str) -> Notice:
    """The notice for immutable fields: who fails, who waits, and what re-creating costs."""
    listed = ", ".join(code_span(field) for field in fields)
    if forced(change, context):
        happens = f"Force is on, so Flux deletes and re-creates it: {recreated}"
    else:
        owner = change.after.source
        waiting = context.dependents(owner)
        blocked = f"; {', '.join(f'{code_span(name)}' for name in waiting)} waits for it" if waiting else ""
        happens = (
            f"The API server rejects the update, so Flux Kustomization {code_span(owner)} fails to apply"
            f"{blocked}. To apply it, delete the object (or set the annotation `{FORCE_ANNOTATION}: "
            f"enabled`) and Flux re-creates it: {recreated}"
        )
    return IMMUTABLE_FIELD.notice(
        change.key.resource, f"Changes {listed}, which cannot change on an existing object. {happens}"
    )


def storage_class(change: ObjectChange, context: Context) -> list[Notice]:
    fields = changed_fields(change.before.doc, change.after.doc, STORAGE_CLASS_FIXED)
    if not fields:
        return []
    return [
        cannot_change(
            change,
            context,
            fields,
            "volumes that exist keep their old settings; only claims made afterwards use the new ones.",
        )
    ]


def claim(change: ObjectChange, context: Context) -> list[Notice]:
    before, after = spec(change.before), spec(change.after)
    fields = changed_fields(before, after, sorted((before.keys() | after.keys()) - set(PVC_MUTABLE)))
    _, fate = volume_fate(change.before, context, "base")
    recreated = f"the claim is deleted and made again, and {fate}."
    old_size, new_size = claim_size(change.before), claim_size(change.after)
    notices = []
    if fields:
        notices.append(cannot_change(change, context, fields, recreated))
    if old_size is not None and new_size is not None and new_size < old_size:
        notices.append(cannot_change(change, context, ["resources.requests.storage (smaller)"], recreated))
    elif old_size is not None and new_size is not None and new_size > old_size:
        notices.append(_expansion(change, context))
    return notices


def _expansion(change: ObjectChange, context: Context) -> Notice:
    class_name = spec(change.after).get("storageClassName")
    found = context.find("head", STORAGE_CLASS, str(class_name)) if class_name else None
    if found is not None and found.doc.get("allowVolumeExpansion") is True:
        return VOLUME_EXPANDS.notice(
            change.key.resource,
            "The volume is expanded in place. It cannot shrink again, and a bigger file system costs more.",
        )
    return VOLUME_CANNOT_EXPAND.notice(
        change.key.resource,
        f"The API server rejects the bigger size: StorageClass {code_span(class_name)} does not set "
        "allowVolumeExpansion: true.",
    )


def job(change: ObjectChange, context: Context) -> list[Notice]:
    fields = changed_fields(spec(change.before), spec(change.after), JOB_FIXED)
    if not fields:
        return []
    return [cannot_change(change, context, fields, "the Job is deleted and created again, so it runs again.")]


def workload(change: ObjectChange, context: Context) -> list[Notice]:
    fixed = STATEFULSET_FIXED if change.key.kind == "StatefulSet" else ("selector",)
    fields = changed_fields(spec(change.before), spec(change.after), fixed)
    if not fields:
        return []
    return [cannot_change(change, context, fields, "it is deleted and created again, and all its pods restart.")]


def immutable_data(change: ObjectChange, context: Context) -> list[Notice]:
    """A Secret or ConfigMap marked `immutable: true` keeps its data for good."""
    if change.before.doc.get("immutable") is not True:
        return []
    fields = changed_fields(change.before.doc, change.after.doc, IMMUTABLE_DATA_FIXED)
    if not fields:
        return []
    return [cannot_change(change, context, fields, "pods that mount it keep the old content until they restart.")]


def mpijob(change: ObjectChange, context: Context) -> list[Notice]:
    if spec(change.before) == spec(change.after):
        return []
    return [
        RUNNING_JOB_KEEPS_SPEC.notice(
            change.key.resource,
            "If this MPIJob is running, the MPI operator does not restart it: pods that exist keep "
            "the old spec and mpirun keeps its process count. The new spec takes effect when the "
            "MPIJob is created again (delete it and Flux re-creates it; training starts over, "
            "from its checkpoints if it writes any).",
        )
    ]


def cluster_config(change: ObjectChange, context: Context) -> list[Notice]:
    notices = [
        APPLIED_BY_EKSCTL.notice(
            change.key.resource,
            "Flux never applies the ClusterConfig: run eksctl for this change (node group sizes: "
            "`eksctl scale nodegroup`; a new Kubernetes version: `eksctl upgrade cluster`).",
        )
    ]
    before = {group.name: group.doc for group in node_groups(change.before.doc)}
    for group in (g.doc for g in node_groups(change.after.doc)):
        old = before.get(str(group.get("name", "")))
        fields = changed_fields(old, group, NODEGROUP_FIXED) if old else []
        if fields:
            listed = ", ".join(code_span(field) for field in fields)
            notices.append(
                NODE_GROUP_REPLACED.notice(
                    change.key.resource,
                    f"Node group {code_span(group.get('name'))} changes {listed}, which eksctl does not change "
                    f"on an existing group: create a group under a new name, move the workload, "
                    f"then delete the old group.",
                )
            )
    return notices


RULES = {
    STORAGE_CLASS: storage_class,
    PVC: claim,
    JOB: job,
    MPIJOB: mpijob,
    CLUSTER_CONFIG: cluster_config,
    ("", "Secret"): immutable_data,
    ("", "ConfigMap"): immutable_data,
    **dict.fromkeys(WORKLOADS, workload),
}


def notices(change: ObjectChange, context: Context) -> list[Notice]:
    """What applying this change to the existing object does."""
    setting = not_updated(change)
    if setting:
        return [
            CHANGE_NOT_APPLIED.notice(
                change.key.resource,
                f"The object carries {code_span(setting)}, so Flux leaves the one in the cluster as it is: this "
                f"change does not reach the cluster.",
            )
        ]
    rule = RULES.get((change.key.group, change.key.kind))
    return rule(change, context) if rule else []
