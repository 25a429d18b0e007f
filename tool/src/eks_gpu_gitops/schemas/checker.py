"""Strict schema checks for every rendered object.

- Built-in kinds: kubernetes-validate's strict schemas for the environment's Kubernetes version.
- Custom resources (MPIJob, Flux kinds): the CRD's openAPIV3Schema, with every object that
  lists its properties closed (`additionalProperties: false`), the way the API server prunes
  unknown fields, so a misspelt field is an error instead of silently dropped.
- The eksctl ClusterConfig: eksctl's own JSON schema.

CRD and eksctl schemas come from pinned upstream URLs (platform.yaml), downloaded once into a
user cache; a local folder laid out like the upstream copies (crds/<file>, eksctl/schema.json)
can be used instead (--schema-dir or GITOPS_SCHEMA_DIR).
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

import jsonschema
import kubernetes_validate
import referencing

from ..facts.eks import version_key
from ..model import BUILTIN_GROUPS, Manifest
from ..model.substitution import holds_variable
from .eksctl_schema import as_eksctl_validates
from .store import SCHEMA_DIR_VARIABLE, SchemaStore, default_cache_dir, local_name  # noqa: F401  (the schema folder's variable and the store, as callers know them)


@dataclass(frozen=True)
class SchemaProblem:
    manifest: Manifest
    message: str
    missing: bool = False  # True when the kind has no schema at all
    path: tuple = ()  # where in the object, for locating the line
    # The value holds a ${VARIABLE}: wrong as written, right or wrong once something substitutes it. The
    # schema stage knows whether something will (validate/schemas.py).
    pending: bool = False


def close_objects(schema):
    """Copy of an OpenAPI schema where every object with listed properties rejects others."""
    schema = copy.deepcopy(schema)

    def visit(node):
        if isinstance(node, dict):
            if (
                "properties" in node
                and "additionalProperties" not in node
                and not node.get("x-kubernetes-preserve-unknown-fields")
            ):
                node["additionalProperties"] = False
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(schema)
    return schema


def without_pruned_nulls(value, schema):
    """Copy of a custom resource without the nulls the API server drops before validating it.

    The apiextensions-apiserver removes a null whose field is not `nullable: true` (and defaults it
    when the schema has a default): PruneNonNullableNullsWithoutDefaults and Default in
    k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting (prunenulls.go, algorithm.go);
    the CRD docs, "Defaulting and Nullable". So `command:` with no value in an MPIJob is no value.
    Built-in kinds need nothing: their Go types decode a JSON null as "not present" (encoding/json,
    Unmarshal), and kubernetes-validate's schemas already accept null there.
    """
    if not isinstance(schema, dict):
        return value
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        kept = {}
        for key, item in value.items():
            field = properties.get(key, extra if isinstance(extra, dict) else None)
            if item is None and isinstance(field, dict) and not field.get("nullable"):
                continue
            kept[key] = without_pruned_nulls(item, field)
        return kept
    if isinstance(value, list):
        items = schema.get("items")
        return [without_pruned_nulls(item, items) for item in value]
    return value


def _path(error: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in error.absolute_path) or "(root)"


class SchemaChecker:
    """Checks objects against their schemas. Validators are built once per kind and version,
    and an object already checked (the same content, the same version, the same schema) is not
    checked again: environments share most of their objects."""

    def __init__(self, store: SchemaStore, local_crds: dict | None = None, shared: tuple | None = None):
        self.store = store
        # "group/Kind" -> (CRD document, fingerprint) for CRDs rendered with the manifests
        self._local_crds: dict[str, tuple[dict, str]] = local_crds or {}
        self._validators, self._results = shared or ({}, {})

    def with_crds(self, manifests) -> SchemaChecker:
        """A checker that also uses the CustomResourceDefinitions among `manifests`, for kinds
        platform.yaml does not pin. It shares this checker's caches."""
        found = {}
        for manifest in manifests:
            if manifest.kind != "CustomResourceDefinition" or manifest.group != "apiextensions.k8s.io":
                continue
            spec = manifest.doc.get("spec") or {}
            key = f"{spec.get('group', '')}/{(spec.get('names') or {}).get('kind', '')}"
            if key not in self.store.sources and key not in found:
                found[key] = (manifest.doc, json.dumps(manifest.doc, sort_keys=True, default=str))
        return SchemaChecker(self.store, found, (self._validators, self._results)) if found else self

    def crd_for(self, manifest: Manifest) -> tuple[dict, str] | None:
        """(the CRD that defines the object's kind, its fingerprint), the one its schema check uses: the pinned
        CRD, else one rendered with it; None for a kind no CRD defines."""
        key = f"{manifest.group}/{manifest.kind}"
        if key in self.store.sources:
            document = self.store.document(key)
            is_crd = isinstance(document, dict) and document.get("kind") == "CustomResourceDefinition"
            return (document, self.store.sources[key]) if is_crd else None
        return self._local_crds.get(key)

    def _crd_validator(self, key: str, version: str):
        local = self._local_crds.get(key)
        cache_key = (key, version, local[1] if local else "")
        if cache_key not in self._validators:
            crd = local[0] if local else self.store.document(key)
            versions = {v.get("name"): v for v in (crd.get("spec") or {}).get("versions") or []}
            if version not in versions:
                served = ", ".join(sorted(versions))
                raise LookupError(
                    f"apiVersion {key.split('/')[0]}/{version} is not served by the CRD (served: {served})"
                )
            schema = (versions[version].get("schema") or {}).get("openAPIV3Schema") or {}
            self._validators[cache_key] = jsonschema.Draft7Validator(close_objects(schema))
        return self._validators[cache_key]

    def _eksctl_validator(self):
        key = ("eksctl.io/ClusterConfig", "")
        if key not in self._validators:
            schema = as_eksctl_validates(self.store.document("eksctl.io/ClusterConfig"))
            self._validators[key] = jsonschema.Draft7Validator(schema)
        return self._validators[key]

    def check(self, manifest: Manifest, kubernetes_version: str) -> list[SchemaProblem]:
        if not manifest.api_version or not manifest.kind:
            return [SchemaProblem(manifest, "object has no apiVersion or kind")]
        checked = manifest
        if manifest.kind == "Secret" and "sops" in manifest.doc:
            # A SOPS-encrypted Secret carries its key metadata next to the data; Flux decrypts
            # and drops it before applying, so it is not part of the object's schema.
            checked = Manifest({k: v for k, v in manifest.doc.items() if k != "sops"}, manifest.file)
        local = self._local_crds.get(f"{manifest.group}/{manifest.kind}")
        cache_key = (
            kubernetes_version,
            json.dumps(checked.doc, sort_keys=True, default=str),
            local[1] if local else "",
        )
        found = self._results.get(cache_key)
        if found is None:
            found = self._results[cache_key] = tuple(self._check(checked, kubernetes_version))
        return [SchemaProblem(manifest, *problem) for problem in found]

    def _check(self, manifest: Manifest, kubernetes_version: str):
        """(message, missing, path[, pending]) for each problem."""
        key = f"{manifest.group}/{manifest.kind}"
        if manifest.group == "eksctl.io":
            return _errors(manifest.doc, self._eksctl_validator())
        if key in self.store.sources or key in self._local_crds:
            try:
                validator = self._crd_validator(key, manifest.api_version.rpartition("/")[2])
            except LookupError as error:
                return [(str(error), False, ("apiVersion",))]
            return _errors(without_pruned_nulls(manifest.doc, validator.schema), validator)
        if manifest.group not in BUILTIN_GROUPS:
            return [
                (
                    f"no schema for {manifest.api_version} {manifest.kind}: a custom resource whose CRD is "
                    "neither pinned in platform.yaml nor part of the rendered manifests",
                    True,
                    (),
                )
            ]
        return self._builtin(manifest, kubernetes_version)

    def _builtin(self, manifest: Manifest, kubernetes_version: str):
        try:
            validator = _builtin_validator(kubernetes_version, manifest.api_version, manifest.kind)
        except kubernetes_validate.utils.VersionNotSupportedError:
            return [(f"kubernetes-validate has no schemas for Kubernetes {kubernetes_version}", False, ())]
        if validator is None:
            return [
                (
                    f"no schema for {manifest.api_version} {manifest.kind} in Kubernetes {kubernetes_version} "
                    "(removed API, or a custom resource without a schema in platform.yaml)",
                    True,
                    (),
                )
            ]
        return _errors(manifest.doc, validator)


def _pending(error: jsonschema.ValidationError) -> bool:
    """A value that still holds a ${VARIABLE}: its type or format is only known once something substitutes it."""
    return isinstance(error.instance, str) and holds_variable(error.instance)


def _errors(doc: dict, validator) -> list[tuple]:
    errors = sorted(validator.iter_errors(doc), key=lambda e: [str(p) for p in e.absolute_path])
    return [(f"{_path(e)}: {_message(e)}", False, tuple(e.absolute_path), _pending(e)) for e in errors]


def _listed(values) -> str:
    values = values if isinstance(values, list) else [values]
    return " or ".join(json.dumps(v) if not isinstance(v, str) else v for v in values)


# What each JSON-schema keyword expects, said from the schema alone: jsonschema's own messages
# repeat the offending value (`['hunter2'] is not of type 'string'`), which may be a secret.
_EXPECTATIONS = {
    "type": lambda v: f"expected {_listed(v)}",
    "enum": lambda v: f"expected one of {', '.join(json.dumps(x) for x in v)}",
    "const": lambda v: f"expected {json.dumps(v)}",
    "pattern": lambda v: f"does not match the pattern {v}",
    "format": lambda v: f"is not a valid {v}",
    "minLength": lambda v: f"is shorter than {v} characters",
    "maxLength": lambda v: f"is longer than {v} characters",
    "minimum": lambda v: f"is less than {v}",
    "maximum": lambda v: f"is more than {v}",
    "exclusiveMinimum": lambda v: f"is not more than {v}",
    "exclusiveMaximum": lambda v: f"is not less than {v}",
    "multipleOf": lambda v: f"is not a multiple of {v}",
    "minItems": lambda v: f"has fewer than {v} items",
    "maxItems": lambda v: f"has more than {v} items",
    "uniqueItems": lambda v: "has repeated items",
    "minProperties": lambda v: f"has fewer than {v} fields",
    "maxProperties": lambda v: f"has more than {v} fields",
    "oneOf": lambda v: "matches none, or more than one, of the allowed forms",
    "anyOf": lambda v: "matches none of the allowed forms",
    "not": lambda v: "has a form that is not allowed",
}


def _message(error: jsonschema.ValidationError) -> str:
    """The problem in words built from the schema and the object's field names, never its values."""
    instance = error.instance
    if error.validator == "required":
        present = instance if isinstance(instance, dict) else {}
        missing = [name for name in error.validator_value if name not in present]
        return f"missing required field {', '.join(missing)}"
    if error.validator == "additionalProperties":
        allowed = set((error.schema or {}).get("properties") or {})
        unknown = sorted(str(k) for k in (instance if isinstance(instance, dict) else {}) if k not in allowed)
        return f"unknown field{'s' if len(unknown) != 1 else ''} {', '.join(unknown)}"
    expectation = _EXPECTATIONS.get(error.validator)
    if expectation is not None:
        return expectation(error.validator_value)
    return f"does not satisfy the schema's {error.validator}"


def schema_version(kubernetes_version: str) -> str:
    """The Kubernetes version whose built-in schemas check objects of `kubernetes_version`: itself, or the
    nearest one kubernetes-validate ships when it is older or newer than all of them."""
    known = [".".join(v.split(".")[:2]) for v in kubernetes_validate.utils.all_versions()]
    wanted = version_key(kubernetes_version)
    if wanted < version_key(known[0]):
        return known[0]
    if wanted > version_key(known[-1]):
        return known[-1]
    return kubernetes_version


@cache
def _schema_folder(kubernetes_version: str) -> str:
    """kubernetes-validate's folder for a version: the newest release not newer than it."""
    wanted = version_key(kubernetes_version)
    known = [v for v in kubernetes_validate.utils.all_versions() if version_key(v) <= wanted]
    if not known or wanted > version_key(kubernetes_validate.utils.latest_version()):
        raise kubernetes_validate.utils.VersionNotSupportedError(kubernetes_version)
    return f"v{known[-1]}-local-strict"


@cache
def _definitions(folder: str) -> referencing.Resource:
    return referencing.Resource.from_contents(_schema_json(f"{folder}/_definitions.json"))


def _schema_json(name: str):
    ref = resources.files("kubernetes_validate").joinpath("kubernetes-json-schema", *name.split("/"))
    try:
        return json.loads(ref.read_text())
    except FileNotFoundError:
        return None


@cache
def _builtin_validator(kubernetes_version: str, api_version: str, kind: str):
    """The strict validator kubernetes-validate would build for this kind, built once (it
    builds a new one, and re-reads its 1.5 MB of definitions, for every object)."""
    folder = _schema_folder(kubernetes_version)
    # The file naming of kubernetes-validate: rbac.authorization.k8s.io/v1 -> rbac-v1.
    api = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
    schema = _schema_json(f"{folder}/{kind.lower()}-{api}.json")
    if schema is None:
        return None
    registry = _definitions(folder) @ (referencing.Resource.from_contents(schema) @ referencing.Registry())
    return jsonschema.Draft202012Validator(schema, registry=registry)
