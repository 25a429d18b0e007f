"""Issue 25, point 3, the parts that need no Kueue: Flux reconciles the baked project to Ready, in dependsOn
order, with the cluster's own values substituted."""

from __future__ import annotations

from datetime import datetime

from .loop import SECURITY_GROUP_ID, SUBNET_ID, ready_condition

LAYOUT = {"flux-system", "infrastructure", "training"}


def _not_ready(loop, kind: str) -> list[str]:
    lines = []
    for obj in loop.list(kind):
        if (ready_condition(obj) or {}).get("status") == "True":
            continue
        status = obj.get("status") or {}
        condition = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), {})
        message = " ".join(str(condition.get("message", "no Ready condition")).split())[:400]
        generation = f"generation {obj['metadata'].get('generation')}, observed {status.get('observedGeneration')}"
        lines.append(
            f"{kind} {obj['metadata']['name']} ({generation}): {condition.get('reason', 'Unknown')}: {message}"
        )
    return lines


def test_the_layout_kustomizations_exist(loop):
    names = {obj["metadata"]["name"] for obj in loop.list("Kustomization")}
    assert names >= LAYOUT, f"Kustomizations missing from the cluster: {sorted(LAYOUT - names)}; found {sorted(names)}"


def test_every_kustomization_is_ready(loop):
    not_ready = _not_ready(loop, "Kustomization")
    assert not not_ready, "Kustomizations not Ready:\n" + "\n".join(not_ready)


def test_every_helmrelease_is_ready(loop):
    releases = loop.list("HelmRelease")
    assert releases, "no HelmRelease in the cluster: infrastructure was not applied"
    not_ready = _not_ready(loop, "HelmRelease")
    assert not not_ready, "HelmReleases not Ready:\n" + "\n".join(not_ready)


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _inventory_created(loop, kustomization: dict) -> list[tuple[datetime, str]]:
    """(creationTimestamp, id) of every object in a Kustomization's inventory."""
    found = []
    for entry in (kustomization.get("status") or {}).get("inventory", {}).get("entries") or []:
        namespace, name, group, kind = entry["id"].split("_")
        api_version = f"{group}/{entry['v']}" if group else entry["v"]
        resource = loop.cluster.dynamic.resources.get(api_version=api_version, kind=kind)
        obj = resource.get(name=name, namespace=namespace or None)
        found.append((_time(obj.metadata.creationTimestamp), entry["id"]))
    return found


# While a Kustomization's dependsOn is not Ready, kustomize-controller v1.9.5 only marks it Ready=False with this
# reason (internal/controller/kustomization_controller.go; fluxcd/pkg/apis/meta conditions.go) and applies nothing.
WAITING = {"DependencyNotReady", "-", "Progressing", "ProgressingWithRetry"}


def test_training_is_applied_only_after_infrastructure_is_ready(loop):
    infrastructure_ready = loop.ready_at.get("Kustomization/infrastructure")
    assert infrastructure_ready is not None, "infrastructure never turned Ready, so training's order cannot be checked"
    before = [
        (seconds, status, reason)
        for seconds, status, reason in loop.history.get("Kustomization/training", [])
        if seconds < infrastructure_ready and reason not in WAITING
    ]
    assert not before, (
        f"training was reconciled before infrastructure turned Ready ({infrastructure_ready} s after bootstrap): "
        + "; ".join(f"{seconds} s: Ready={status} {reason}" for seconds, status, reason in before)
    )
    by_name = {obj["metadata"]["name"]: obj for obj in loop.list("Kustomization")}
    infrastructure, training = by_name["infrastructure"], by_name["training"]
    ready = ready_condition(infrastructure)
    created = _inventory_created(loop, training)
    assert created, "training's inventory is empty: it applied nothing"
    first, first_id = min(created)
    infrastructure_transition = _time(ready["lastTransitionTime"])
    assert first >= infrastructure_transition, (
        f"training created {first_id} at {first.isoformat()}, before infrastructure turned Ready at "
        f"{infrastructure_transition.isoformat()}"
    )
    assert training["status"].get("lastAppliedRevision") == infrastructure["status"].get("lastAppliedRevision"), (
        "training and infrastructure applied different revisions of the repository: "
        f"{training['status'].get('lastAppliedRevision')} vs {infrastructure['status'].get('lastAppliedRevision')}"
    )
    assert {"name": "infrastructure"} in (training["spec"].get("dependsOn") or []), (
        "training does not dependsOn infrastructure: nothing orders it after the CRDs and the StorageClass"
    )


def test_fsx_variables_are_substituted_from_cluster_settings(loop):
    storage = loop.cluster.client.StorageV1Api(loop.cluster.api)
    found = [c for c in storage.list_storage_class().items if c.metadata.name == "fsx-lustre"]
    infrastructure = next((k for k in loop.list("Kustomization") if k["metadata"]["name"] == "infrastructure"), {})
    ready = next((c for c in (infrastructure.get("status") or {}).get("conditions") or [] if c["type"] == "Ready"), {})
    assert found, (
        "StorageClass fsx-lustre is not on the cluster: Flux did not apply infrastructure "
        f"({ready.get('reason', 'no Ready condition')}: {' '.join(str(ready.get('message', '')).split())[:400]})"
    )
    parameters = found[0].parameters or {}
    assert parameters.get("subnetId") == SUBNET_ID, (
        f"StorageClass fsx-lustre subnetId is {parameters.get('subnetId')!r}, not the cluster-settings ConfigMap's "
        f"FSX_SUBNET_ID {SUBNET_ID!r}"
    )
    assert parameters.get("securityGroupIds") == SECURITY_GROUP_ID, (
        f"StorageClass fsx-lustre securityGroupIds is {parameters.get('securityGroupIds')!r}, not the "
        f"cluster-settings ConfigMap's FSX_SECURITY_GROUP_ID {SECURITY_GROUP_ID!r}"
    )
    left = {key: value for key, value in parameters.items() if "${" in str(value)}
    assert not left, f"StorageClass fsx-lustre parameters not substituted: {left}"
