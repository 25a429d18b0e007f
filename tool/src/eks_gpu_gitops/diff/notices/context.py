"""What the notice rules read: one environment's two renders and its changes, plus the
small questions several rules ask (who owns an object, does it prune, does a Flux label or
annotation keep Flux away from it, what happens to a claim's volume)."""

from __future__ import annotations

from dataclasses import dataclass

from ...core.escaping import code_span
from ...model import STORAGE_CLASS, Environment, FluxKustomization, Manifest, mapping, quantity
from ..model import DANGER, WARNING, ObjectChange

FSX_PROVISIONER = "fsx.csi.aws.com"
FLUX = "kustomize.toolkit.fluxcd.io"
FORCE_ANNOTATION = f"{FLUX}/force"
# Labels or annotations that keep Flux's kustomize-controller away from one object (it compares
# the values ignoring case). Prune reads them on the object in the cluster, apply on both.
NOT_PRUNED = ((f"{FLUX}/prune", "disabled"), (f"{FLUX}/reconcile", "disabled"))
NOT_APPLIED = ((f"{FLUX}/reconcile", "disabled"), (f"{FLUX}/ssa", "Ignore"))
CREATED_ONLY = ((f"{FLUX}/ssa", "IfNotPresent"),)  # applied when missing, never updated
FORCED = ((FORCE_ANNOTATION, "enabled"),)  # re-created when a field cannot change in place


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


def spec(manifest: Manifest | None) -> dict:
    return mapping(manifest.doc, "spec") if manifest else {}


def changed_fields(before: dict, after: dict, fields) -> list[str]:
    return [field for field in fields if before.get(field) != after.get(field)]


def prunes(kustomization: FluxKustomization | None) -> bool:
    return bool(kustomization and spec(kustomization.manifest).get("prune") is True)


def flux_setting(manifest: Manifest | None, settings) -> str:
    """The first of `settings` that `manifest` carries as a label or annotation, as "key: value"; "" if none."""
    if manifest is None:
        return ""
    labels = manifest.metadata.get("labels")
    places = (labels if isinstance(labels, dict) else {}, manifest.annotations)
    for key, value in settings:
        for place in places:
            if str(place.get(key, "")).lower() == value.lower():
                return f"{key}: {place[key]}"
    return ""


def kept_on_removal(manifest: Manifest | None) -> str:
    """Why Flux does not delete this (base side) object when it leaves Git, or ""."""
    return flux_setting(manifest, NOT_PRUNED)


def not_updated(change: ObjectChange) -> str:
    """Why Flux leaves the existing object as it is instead of applying this change, or "".

    As kustomize-controller decides: skipped when the object in Git or the one in the cluster
    (the base side, which Flux applied) opts out of apply, or when the one in Git is to be
    created only."""
    return flux_setting(change.after, NOT_APPLIED + CREATED_ONLY) or flux_setting(change.before, NOT_APPLIED)


def forced(change: ObjectChange, context: Context) -> bool:
    kustomization = context.kustomization(change.after, "head")
    spec_force = bool(kustomization and spec(kustomization.manifest).get("force") is True)
    return spec_force or bool(flux_setting(change.after, FORCED))


def reclaim_policy(storage_class: Manifest | None) -> str | None:
    if storage_class is None:
        return None
    return str(storage_class.doc.get("reclaimPolicy") or "Delete")


def volume_fate(claim: Manifest, context: Context, side: str) -> tuple[str, str]:
    """(severity, sentence) for what deleting this claim does to its volume."""
    class_name = spec(claim).get("storageClassName")
    storage_class = context.find(side, STORAGE_CLASS, str(class_name)) if class_name else None
    policy = reclaim_policy(storage_class)
    fsx = storage_class is not None and storage_class.doc.get("provisioner") == FSX_PROVISIONER
    volume = "FSx for Lustre file system" if fsx else "volume"
    if policy == "Retain":
        return WARNING, (
            f"its {volume} is kept (reclaimPolicy Retain) but released: it keeps costing "
            f"money and a new claim does not bind to it without manual steps"
        )
    if policy is None:
        which = (
            f"StorageClass {code_span(class_name)} is not in this environment" if class_name else "no storageClassName"
        )
        return DANGER, f"{which}, so its {volume} is deleted if that class's reclaimPolicy is Delete (the default)"
    return DANGER, f"its {volume} and all data on it are deleted (reclaimPolicy {policy})"


def claim_size(claim: Manifest | None) -> float | None:
    requests = mapping(spec(claim), "resources", "requests")
    return quantity(requests["storage"]) if "storage" in requests else None
