"""What the cluster says about the rendered environment: a server-side apply dry run of every object.

Each object goes to the API server as Flux sends it: an apply patch (application/apply-patch+yaml)
with the field manager "kustomize-controller", force on conflicts, and Flux's owner labels
(fluxcd/kustomize-controller v1.9.5: main.go `controllerName = "kustomize-controller"`, used as
ssa.Owner.Field in internal/controller/kustomization_controller.go, which also calls
SetOwnerLabels(objects, name, namespace)). An object a HelmRelease installs goes as helm-controller v1.6.4
applies it: server-side apply with forced conflicts (internal/action/install.go), the field manager
"helm-controller" (main.go sets Helm's kube.ManagedFieldsManager to controllerName), the origin labels
helm.toolkit.fluxcd.io/name and /namespace of the HelmRelease (internal/postrender/build.go
BuildPostRenderers, NewOriginLabels), and the release metadata Helm v4.2.4 adds (pkg/action/validate.go
setMetadataVisitor: label app.kubernetes.io/managed-by=Helm, annotations meta.helm.sh/release-name and
/release-namespace). With dryRun=All nothing is stored: the answer is the
object as it would be, or the server's refusal (Pod Security, admission webhooks, quota,
immutable fields). CRDs and Namespaces go first; an object whose kind or namespace only comes
with this run cannot be tried and is skipped with a note.

validate --server reports refusals and fields the server drops (a structural CRD schema prunes
unknown fields: validate/server.py); diff --live compares each dry-run result with the live object
(diff/live.py). A refusal of one object is its outcome's error (the reason and the first line of the server's
message); any other failure (discovery refused, the server gone) is one line (cluster.one_line_errors).
"""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass, field

from ..model import Environment, Manifest
from .cluster import one_line_errors

FIELD_MANAGER = "kustomize-controller"
OWNER_GROUP = "kustomize.toolkit.fluxcd.io"
NAME_LABEL = f"{OWNER_GROUP}/name"
NAMESPACE_LABEL = f"{OWNER_GROUP}/namespace"

HELM_FIELD_MANAGER = "helm-controller"
HELM_GROUP = "helm.toolkit.fluxcd.io"
HELM_SOURCE = "HelmRelease "  # render/helm_release.py: the `source` of what a HelmRelease installs
# helm-controller v1.6.4 internal/release/name.go ShortenName: Helm's limit on a release name.
_RELEASE_NAME_MAX, _RELEASE_HASH_LENGTH = 53, 12

# Server-owned bookkeeping, left out of every comparison.
VOLATILE_METADATA = ("managedFields", "resourceVersion", "uid", "generation", "creationTimestamp", "selfLink")


@dataclass
class Outcome:
    manifest: Manifest
    kustomization: str
    sent: dict
    result: dict | None = None  # the dry-run answer
    live: dict | None = None  # the object on the cluster now, None when absent
    error: str = ""  # the server's refusal: "Reason: message"
    skipped: str = ""  # why it was not tried


@dataclass
class Run:
    env: str
    outcomes: list[Outcome] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def applied(environment: Environment) -> list[Manifest]:
    """What Flux applies, without the root entry render makes up for clusters/<env> (bootstrap creates it)."""
    root = f"clusters/{environment.name}"
    return [
        m
        for m in environment.objects
        if m.kind and m.name and not m.local_config and not (m.kind == "Kustomization" and m.file == root)
    ]


def _order(manifest: Manifest) -> int:
    kind = manifest.kind
    return 0 if kind == "CustomResourceDefinition" else 1 if kind == "Namespace" else 2


def with_owner_labels(doc: dict, name: str, namespace: str) -> dict:
    sent = copy.deepcopy(doc)
    labels = sent.setdefault("metadata", {}).setdefault("labels", None) or {}
    sent["metadata"]["labels"] = {**labels, NAME_LABEL: name, NAMESPACE_LABEL: namespace}
    return sent


def release_name(release: dict) -> str:
    """helm-controller v1.6.4's release name: api/v2 GetReleaseName, then internal/release/name.go ShortenName."""
    spec = release.get("spec") or {}
    metadata = release.get("metadata") or {}
    name = str(spec.get("releaseName") or "")
    if not name:
        target = spec.get("targetNamespace")
        name = f"{target}-{metadata.get('name', '')}" if target else str(metadata.get("name", ""))
    if len(name) <= _RELEASE_NAME_MAX:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()
    return name[: _RELEASE_NAME_MAX - _RELEASE_HASH_LENGTH - 1] + "-" + digest[:_RELEASE_HASH_LENGTH]


def with_release_metadata(doc: dict, release: dict) -> dict:
    """`doc` as helm-controller sends it for `release` (the HelmRelease): origin labels and Helm's metadata."""
    metadata = release.get("metadata") or {}
    namespace = str(metadata.get("namespace") or "default")
    spec = release.get("spec") or {}
    sent = copy.deepcopy(doc)
    meta = sent.setdefault("metadata", {})
    meta["labels"] = {
        **(meta.get("labels") or {}),
        "app.kubernetes.io/managed-by": "Helm",
        f"{HELM_GROUP}/name": str(metadata.get("name", "")),
        f"{HELM_GROUP}/namespace": namespace,
    }
    meta["annotations"] = {
        **(meta.get("annotations") or {}),
        "meta.helm.sh/release-name": release_name(release),
        "meta.helm.sh/release-namespace": str(spec.get("targetNamespace") or namespace),
    }
    return sent


def as_sent(manifest: Manifest, environment: Environment) -> tuple[dict, str]:
    """(the object as Flux's controller sends it, that controller's field manager)."""
    if manifest.source.startswith(HELM_SOURCE):
        name = manifest.source.removeprefix(HELM_SOURCE)
        release = next((r.manifest for r in environment.releases if r.manifest.name == name), None)
        if release is not None:
            return with_release_metadata(manifest.doc, release.doc), HELM_FIELD_MANAGER
    owners = {k.name: k.manifest.namespace or "flux-system" for k in environment.kustomizations}
    return with_owner_labels(manifest.doc, manifest.source, owners.get(manifest.source, "flux-system")), FIELD_MANAGER


def _refusal(error) -> str:
    try:
        body = json.loads(error.body)
        # The first line: for an immutable field the server appends a diff of the whole spec.
        message = (body.get("message") or "").strip().splitlines()
        return f"{body.get('reason') or error.reason}: {message[0] if message else ''}".strip()
    except (TypeError, ValueError, AttributeError):
        return f"{error.status} {error.reason}"


@one_line_errors
def dry_run(api, environment: Environment, dry: bool = True) -> Run:
    """Every object of `environment`, dry-run applied in order (CRDs, Namespaces, the rest).
    `dry=False` applies for real (the tests make a cluster's state with it)."""
    from kubernetes.client.rest import ApiException
    from kubernetes.dynamic import DynamicClient
    from kubernetes.dynamic.exceptions import ResourceNotFoundError

    client = DynamicClient(api)
    run = Run(environment.name)
    new_kinds, new_namespaces = set(), set()
    for manifest in sorted(applied(environment), key=_order):
        sent, field_manager = as_sent(manifest, environment)
        outcome = Outcome(manifest, manifest.source, sent)
        run.outcomes.append(outcome)
        try:
            resource = client.resources.get(api_version=manifest.api_version, kind=manifest.kind)
        except ResourceNotFoundError:
            if (manifest.group, manifest.kind) in new_kinds:
                outcome.skipped = f"its CRD is only created in this run ({manifest.kind}.{manifest.group})"
            else:
                outcome.error = f"NotFound: the server has no kind {manifest.kind} in {manifest.api_version}"
            continue
        namespace = (manifest.namespace or "default") if resource.namespaced else None
        if namespace in new_namespaces:
            outcome.skipped = f"its namespace {namespace} is only created in this run"
            continue
        try:
            outcome.live = resource.get(name=manifest.name, namespace=namespace).to_dict()
        except ApiException as error:
            if error.status != 404:
                outcome.error = _refusal(error)
                continue
        try:
            answer = client.server_side_apply(
                resource,
                body=outcome.sent,
                name=manifest.name,
                namespace=namespace,
                field_manager=field_manager,
                force_conflicts=True,
                **({"dry_run": "All"} if dry else {}),
            )
            outcome.result = answer.to_dict()
        except ApiException as error:
            outcome.error = _refusal(error)
            continue
        if dry and outcome.live is None and manifest.kind == "Namespace":
            new_namespaces.add(manifest.name)
        if dry and outcome.live is None and manifest.kind == "CustomResourceDefinition":
            spec = manifest.doc.get("spec") or {}
            new_kinds.add((spec.get("group", ""), (spec.get("names") or {}).get("kind", "")))
    skipped = [o for o in run.outcomes if o.skipped]
    if skipped:
        run.notes.append(
            f"{environment.name}: {len(skipped)} object{'s' if len(skipped) != 1 else ''} not tried: "
            + "; ".join(f"{o.manifest.resource}: {o.skipped}" for o in skipped)
        )
    return run


def dropped_fields(sent, answer, path: tuple = ()) -> list[tuple]:
    """Paths present in what was sent and absent from the server's answer."""
    if isinstance(sent, dict) and isinstance(answer, dict):
        found = []
        for key, value in sent.items():
            if key not in answer:
                if value is not None:
                    found.append(path + (key,))
            else:
                found.extend(dropped_fields(value, answer[key], path + (key,)))
        return found
    if isinstance(sent, list) and isinstance(answer, list):
        found = []
        by_name = {i.get("name"): i for i in answer if isinstance(i, dict) and "name" in i}
        for index, item in enumerate(sent):
            if isinstance(item, dict) and "name" in item and item["name"] in by_name:
                found.extend(dropped_fields(item, by_name[item["name"]], path + (index,)))
            elif index < len(answer):
                found.extend(dropped_fields(item, answer[index], path + (index,)))
        return found
    return []


def comparable(doc: dict | None) -> dict | None:
    """An object without status and the server's bookkeeping, for diff --live."""
    if doc is None:
        return None
    doc = copy.deepcopy(doc)
    doc.pop("status", None)
    metadata = doc.get("metadata") or {}
    for key in VOLATILE_METADATA:
        metadata.pop(key, None)
    for key in [k for k, v in metadata.items() if v is None]:
        metadata.pop(key)
    return doc
