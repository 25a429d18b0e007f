"""Flux's post-build variable substitution, applied to a render: what kustomize-controller applies.

kustomize-controller v1.9.4 (internal/controller/kustomization_controller.go, build) calls fluxcd/pkg
kustomize v1.35.4 SubstituteVariables (kustomize/kustomize_varsub.go) on every object of a Flux
Kustomization with spec.postBuild, after the build. What it does, and what this module does the same way:

- Variables: each substituteFrom ConfigMap's `data` and Secret's `data` (decoded), in order, a later one
  overriding an earlier one; then spec.postBuild.substitute over all of them. Newlines are removed from
  every value. Sources are read from the cluster in the Kustomization's namespace; a missing one fails
  the Kustomization unless `optional: true`. Here: the sources are the environment's rendered objects
  (a Secret's stringData counts, as the API server merges it into data); a source the repository does not
  hold (the cluster-settings ConfigMap that scripts/cluster-settings writes, one made by another tool, a
  SOPS-encrypted Secret) leaves its variables as written, and validate notes them.
- With no variables at all Flux changes nothing, unless spec.postBuild.substituteStrategy is Always.
- A variable name that is not `[_a-zA-Z][_a-zA-Z0-9]*` fails the Kustomization.
- An object labelled or annotated kustomize.toolkit.fluxcd.io/substitute: disabled is left alone.
- The object is written as YAML, envsubst runs over that text (model/envsubst.py) and the result is read
  back: `replicas: ${N}` with N=3 becomes the number 3, `${X}` made empty becomes null.
- Strict substitution is on by default in v1.9 (StrictPostBuildSubstitutions): a `${X}` with neither a
  value nor a default fails the Kustomization. Here it is left as written and recorded (flux-variable-unset).

Results are recorded on each FluxKustomization (`substitution`) for the rules and validate's notes.
Values taken from a Secret are registered with credentials.py, so that no output shows them.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import re

import yaml

from ..core import credentials, yaml_limits
from ..model import FluxKustomization, Manifest, mapping, sequence
from ..model.envsubst import DEFAULT_OPERATORS, EnvsubstError, evaluate, parse
from ..model.fields import strings
from ..model.substitution import (
    CLUSTER_SETTINGS,
    CLUSTER_VARIABLES,
    Substitution,
    Unresolved,
    post_build,
    substitution_disabled,
)

# kustomize_varsub.go varsubRegex (Go's [:alpha:] is ASCII).
_VARIABLE_NAME = re.compile(r"[_A-Za-z][_A-Za-z0-9]*")
_SOURCE_KINDS = ("ConfigMap", "Secret")


class _Dumper(yaml.SafeDumper):
    """Writes an object as kustomize does before Flux substitutes: every alias in full, a multi-line
    string as a literal block, no line folded."""

    def ignore_aliases(self, data):
        return True


# How sigs.k8s.io/yaml (go-yaml v2, resolve.go) reads a plain scalar, which is how Flux reads the
# substituted text back (YAMLToJSON), where it differs from PyYAML's YAML 1.1: `y`/`n` are booleans,
# `1e3` is a number, `12:30` and dates stay strings. A whole float becomes an integer through JSON.
_GO_BOOLEANS = {
    **dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
    **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
}
_GO_NULLS = ("", "~", "null", "Null", "NULL")
_GO_SPECIAL_FLOATS = {".nan": "nan", ".inf": "inf", "+.inf": "inf", "-.inf": "-inf"}
_GO_INT = re.compile(r"([-+]?)(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)")
_GO_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
_GO_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}([Tt ].*)?")


def go_scalar(text: str):
    """A plain YAML scalar as Flux reads it back after substitution."""
    if text in _GO_BOOLEANS:
        return _GO_BOOLEANS[text]
    if text in _GO_NULLS:
        return None
    if text.lower() in _GO_SPECIAL_FLOATS:
        return float(_GO_SPECIAL_FLOATS[text.lower()])
    if not text or text[0] not in "+-.0123456789" or _GO_TIMESTAMP.fullmatch(text):
        return text
    plain = text if text[0] == "." else text.replace("_", "")
    number = _GO_INT.fullmatch(plain)
    if number:
        sign, body = -1 if number.group(1) == "-" else 1, number.group(2)
        if body[:2].lower() in ("0x", "0o", "0b"):
            return sign * int(body, 0)
        return sign * int(body, 8 if body.startswith("0") and len(body) > 1 else 10)
    if _GO_FLOAT.fullmatch(plain):
        value = float(plain)
        return int(value) if value.is_integer() else value
    return text


class _GoLoader(yaml_limits.LOADER):
    def resolve(self, kind, value, implicit):
        if kind is yaml.ScalarNode and implicit[0]:
            return "tag:gitops-tools:go-plain"
        return super().resolve(kind, value, implicit)


_GoLoader.add_constructor("tag:gitops-tools:go-plain", lambda loader, node: go_scalar(node.value))


def _string(dumper, value: str):
    """A string that Go would read as something else (`y`, `1e3`) is quoted, as kustomize's writer
    (yaml.v3) quotes it; `${N}` stays plain, so that what it becomes is read as Flux reads it."""
    if "\n" in value:
        style = "|"
    else:
        read = go_scalar(value)
        style = None if isinstance(read, str) and read == value else '"'
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _string)


def _text(doc: dict) -> str:
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=float("inf"), allow_unicode=True)


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


def _source_values(manifest: Manifest) -> tuple[dict[str, str], str]:
    """(variables, why they are unknown offline: "" when known)."""
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
    return {k: v.replace("\n", "") for k, v in values.items()}, ""


def _value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "" if value is None else str(value).replace("\n", "")


def _substitute(kustomization: FluxKustomization, post: dict, source) -> Substitution:
    record = Substitution()
    namespace = kustomization.manifest.namespace or "default"
    variables: dict[str, str] = {}
    unknown: set[str] = set()  # names whose value only the cluster has
    anything_unknown = False  # a source the repository does not describe: any name may be in it
    where: dict[str, tuple] = {}
    for index, reference in enumerate(sequence(post, "substituteFrom")):
        if not isinstance(reference, dict) or reference.get("kind") not in _SOURCE_KINDS:
            continue
        kind, name = str(reference["kind"]), str(reference.get("name", ""))
        manifest = source(kind, namespace, name)
        shown = f"{kind} {namespace}/{name}"
        if manifest is None:
            if reference.get("optional") is True:
                continue  # Flux skips an optional source that does not exist
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
                for known in names:
                    variables.pop(known, None)
            continue
        values, why = _source_values(manifest)
        if why:
            record.unresolved.append(Unresolved(shown, why, set(values)))
            unknown |= set(values)
            for known in values:
                variables.pop(known, None)
            continue
        if kind == "Secret":
            credentials.add_substituted_secrets(values.values())
        variables.update(values)
        unknown -= set(values)
        where.update(dict.fromkeys(values, ("spec", "postBuild", "substituteFrom", index)))
    for key, value in mapping(post, "substitute").items():
        variables[str(key)] = _value(value)
        unknown.discard(str(key))
        where[str(key)] = ("spec", "postBuild", "substitute", key)
    record.defined = set(variables) | unknown
    strategy = post.get("substituteStrategy")
    record.ran = bool(variables or record.unresolved or strategy == "Always")
    if not record.ran:
        return record
    for name in [*variables, *unknown]:
        if not _VARIABLE_NAME.fullmatch(name):
            message = f"variable name {name!r} is not [_a-zA-Z][_a-zA-Z0-9]*"
            record.errors.append((kustomization.manifest, where.get(name, ("spec", "postBuild")), message))
            return record  # Flux fails the Kustomization before it substitutes anything

    def lookup(node) -> tuple[str | None, str]:
        """(what Flux writes for the reference, None to leave it as written; why: "", "left" or "unset")."""
        if node.param in variables:
            return variables[node.param], ""
        if node.param in unknown or anything_unknown:
            return None, "left"
        if node.name in DEFAULT_OPERATORS:
            return "", ""
        return None, "unset"  # strict substitution: Flux fails the Kustomization

    # New objects in a new list: what the build returned (a cache may hold it) stays as it was.
    kustomization.objects = [
        manifest if substitution_disabled(manifest.doc) else _substitute_object(manifest, lookup, record)
        for manifest in kustomization.objects
    ]
    return record


def _substitute_object(manifest: Manifest, lookup, record: Substitution) -> Manifest:
    """The object as Flux substitutes it (itself where nothing changes or Flux would fail)."""
    texts = [(path, text) for path, text in strings(manifest.doc, keys=True) if "${" in text or "$$" in text]
    if not texts:
        return manifest
    failed = False
    for path, text in texts:  # each string alone: where each reference is, and what it becomes
        try:
            nodes = parse(text)
        except EnvsubstError as error:
            record.errors.append((manifest, path, f"envsubst cannot parse {text[:60]!r}: {error}"))
            failed = True
            continue

        def observe(node, path=path):
            value, why = lookup(node)
            if why:
                (record.left if why == "left" else record.unset).append((manifest, path, node.text))
            return value

        evaluate(nodes, observe)
    if failed:
        return manifest  # Flux fails the Kustomization; the object is left as written
    try:
        text = evaluate(parse(_text(manifest.doc)), lambda node: lookup(node)[0])
    except EnvsubstError as error:
        record.errors.append((manifest, (), f"envsubst cannot parse the object: {error}"))
        return manifest
    try:
        doc = yaml_limits.load(text, _GoLoader)
    except yaml.YAMLError:
        # The message never repeats the text: it may hold a Secret's value.
        record.errors.append((manifest, (), "the object is not valid YAML once substituted (a value with ': ')"))
        return manifest
    if isinstance(doc, dict):
        return dataclasses.replace(manifest, doc=doc)
    return manifest


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
