"""What removing an object (or moving it to another Flux Kustomization or namespace) does on the cluster:
data that is deleted where Flux prunes, objects left behind where it does not (the
Kustomization does not prune, or the object opts out with a Flux label or annotation).

An object that moves to another namespace is a new object there; the one in the old namespace is
removed, so it gets the notices of a removed object, about the old one ("PersistentVolumeClaim
ml/data"), saying where it moves."""

from __future__ import annotations

from ...core.escaping import code_span
from ...model import MPIJOB, NAMESPACE, PVC, STORAGE_CLASS, FluxKustomization
from ..model import DANGER, INFO, MOVED, REMOVED, WARNING, Notice, ObjectChange
from .catalogue import notice_kind
from .context import FSX_PROVISIONER, Context, kept_on_removal, prunes, reclaim_policy, spec, volume_fate

CLAIM_DELETED = notice_kind(
    "claim-deleted",
    DANGER,
    title="data loss",
    description="A claim leaves Git and Flux deletes it, and with it its volume",
    docs="""The claim's Flux Kustomization prunes, so removing the claim from Git deletes it on the cluster; its
    StorageClass's reclaim policy is Delete (the default) or unknown, so the volume and every file on it (for
    FSx for Lustre: the file system, data and checkpoints) are deleted too. Keep the claim, or give its class
    `reclaimPolicy: Retain` before removing it. A claim that moves to another namespace (an overlay's
    `namespace:` or a Flux `targetNamespace` that changes) is removed from the old one the same way, and the
    new claim starts with an empty volume.""",
)
CLAIM_RELEASED = notice_kind(
    "claim-released",
    WARNING,
    title="volume released",
    description="A claim leaves Git and Flux deletes it; its class retains the volume",
    docs="""With `reclaimPolicy: Retain` the volume outlives the claim: nothing is lost, but the file system
    keeps costing money and a new claim does not bind to it without manual steps (clear the volume's
    claimRef). Delete the volume by hand if it should go.""",
)
FSX_CLASS_REMOVED_WITH_CLAIMS = notice_kind(
    "fsx-class-removed-with-claims",
    DANGER,
    title="data loss",
    description="An FSx StorageClass that deletes its volumes leaves Git together with claims of it",
    docs="""Flux prunes the class and the claims in the same reconcile; with `reclaimPolicy: Delete` each claim's
    file system and its data are deleted.""",
)
FSX_CLASS_REMOVED = notice_kind(
    "fsx-class-removed",
    WARNING,
    title="FSx class removed",
    description="An FSx StorageClass that deletes its volumes leaves Git; its claims stay",
    docs="""File systems made from the class stay, and each is still deleted with its claim. New claims of the
    class stay Pending until it exists again.""",
)
NAMESPACE_DELETED = notice_kind(
    "namespace-deleted",
    DANGER,
    title="data loss",
    description="A namespace leaves Git and Flux deletes it, with everything in it",
    docs="""Deleting a namespace deletes every object in it, claims (and their volumes) and objects that are not
    in Git included.""",
)
JOB_STOPS = notice_kind(
    "job-stops",
    WARNING,
    title="job stops",
    description="An MPIJob leaves Git and Flux deletes it, stopping a running training run",
    docs="""The MPIJob and its pods are deleted; a run in progress stops, and starts over from its checkpoints
    when the job comes back.""",
)
MOVES_BETWEEN_KUSTOMIZATIONS = notice_kind(
    "moves-between-kustomizations",
    WARNING,
    title="moves between Kustomizations",
    description="An object moves to another Flux Kustomization, which races the old one's prune",
    docs="""If the old Kustomization reconciles first, it prunes the object and the new one creates it again: a
    Deployment restarts, a Job runs again. Mark the object `kustomize.toolkit.fluxcd.io/prune: disabled` in
    one change and move it in the next.""",
)
MOVES_WITH_DATA = notice_kind(
    "moves-between-kustomizations-data-loss",
    DANGER,
    title="moves between Kustomizations",
    description="A claim or namespace moves to another Flux Kustomization; the old one's prune deletes its data",
    docs="""As moves-between-kustomizations, but deleting the object on the way deletes data: a namespace with
    everything in it, or a claim whose class deletes its volume.""",
)
LEFT_ON_CLUSTER = notice_kind(
    "left-on-cluster",
    INFO,
    title="left on the cluster",
    description="Objects leave Git but Flux does not delete them",
    docs="""Their Flux Kustomization does not prune, or the object carries `kustomize.toolkit.fluxcd.io/prune:
    disabled` (or `reconcile: disabled`). Nothing is deleted; delete the objects by hand if they should
    go. An object that moves to another namespace leaves its old copy behind the same way.""",
)


def deleted(change: ObjectChange, context: Context) -> bool:
    """Whether Flux deletes this removed (or moved) object from the cluster."""
    return prunes(context.kustomization(change.before, "base")) and not kept_on_removal(change.before)


def _gone(change: ObjectChange) -> tuple[str, str]:
    """(the removed object's name, a sentence before the notice's own) for a removed or moved object."""
    if change.status != MOVED:
        return change.key.resource, ""
    where = f"namespace {code_span(change.key.namespace)}"
    new = "a new claim with a new, empty volume" if (change.key.group, change.key.kind) == PVC else "a new object"
    return (
        change.old_key.resource,
        f"Moves to {where}, where {new} is created; the one in {code_span(change.from_namespace)} goes. ",
    )


def removed(change: ObjectChange, context: Context) -> list[Notice]:
    if not deleted(change, context):
        return []  # counted by `orphans`
    owner = context.kustomization(change.before, "base")
    group_kind = (change.key.group, change.key.kind)
    resource, moves = _gone(change)
    if group_kind == PVC:
        severity, fate = volume_fate(change.before, context, "base")
        kind = CLAIM_DELETED if severity == DANGER else CLAIM_RELEASED
        return [
            kind.notice(
                resource, f"{moves}Flux Kustomization {code_span(owner.name)} prunes: the claim is deleted, and {fate}."
            )
        ]
    if group_kind == STORAGE_CLASS:
        return _storage_class_removed(change, context, owner)
    if group_kind == NAMESPACE:
        return [
            NAMESPACE_DELETED.notice(
                resource,
                f"Flux Kustomization {code_span(owner.name)} prunes: deleting the namespace deletes everything in "
                f"it, also objects that are not in Git.{_claims_in(change.key.name, context)}",
            )
        ]
    if group_kind == MPIJOB:
        return [
            JOB_STOPS.notice(
                resource,
                f"{moves}Flux Kustomization {code_span(owner.name)} prunes: the MPIJob and its pods are deleted, so a "
                f"running training run stops.",
            )
        ]
    return []


def _claims_in(namespace: str, context: Context) -> str:
    """What deleting the namespace does to each claim in it, as the claim's own notice says it."""
    claims = [
        m for m in (context.base.objects if context.base else []) if m.group_kind == PVC and m.namespace == namespace
    ]
    return "".join(f" {c.kind}/{c.name} is deleted, and {volume_fate(c, context, 'base')[1]}." for c in claims)


def _storage_class_removed(change: ObjectChange, context: Context, owner: FluxKustomization) -> list[Notice]:
    if change.before.doc.get("provisioner") != FSX_PROVISIONER or reclaim_policy(change.before) != "Delete":
        return []
    claims_removed = [
        c.old_key.resource
        for c in context.changes
        if c.status in (REMOVED, MOVED)
        and (c.key.group, c.key.kind) == PVC
        and deleted(c, context)
        and spec(c.before).get("storageClassName") == change.key.name
    ]
    if claims_removed:
        return [
            FSX_CLASS_REMOVED_WITH_CLAIMS.notice(
                change.key.resource,
                f"Flux Kustomization {code_span(owner.name)} prunes this FSx class (reclaimPolicy Delete) together "
                f"with {', '.join(claims_removed)}: their file systems and data are deleted.",
            )
        ]
    return [
        FSX_CLASS_REMOVED.notice(
            change.key.resource,
            f"Flux Kustomization {code_span(owner.name)} prunes this FSx class (reclaimPolicy Delete). File systems "
            f"made from it stay, and each is still deleted with its claim; new claims of the class stay "
            f"Pending.",
        )
    ]


def moved(change: ObjectChange, context: Context) -> list[Notice]:
    """Moving an object between Flux Kustomizations races the old owner's prune."""
    if not change.moved_from or not deleted(change, context):
        return []
    old_owner = context.kustomization(change.before, "base")
    new_owner = change.after.source or f"clusters/{context.name}"
    severity, lost = WARNING, ""
    if (change.key.group, change.key.kind) == PVC:
        severity, fate = volume_fate(change.before, context, "base")
        lost = f" Deleting the claim means {fate}."
    elif (change.key.group, change.key.kind) == NAMESPACE:
        severity, lost = DANGER, " Deleting the namespace deletes everything in it."
    kind = MOVES_WITH_DATA if severity == DANGER else MOVES_BETWEEN_KUSTOMIZATIONS
    return [
        kind.notice(
            change.key.resource,
            f"Moves from Flux Kustomization {code_span(old_owner.name)} to {code_span(new_owner)}. If "
            f"{code_span(old_owner.name)} reconciles first, it prunes the object and {code_span(new_owner)} creates it "
            f"again.{lost}",
        )
    ]


def orphans(context: Context) -> list[Notice]:
    """Removed objects Flux does not delete stay on the cluster: one notice per owner that does
    not prune, one per object that opts out of pruning. A moved object's old copy counts."""
    left: dict[str, list[ObjectChange]] = {}
    kept = []
    for change in context.changes:
        if change.status not in (REMOVED, MOVED):  # a moved object leaves its old namespace
            continue
        owner = context.kustomization(change.before, "base")
        if owner is None:
            continue
        if not prunes(owner):
            left.setdefault(owner.name, []).append(change)
        elif setting := kept_on_removal(change.before):
            kept.append(
                LEFT_ON_CLUSTER.notice(
                    change.old_key.resource,
                    f"It carries {code_span(setting)}, so Flux leaves it on the cluster and nothing is "
                    f"deleted. Delete it by hand if it should go.",
                )
            )
    return [
        LEFT_ON_CLUSTER.notice(
            f"Kustomization {name}",
            f"{len(changes)} removed object{'s stay' if len(changes) != 1 else ' stays'} on the cluster"
            f"{_moved_copies(changes)}: Flux Kustomization {code_span(name)} does not prune.",
        )
        for name, changes in left.items()
    ] + kept


def _moved_copies(changes: list[ObjectChange]) -> str:
    moved = sum(1 for change in changes if change.status == MOVED)
    if not moved:
        return ""
    return f" ({moved} of them moved to another namespace, where a new copy is created)"
