"""The x-kubernetes-validations (CEL) rules of CRDs, on every object whose kind a CRD with such rules defines.

The helper evaluates them with k8s.io/apiextensions-apiserver's own code, as the API server does on create
(helper/cel.go says which steps, from which files): defaults applied first, transition rules (oldSelf) skipped,
the API server's cost limits. All objects of a run go in one request, each distinct (object, CRD) pair once.
What comes back names the field and the rule's message, never a value of the object; messages are masked
again here (core/credentials.mask_text) before they become findings or notes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from ..core.credentials import mask_text
from ..core.errors import InputError
from ..model import Manifest
from ..model.substitution import holds_variable
from ..render.helper import check_cel

RULES_KEY = "x-kubernetes-validations"
# How the API server words each field.ErrorType (k8s.io/apimachinery v0.36.4, pkg/util/validation/field/errors.go,
# ErrorType.String), with the value it would print after it left out.
_REASONS = {
    "FieldValueInvalid": "Invalid value",
    "FieldValueForbidden": "Forbidden",
    "FieldValueRequired": "Required value",
    "FieldValueDuplicate": "Duplicate value",
    "InternalError": "Internal error",
}


@dataclass(frozen=True)
class RuleViolation:
    manifest: Manifest
    message: str
    path: tuple = ()


@dataclass
class CelBatch:
    """The objects of a run whose CRD carries CEL rules, sent to the helper together by `run`."""

    crds: list[dict] = field(default_factory=list)
    checks: list[dict] = field(default_factory=list)
    # for each check, the (scope index, manifest) pairs it stands for
    owners: list[list[tuple[int, Manifest]]] = field(default_factory=list)
    _crd_index: dict[str, int] = field(default_factory=dict)
    _check_index: dict[tuple[int, str], int] = field(default_factory=dict)
    _has_rules: dict[tuple[str, str], bool] = field(default_factory=dict)
    # ids of the objects whose ${VARIABLE} values something may still substitute (validate/schemas.py)
    substituted: set[int] = field(default_factory=set)
    # (scope index, manifest) of objects not sent: a value (or their CRD's) JSON cannot carry
    unsent: list[tuple[int, Manifest]] = field(default_factory=list)

    def add(self, scope_index: int, manifest: Manifest, crd: dict, fingerprint: str) -> bool:
        """Queue the object when its CRD's schema for its version has CEL rules; whether it did."""
        version = manifest.api_version.rpartition("/")[2]
        if (fingerprint, version) not in self._has_rules:
            self._has_rules[(fingerprint, version)] = has_rules(crd, version)
        if not self._has_rules[(fingerprint, version)] or manifest.local_config:
            return False
        try:  # JSON has no NaN or infinity (YAML's .nan, .inf): the helper would refuse the whole request
            text = json.dumps(manifest.doc, sort_keys=True, default=str, allow_nan=False)
            if fingerprint not in self._crd_index:
                self.crds.append(_json_safe(crd))
                self._crd_index[fingerprint] = len(self.crds) - 1
        except ValueError:
            self.unsent.append((scope_index, manifest))
            return False
        crd_index = self._crd_index[fingerprint]
        key = (crd_index, text)
        if key not in self._check_index:
            self._check_index[key] = len(self.checks)
            self.checks.append({"crd": crd_index, "object": json.loads(text)})
            self.owners.append([])
        self.owners[self._check_index[key]].append((scope_index, manifest))
        return True

    def run(self, check=None) -> tuple[dict[int, list[RuleViolation]], dict[int, list[str]]]:
        """(violations by scope index, notes by scope index). A helper that fails makes a note, never an error."""
        found: dict[int, list[RuleViolation]] = {}
        notes: dict[int, list[str]] = {}
        for scope_index, manifest in self.unsent:
            notes.setdefault(scope_index, []).append(
                f"{mask_text(manifest.resource)}: CEL rules of its CRD not evaluated: it (or its CRD) holds a number "
                "JSON cannot carry (.nan or .inf)"
            )
        if not self.checks:
            return found, notes
        try:
            results = (check or check_cel)(self.crds, self.checks)
        except InputError as error:
            for scope_index in sorted({index for owners in self.owners for index, _ in owners}):
                notes.setdefault(scope_index, []).append(f"CEL rules of the CRDs not checked: {mask_text(str(error))}")
            return found, notes
        for owners, result in zip(self.owners, results, strict=True):
            for scope_index, manifest in owners:
                violations, object_notes = _read(manifest, result, id(manifest) in self.substituted)
                found.setdefault(scope_index, []).extend(violations)
                notes.setdefault(scope_index, []).extend(object_notes)
        return found, notes


def has_rules(crd: dict, version: str) -> bool:
    """Whether the CRD's schema for `version` carries any x-kubernetes-validations rule."""
    for served in (crd.get("spec") or {}).get("versions") or []:
        if isinstance(served, dict) and served.get("name") == version:
            return _carries_rules(((served.get("schema") or {}).get("openAPIV3Schema")) or {})
    return False


def _carries_rules(node) -> bool:
    if isinstance(node, dict):
        if node.get(RULES_KEY):
            return True
        return any(_carries_rules(value) for value in node.values())
    if isinstance(node, list):
        return any(_carries_rules(value) for value in node)
    return False


def _json_safe(document: dict) -> dict:
    """The document as JSON gives it (a YAML date becomes its text), for the helper's request."""
    return json.loads(json.dumps(document, default=str, allow_nan=False))


def _read(manifest: Manifest, result: dict, substituted: bool) -> tuple[list[RuleViolation], list[str]]:
    violations, notes = [], []
    if result.get("skipped"):
        notes.append(f"{manifest.resource}: CEL rules of its CRD not evaluated: {mask_text(str(result['skipped']))}")
    for item in result.get("violations") or []:
        where = mask_text(str(item.get("field") or "")) or "(root)"
        message = mask_text(str(item.get("message") or ""))
        if item.get("kind") == "compile":
            notes.append(f"{manifest.resource}: a CEL rule of its CRD at {where} does not compile here: {message}")
            continue
        if item.get("kind") == "budget":
            text = f"{where}: the CRD's CEL rules exceed the API server's cost budget: {message}"
        else:
            reason = _REASONS.get(str(item.get("reason")), "Invalid value")
            text = f"{where}: {reason}: {message}" if message else f"{where}: {reason}"
        path = tuple(step for step in item.get("path") or [] if isinstance(step, str | int))
        if substituted and holds_variable(_at(manifest.doc, path)):
            notes.append(
                f"{manifest.resource}: a CEL rule of its CRD at {where} not judged: the field holds ${{...}} "
                "values only known once they are substituted"
            )
            continue
        violations.append(RuleViolation(manifest, text, path))
    return violations, notes


def _at(document, path: tuple):
    """The value at `path` in the object (None where the path leads nowhere)."""
    for step in path:
        if isinstance(document, dict) and isinstance(step, str):
            document = document.get(step)
        elif isinstance(document, list) and isinstance(step, int) and 0 <= step < len(document):
            document = document[step]
        else:
            return None
    return document
