"""What Flux's prune would delete: live objects a Flux Kustomization applied that are no longer rendered.

kustomize-controller v1.9.5 prunes from its Kustomization's inventory, not from labels
(internal/controller/kustomization_controller.go: the stale objects are the old status.inventory's entries missing
from the new one, deleted by deleteObjects). Each entry's id is fluxcd/cli-utils v1.2.3 ObjMetadata.String():
"namespace_name_group_kind", with ":" in an RBAC object's name written "__" (pkg/object/objmetadata.go,
ParseObjMetadata). deleteObjects passes fluxcd/pkg/ssa v0.76.2 DeleteOptions: Inclusions, the Kustomization's owner
labels (an object whose labels name another owner is skipped, manager_delete.go), and Exclusions, a label or
annotation kustomize.toolkit.fluxcd.io/prune or /reconcile "disabled", or /ssa "Ignore" (utils/meta.go
AnyInMetadata, case-insensitive).

A Kustomization not on the cluster yet, or without an inventory, falls back to the owner labels, leaving out
objects with an ownerReference: Flux never applied those (an Endpoints or EndpointSlice copies its Service's labels).
"""

from __future__ import annotations

from ..model import Environment
from .cluster import one_line_errors
from .server_apply import NAME_LABEL, NAMESPACE_LABEL, OWNER_GROUP, applied

KUSTOMIZATION_VERSION = "kustomize.toolkit.fluxcd.io/v1"
_EXCLUSIONS = {
    f"{OWNER_GROUP}/prune": "disabled",
    f"{OWNER_GROUP}/reconcile": "disabled",
    f"{OWNER_GROUP}/ssa": "ignore",
}
_COLON_TRANSCODED = "__"


def inventory_key(entry_id: str) -> tuple[str, str, str, str] | None:
    """(group, kind, namespace, name) of an inventory entry's id, None when it does not parse."""
    namespace, _, rest = entry_id.partition("_")
    rest, _, kind = rest.rpartition("_")
    name, _, group = rest.rpartition("_")
    if not (kind and name):
        return None
    return group, kind, namespace, name.replace(_COLON_TRANSCODED, ":")


def excluded(item: dict) -> bool:
    """Flux skips it: a prune, reconcile or ssa label or annotation says so."""
    metadata = item.get("metadata") or {}
    for values in (metadata.get("labels") or {}, metadata.get("annotations") or {}):
        for key, value in _EXCLUSIONS.items():
            if str(values.get(key) or "").lower() == value:
                return True
    return False


def owned_by(item: dict, name: str, namespace: str) -> bool:
    labels = (item.get("metadata") or {}).get("labels") or {}
    return labels.get(NAME_LABEL) == name and labels.get(NAMESPACE_LABEL) == namespace


@one_line_errors
def pruned(api, environment: Environment) -> list[tuple[str, dict]]:
    """(Kustomization, live object) for each object one of the environment's Flux Kustomizations would prune.
    The root entry is left out when the repository does not hold what it applies (bootstrap made it)."""
    from kubernetes.dynamic import DynamicClient

    client = DynamicClient(api)
    rendered = {(m.group, m.kind, m.namespace, m.name) for m in applied(environment)}
    found, by_labels = [], []
    for kustomization in environment.kustomizations:
        if not kustomization.objects:
            continue
        namespace = kustomization.manifest.namespace or "flux-system"
        entries = _inventory(client, kustomization.name, namespace)
        if entries is None:
            by_labels.append(kustomization.name)
            continue
        for entry in entries:
            key = inventory_key(str(entry.get("id") or ""))
            if key is None or key in rendered:
                continue
            item = _live(client, key, str(entry.get("v") or ""))
            if item is not None and owned_by(item, kustomization.name, namespace) and not excluded(item):
                found.append((kustomization.name, item))
    if by_labels:
        found.extend(_labelled(client, by_labels, rendered))
    return found


def _inventory(client, name: str, namespace: str) -> list[dict] | None:
    """The live Kustomization's status.inventory.entries; None when it is not there or has no inventory."""
    from kubernetes.client.rest import ApiException
    from kubernetes.dynamic.exceptions import ResourceNotFoundError

    try:
        resource = client.resources.get(api_version=KUSTOMIZATION_VERSION, kind="Kustomization")
        live = resource.get(name=name, namespace=namespace).to_dict()
    except (ApiException, ResourceNotFoundError):
        return None
    inventory = (live.get("status") or {}).get("inventory")
    if not isinstance(inventory, dict):
        return None
    return [e for e in inventory.get("entries") or [] if isinstance(e, dict)]


def _live(client, key: tuple[str, str, str, str], version: str) -> dict | None:
    """The object an inventory entry names, with apiVersion and kind; None when it is gone or cannot be read."""
    from kubernetes.client.rest import ApiException
    from kubernetes.dynamic.exceptions import ResourceNotFoundError

    group, kind, namespace, name = key
    api_version = f"{group}/{version}" if group else version
    try:
        resource = client.resources.get(api_version=api_version, kind=kind)
        item = resource.get(name=name, namespace=namespace or None).to_dict()
    except (ApiException, ResourceNotFoundError, ValueError):
        return None
    return {"apiVersion": resource.group_version, "kind": resource.kind, **item}


def _listable(client) -> list:
    """Every kind the server lists, in its preferred version (events and the like are never Flux's)."""
    from kubernetes.dynamic.resource import Subresource

    found = []
    for resource in client.resources.search():
        if isinstance(resource, Subresource) or not getattr(resource, "preferred", False):
            continue
        if (
            "list" in (resource.verbs or [])
            and resource.kind not in ("Event", "Lease")
            and not resource.kind.endswith("List")
        ):
            found.append(resource)
    return found


def _labelled(client, owners: list[str], rendered: set) -> list[tuple[str, dict]]:
    """The fallback: objects labelled as applied by one of `owners`, not rendered, not owned by another object."""
    from kubernetes.client.rest import ApiException

    selector = f"{NAME_LABEL} in ({','.join(owners)})"
    found = []
    for resource in _listable(client):
        try:
            items = resource.get(label_selector=selector).to_dict().get("items") or []
        except ApiException:
            continue  # a kind this user may not list: Flux would not prune what it cannot see either
        for item in items:
            metadata = item.get("metadata") or {}
            key = (resource.group or "", resource.kind, metadata.get("namespace") or "", metadata.get("name"))
            if key in rendered or metadata.get("ownerReferences") or excluded(item):
                continue
            document = {"apiVersion": resource.group_version, "kind": resource.kind, **item}
            found.append(((metadata.get("labels") or {}).get(NAME_LABEL, ""), document))
    return found
