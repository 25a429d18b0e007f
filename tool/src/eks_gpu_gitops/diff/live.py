"""diff --live: what applying the working tree's environments would change on the cluster. Each object's
server-side apply dry run (live/server_apply.py) is compared with the live object, and what Flux would prune
(live/prune.py: the Kustomization's inventory) shows as removed.

Before the dry run, a Flux Kustomization's variables whose values only the cluster has (a substituteFrom
ConfigMap or Secret the repository does not hold, such as cluster-settings) are substituted as
kustomize-controller would on that cluster: the sources are read from the cluster the diff talks to, and the
objects substituted from their unsubstituted form with the render's own substitution (render/post_build.py).
A source that cannot be read leaves the objects as they are, with a note. A Secret's values never show.

The comparison is between the live object and the dry run's answer; an int-or-string quantity the cluster holds
as a string ('8') and the answer as a number (8) is the same value (resource.Quantity serializes as a string, so a
webhook or controller that rewrites the object stores '8' where Flux sent 8).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ..core.credentials import mask_text
from ..live.cluster import connect
from ..live.prune import pruned
from ..live.server_apply import comparable, dry_run
from ..model import Environment, FluxKustomization, Manifest
from ..render import post_build
from ..render.repository import render_repository, repository_root
from . import impact
from .masking import mask_names
from .model import ADDED, CHANGED, REMOVED, EnvironmentDiff, Key, ObjectChange, Report, Side
from .pairing import unified

_SOURCE_KINDS = ("ConfigMap", "Secret")


def live_report(envs: list[str] | None, context: str | None, lines: int = 3):
    """diff --live: (a diff Report of each environment's dry-run results against the live objects, lines about
    refused objects, notes)."""
    root = repository_root(Path.cwd())
    environments = render_repository(root, envs)
    cluster = connect(context)
    report = Report(
        base=Side(label=f"cluster {cluster.context} ({cluster.server})", ref=cluster.context, commit=""),
        head=Side(label="working tree", ref="", commit=""),
        environments=[],
    )
    problems, notes = [], []
    for environment in environments:
        diff, refused, noted = environment_diff(cluster.api, environment, lines)
        report.environments.append(diff)
        problems.extend(refused)
        notes.extend(noted)
    return mask_names(report), problems, notes


def environment_diff(api, environment: Environment, lines: int = 3):
    """(EnvironmentDiff of the dry-run results against the live objects, lines about refused objects, notes)."""
    notes = substitute_from_cluster(api, environment)
    run = dry_run(api, environment)
    notes.extend(run.notes)
    problems = [f"{run.env}: {o.manifest.resource}: {mask_text(o.error)}" for o in run.outcomes if o.error]
    changes = []
    for outcome in run.outcomes:
        if outcome.result is None:
            continue
        before = comparable(outcome.live)
        after = comparable(same_quantities(outcome.live, outcome.result))
        if before == after:
            continue
        text, additions, deletions = unified(before, after, lines)
        status = ADDED if before is None else CHANGED
        changes.append(
            ObjectChange(Key.of(outcome.manifest), status, None, outcome.manifest, text, additions, deletions)
        )
    live = [Manifest(o.live, o.manifest.file, run.env, o.kustomization) for o in run.outcomes if o.live]
    for kustomization, item in pruned(api, environment):
        gone = Manifest(item, "", environment.name, kustomization)
        live.append(gone)
        text, additions, deletions = unified(comparable(item), None, lines)
        changes.append(ObjectChange(Key.of(gone), REMOVED, gone, None, text, additions, deletions))
    diff = EnvironmentDiff(environment.name, CHANGED if changes else "", changes)
    # The impact figures of the live objects against what applying leaves (refused objects as they are).
    after = [Manifest(o.result or o.live or o.sent, o.manifest.file, run.env, o.kustomization) for o in run.outcomes]
    diff.mpijob_gpus, diff.gpu_quota, diff.gpu_capacity = impact.figures(
        _holding(run.env, live, environment.cluster_config), _holding(run.env, after, environment.cluster_config)
    )
    return diff, [mask_text(p) for p in problems], [mask_text(n) for n in notes]


def same_quantities(live, answer):
    """`answer` with each number the live object holds as the same quantity in a string ('8' for 8) taken from
    the live object: the server stores either for an int-or-string field, and they mean the same."""
    from kubernetes.utils import parse_quantity

    if isinstance(live, dict) and isinstance(answer, dict):
        return {key: same_quantities(live.get(key), value) if key in live else value for key, value in answer.items()}
    if isinstance(live, list) and isinstance(answer, list):
        return [same_quantities(live[i], value) if i < len(live) else value for i, value in enumerate(answer)]
    numbers = (int, float)
    pair = (live, answer)
    if any(isinstance(v, bool) for v in pair) or not (
        (isinstance(live, str) and isinstance(answer, numbers))
        or (isinstance(answer, str) and isinstance(live, numbers))
    ):
        return answer
    try:
        return live if parse_quantity(live) == parse_quantity(answer) else answer
    except ValueError:
        return answer


def substitute_from_cluster(api, environment: Environment) -> list[str]:
    """Substitute the variables only the cluster has values for, reading the Flux Kustomizations' substituteFrom
    sources from the cluster; notes for those that cannot be read."""
    held = {
        (m.kind, m.namespace or "default", m.name): m
        for m in environment.objects
        if m.kind in _SOURCE_KINDS and m.api_version == "v1"
    }
    notes = []
    for kustomization in environment.kustomizations:
        record = kustomization.substitution
        if record is None or not record.unresolved or not record.left:
            continue
        read, unreadable = _sources(api, kustomization, held)
        if unreadable:
            notes.append(
                f"{environment.name}: Flux Kustomization {kustomization.name}: variables left as written, "
                f"compared before Flux's substitution: {'; '.join(unreadable)}"
            )
            continue
        note = _substitute(environment.name, kustomization, read, held)
        if note:
            notes.append(note)
    return notes


def _sources(api, kustomization: FluxKustomization, held: dict) -> tuple[dict, list[str]]:
    """({(kind, namespace, name): Manifest} of the substituteFrom sources the repository does not hold, read
    from the cluster; why each one that is needed cannot be)."""
    post = post_build.post_build(kustomization.manifest.doc) or {}
    namespace = kustomization.manifest.namespace or "default"
    read, unreadable = {}, []
    for reference in post.get("substituteFrom") or []:
        if not isinstance(reference, dict) or reference.get("kind") not in _SOURCE_KINDS:
            continue
        key = (str(reference["kind"]), namespace, str(reference.get("name", "")))
        if key in held:
            continue
        doc, why = _read_source(api, *key)
        if doc is not None:
            read[key] = Manifest(doc, "", "", "")
        elif why != "not on the cluster" or reference.get("optional") is not True:
            unreadable.append(f"{key[0]} {key[1]}/{key[2]} {why}")
    return read, unreadable


def _read_source(api, kind: str, namespace: str, name: str) -> tuple[dict | None, str]:
    """A ConfigMap or Secret as the cluster stores it (data only), or why it cannot be read."""
    from kubernetes.client import CoreV1Api
    from kubernetes.client.rest import ApiException

    core = CoreV1Api(api)
    read = core.read_namespaced_config_map if kind == "ConfigMap" else core.read_namespaced_secret
    try:
        live = api.sanitize_for_serialization(read(name, namespace))
    except ApiException as error:
        if error.status == 404:
            return None, "not on the cluster"
        return None, f"cannot be read ({error.status} {error.reason})"
    metadata = {"name": name, "namespace": namespace}
    return {"apiVersion": "v1", "kind": kind, "metadata": metadata, "data": live.get("data") or {}}, ""


def _substitute(env: str, kustomization: FluxKustomization, read: dict, held: dict) -> str:
    """Substitute again, from its objects as written, each object whose variables were left for the cluster;
    a note when Flux would fail on them."""
    originals = list({id(left[0]): left[0] for left in kustomization.substitution.left}.values())
    again = FluxKustomization(kustomization.manifest, kustomization.path, objects=originals)

    def source(kind: str, namespace: str, name: str) -> Manifest | None:
        return read.get((kind, namespace, name)) or held.get((kind, namespace, name))

    record = post_build.substitute_with(again, source)
    if record is None:
        return ""
    if record.errors or record.left or record.unset:
        return (
            f"{env}: Flux Kustomization {kustomization.name}: variables left as written, compared before Flux's "
            "substitution: its values on the cluster do not fill them in"
        )
    substituted = {_key(m): m for m in again.objects}
    kustomization.objects = [
        dataclasses.replace(m, doc=substituted[_key(m)].doc) if _key(m) in substituted else m
        for m in kustomization.objects
    ]
    return ""


def _key(manifest: Manifest) -> tuple:
    return manifest.api_version, manifest.kind, manifest.namespace, manifest.name


def _holding(name: str, objects: list[Manifest], cluster_config: Manifest | None) -> Environment:
    return Environment(name, [FluxKustomization(Manifest({}, "", name, ""), "", objects=objects)], cluster_config)
