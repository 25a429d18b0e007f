"""Flux's post-build variable substitution, applied to a render: what kustomize-controller applies.

kustomize-controller v1.9.5 (internal/controller/kustomization_controller.go, build) calls fluxcd/pkg
kustomize v1.35.6 SubstituteVariables on every object of a Flux Kustomization with spec.postBuild, after the
build, strictly (StrictPostBuildSubstitutions, on by default since v1.9). The helper runs that same function
(helper/substitute.go); this module gives it what the controller reads from the cluster:

- the substituteFrom ConfigMaps and Secrets, from the environment's rendered objects (a Secret's stringData
  counts, as the API server merges it into data), each as another Kustomization applies it (substituted);
- a source the repository does not hold (the cluster-settings ConfigMap that scripts/cluster-settings
  writes, one made by another tool, a SOPS-encrypted Secret) is not given: the variables it may hold are left
  as written, and validate notes them; so are variables with no value at all, which fail the Kustomization
  on the cluster (the rules report them).

Results are recorded on each FluxKustomization (`substitution`) for the rules and validate's notes.
Values taken from a Secret are registered with credentials.py, so that no output shows them.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses

from ..core import credentials
from ..model import FluxKustomization, Manifest, mapping, sequence
from ..model.substitution import (
    CLUSTER_SETTINGS,
    CLUSTER_VARIABLES,
    Substitution,
    Unresolved,
    post_build,
    references,
)
from . import helper

_SOURCE_KINDS = ("ConfigMap", "Secret")
# What fluxcd/pkg/kustomize says of a variable name that is not [_a-zA-Z][_a-zA-Z0-9]* (kustomize_varsub.go).
_INVALID_NAME = "var name is invalid"


def substitute_environment(kustomizations: list[FluxKustomization], done: set[int] | None = None) -> None:
    """Give every Flux Kustomization with spec.postBuild its objects as Flux substitutes them (new
    objects, in a new list) and its `substitution` record. A source another Kustomization applies is
    read as that one substituted it (as the cluster holds it). `done`: the ids of those substituted by an
    earlier call (left alone: substituting twice would undo `$$`), to which this call adds its own."""
    owners: dict[tuple, tuple[int, FluxKustomization]] = {}  # where each ConfigMap and Secret is
    for kustomization in kustomizations:
        for index, manifest in enumerate(kustomization.objects):
            if manifest.kind in _SOURCE_KINDS and manifest.api_version == "v1":
                key = (manifest.kind, manifest.namespace or "default", manifest.name)
                owners.setdefault(key, (index, kustomization))
    started: set[int] = done if done is not None else set()

    def run(kustomization: FluxKustomization) -> None:
        if id(kustomization) in started:
            return
        started.add(id(kustomization))
        post = post_build(kustomization.manifest.doc)
        if post is not None:
            kustomization.substitution = _substitute(kustomization, post, source)

    def source(kind: str, namespace: str, name: str) -> Manifest | None:
        found = owners.get((kind, namespace, name))
        if found is None:
            return None
        run(found[1])
        return found[1].objects[found[0]]

    for kustomization in kustomizations:
        run(kustomization)


def substitute_with(kustomization: FluxKustomization, source) -> Substitution | None:
    """Substitute `kustomization`'s objects (as written, unsubstituted) as Flux does, `source(kind, namespace,
    name)` giving each substituteFrom ConfigMap or Secret (None: not there). diff --live gives it the cluster's."""
    post = post_build(kustomization.manifest.doc)
    return None if post is None else _substitute(kustomization, post, source)


def stored_values(manifest: Manifest) -> tuple[dict[str, str], str]:
    """A ConfigMap's or Secret's values as the API server holds them (a Secret's data decoded, its stringData
    merged in), and why they are unknown offline ("" when known). What Flux reads from either: substituteFrom
    here, a HelmRelease's valuesFrom in helm_release.py."""
    if manifest.kind == "ConfigMap":
        return {str(k): _value(v) for k, v in mapping(manifest.doc, "data").items()}, ""
    if "sops" in manifest.doc:
        names = [*mapping(manifest.doc, "data"), *mapping(manifest.doc, "stringData")]
        return {str(k): "" for k in names}, "is encrypted with SOPS (Flux decrypts it on the cluster)"
    values = {}
    for key, encoded in mapping(manifest.doc, "data").items():
        try:
            values[str(key)] = base64.b64decode(str(encoded), validate=True).decode("utf-8", errors="replace")
        except (binascii.Error, ValueError):
            return {str(k): "" for k in mapping(manifest.doc, "data")}, "has a data value that is not base64"
    values.update({str(k): _value(v) for k, v in mapping(manifest.doc, "stringData").items()})
    return values, ""


def _value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value)


def _substitute(kustomization: FluxKustomization, post: dict, source) -> Substitution:
    record = Substitution()
    namespace = kustomization.manifest.namespace or "default"
    variables: set[str] = set()  # names with a value the repository holds
    unknown: set[str] = set()  # names whose value only the cluster has
    anything_unknown = False  # a source the repository does not describe: any name may be in it
    given, read = [], []  # the substituteFrom entries the helper reads, and the objects they name
    for reference in sequence(post, "substituteFrom"):
        if not isinstance(reference, dict) or reference.get("kind") not in _SOURCE_KINDS:
            given.append(reference)
            continue
        kind, name = str(reference["kind"]), str(reference.get("name", ""))
        manifest = source(kind, namespace, name)
        shown = f"{kind} {namespace}/{name}"
        if manifest is None:
            if reference.get("optional") is True:
                given.append(reference)  # Flux skips an optional source that does not exist
                continue
            if (kind, name) == ("ConfigMap", CLUSTER_SETTINGS):
                names = set(CLUSTER_VARIABLES)
                why = "is written on the cluster by scripts/cluster-settings"
            else:
                names, why = None, "is not in the repository"
            record.unresolved.append(Unresolved(shown, why, names))
            if names is None:
                anything_unknown = True
            else:
                unknown |= names
                variables -= names
            continue
        values, why = stored_values(manifest)
        values = {k: v.replace("\n", "") for k, v in values.items()}  # Flux removes newlines from variables
        if why:
            record.unresolved.append(Unresolved(shown, why, set(values)))
            unknown |= set(values)
            variables -= set(values)
            continue
        if kind == "Secret":
            credentials.add_substituted_secrets(values.values())
        given.append(reference)
        read.append(_as_stored(kind, namespace, name, values))
        variables |= set(values)
        unknown -= set(values)
    for key in mapping(post, "substitute"):
        variables.add(str(key))
        unknown.discard(str(key))
    record.defined = variables | unknown
    strategy = post.get("substituteStrategy")
    record.ran = bool(variables or record.unresolved or strategy == "Always")
    if not record.ran:
        return record
    spec = {"postBuild": {**post, "substituteFrom": given}}
    request = {
        "op": "substitute",
        "kustomization": {"metadata": {"name": kustomization.name, "namespace": namespace}, "spec": spec},
        "objects": [manifest.doc for manifest in kustomization.objects],
        "sources": read,
        "unknown": sorted(unknown),
        "anyUnknown": anything_unknown,
    }
    reply = helper.ask(request, f"Flux Kustomization {kustomization.name}")
    if "error" in reply:
        record.errors.append((kustomization.manifest, ("spec", "postBuild"), helper.masked_error(reply["error"])))
        return record
    answers = reply.get("objects") or []
    invalid = next((str(a["error"]) for a in answers if _INVALID_NAME in str(a.get("error", ""))), None)
    if invalid is not None:
        name = invalid.split("'")[1] if invalid.count("'") >= 2 else ""
        where = ("spec", "postBuild", *(("substitute", name) if name in mapping(post, "substitute") else ()))
        record.errors.append((kustomization.manifest, where, _last_cause(invalid)))
        return record  # Flux fails the Kustomization before it substitutes anything
    objects = []
    for manifest, answer in zip(kustomization.objects, answers, strict=True):
        for name in answer.get("unset") or ():
            record.unset.append((manifest, *_where(manifest, name)))
        for name in answer.get("left") or ():
            record.left.append((manifest, *_where(manifest, name)))
        if answer.get("error"):
            # The message never repeats the object: it may hold a Secret's value.
            where = tuple(answer.get("field") or ())
            record.errors.append((manifest, where, _last_cause(helper.masked_error(str(answer["error"])))))
            objects.append(manifest)  # Flux fails the Kustomization; the object is left as written
        elif isinstance(answer.get("object"), dict):
            objects.append(dataclasses.replace(manifest, doc=answer["object"]))
        else:
            objects.append(manifest)
    # New objects in a new list: what the build returned (a cache may hold it) stays as it was.
    kustomization.objects = objects
    return record


def _as_stored(kind: str, namespace: str, name: str, values: dict[str, str]) -> dict:
    """A substituteFrom source as the API server stores it, which is what Flux reads."""
    doc = {"apiVersion": "v1", "kind": kind, "metadata": {"name": name, "namespace": namespace}}
    if kind == "Secret":
        doc["data"] = {key: base64.b64encode(value.encode()).decode() for key, value in values.items()}
    else:
        doc["data"] = values
    return doc


def _where(manifest: Manifest, name: str) -> tuple[tuple, str]:
    """(field path, reference as written) of the first reference to `name` in an object."""
    found = next((r for r in references(manifest.doc) if r.name == name), None)
    return (found.path, found.text) if found else ((), "${" + name + "}")


def _last_cause(message: str) -> str:
    """envsubst's cause without the wrapping fluxcd/pkg adds ("envsubst error: variable substitution
    failed: ...")."""
    return message.rsplit("failed: ", 1)[-1].removeprefix("envsubst error: ")


def notes(env: str, kustomizations: list[FluxKustomization]) -> list[str]:
    """One line per Flux Kustomization whose variables only the cluster can fill in."""
    lines = []
    for kustomization in kustomizations:
        record = kustomization.substitution
        if record is None or not record.left or not record.unresolved:
            continue
        names = sorted({text for _, _, text in record.left})
        sources = "; ".join(f"{u.source} {u.why}" for u in record.unresolved)
        lines.append(
            f"{env}: Flux Kustomization {kustomization.name}: {', '.join(names)} left as written, "
            f"only the cluster has their values ({sources})"
        )
    return lines
