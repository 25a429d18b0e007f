"""What removing an object (or moving it to another Flux Kustomization) does on the cluster:
data that is deleted where Flux prunes, objects left behind where it does not (the
Kustomization does not prune, or the object opts out with a Flux label or annotation)."""

from __future__ import annotations

from ..manifests import FluxKustomization
from ..rules.model import MPIJOB
from .model import DANGER, INFO, REMOVED, WARNING, Notice, ObjectChange
from .scope import (FSX_PROVISIONER, NAMESPACE, PVC, STORAGE_CLASS, Context, kept_on_removal, prunes, reclaim_policy,
                    spec, volume_fate)


def deleted(change: ObjectChange, context: Context) -> bool:
    """Whether Flux deletes this removed (or moved) object from the cluster."""
    return prunes(context.kustomization(change.before, "base")) and not kept_on_removal(change.before)


def removed(change: ObjectChange, context: Context) -> list[Notice]:
    if not deleted(change, context):
        return []  # counted by `orphans`
    owner = context.kustomization(change.before, "base")
    group_kind = (change.key.group, change.key.kind)
    if group_kind == PVC:
        severity, fate = volume_fate(change.before, context, "base")
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
    if change.before.doc.get("provisioner") != FSX_PROVISIONER or reclaim_policy(change.before) != "Delete":
        return []
    claims_removed = [c.key.resource for c in context.changes
                      if c.status == REMOVED and (c.key.group, c.key.kind) == PVC and deleted(c, context)
                      and spec(c.before).get("storageClassName") == change.key.name]
    if claims_removed:
        return [Notice(DANGER, change.key.resource, "data loss",
                       f"Flux Kustomization `{owner.name}` prunes this FSx class (reclaimPolicy Delete) together "
                       f"with {', '.join(claims_removed)}: their file systems and data are deleted.")]
    return [Notice(WARNING, change.key.resource, "FSx class removed",
                   f"Flux Kustomization `{owner.name}` prunes this FSx class (reclaimPolicy Delete). File systems "
                   f"made from it stay, and each is still deleted with its claim; new claims of the class stay "
                   f"Pending.")]


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
    return [Notice(severity, change.key.resource, "moves between Kustomizations",
                   f"Moves from Flux Kustomization `{old_owner.name}` to `{new_owner}`. If `{old_owner.name}` "
                   f"reconciles first, it prunes the object and `{new_owner}` creates it again.{lost}")]


def orphans(context: Context) -> list[Notice]:
    """Removed objects Flux does not delete stay on the cluster: one notice per owner that does
    not prune, one per object that opts out of pruning."""
    left: dict[str, int] = {}
    kept = []
    for change in context.changes:
        if change.status != REMOVED:
            continue
        owner = context.kustomization(change.before, "base")
        if owner is None:
            continue
        if not prunes(owner):
            left[owner.name] = left.get(owner.name, 0) + 1
        elif setting := kept_on_removal(change.before):
            kept.append(Notice(INFO, change.key.resource, "left on the cluster",
                               f"It carries `{setting}`, so Flux leaves it on the cluster and nothing is "
                               f"deleted. Delete it by hand if it should go."))
    return [Notice(INFO, f"Kustomization {name}", "left on the cluster",
                   f"{count} removed object{'s stay' if count != 1 else ' stays'} on the cluster: Flux "
                   f"Kustomization `{name}` does not prune.") for name, count in left.items()] + kept
