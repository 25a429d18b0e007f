"""The schema stage: every object of every scope against its strict schema (schemas/checker.py), and against
its CRD's CEL rules (validate/cel.py, one helper request for the whole run)."""

from __future__ import annotations

from ..model import Scope
from ..model.removals import Removals
from ..rules.registry import Finding
from ..rules.stages import CRD_RULE_VIOLATED, SCHEMA_INVALID, SCHEMA_MISSING
from ..schemas.checker import SchemaChecker, schema_version
from .cel import CelBatch


def check_schemas(
    scopes: list[Scope], checker: SchemaChecker, progress
) -> tuple[dict[int, list[Finding]], dict[int, list[str]]]:
    """(findings by scope index, notes on the schema versions used by scope index)."""
    found: dict[int, list[Finding]] = {}
    notes: dict[int, list[str]] = {}
    checked = 0
    rules = CelBatch()
    for index, scope in enumerate(scopes):
        scope_checker = checker.with_crds(scope.objects)
        version = schema_version(scope.kubernetes_version)
        if version != scope.kubernetes_version:
            notes.setdefault(index, []).append(
                f"{scope.env or 'inputs'}: built-in kinds checked with the schemas of Kubernetes {version}, "
                f"the nearest kubernetes-validate has to {scope.kubernetes_version}"
            )
        findings = found.setdefault(index, [])
        removals = Removals(scope.objects, scope.kubernetes_version)
        substituted = _substituted(scope)
        rules.substituted |= substituted
        for manifest in [*scope.objects, *([scope.cluster_config] if scope.cluster_config else [])]:
            checked += 1
            problems = scope_checker.check(manifest, version)
            if problems and removals.of(manifest):
                continue  # removed-api says it better
            findings.extend(
                (SCHEMA_MISSING if p.missing else SCHEMA_INVALID).finding(manifest, p.message, p.path)
                for p in problems
                if not (p.pending and id(manifest) in substituted)
            )
            crd = scope_checker.crd_for(manifest) if manifest.group else None
            if crd is not None:
                rules.add(index, manifest, *crd)
    progress(f"schemas: {checked} objects checked")
    violations, rule_notes = rules.run()
    for index, found_here in violations.items():
        found.setdefault(index, []).extend(CRD_RULE_VIOLATED.finding(v.manifest, v.message, v.path) for v in found_here)
    for index, notes_here in rule_notes.items():
        notes.setdefault(index, []).extend(notes_here)
    if rules.checks:
        progress(f"CEL rules: {len(rules.checks)} objects checked against their CRDs' x-kubernetes-validations")
    return found, notes


def _substituted(scope: Scope) -> set[int]:
    """The objects whose ${VARIABLE} values something may still substitute, so that a value's type or a CEL rule is
    judged only once it has: in folder mode every object (a template its script fills in), in a repository the
    objects of a Flux Kustomization with spec.postBuild (variables only the cluster has values for; one nothing
    fills in is flux-variable-unset's). Elsewhere Flux applies `${...}` as written, and the API server judges it so."""
    if not scope.complete:
        return {id(m) for m in scope.objects}
    return {id(m) for k in scope.kustomizations if k.substitution is not None for m in k.objects}
