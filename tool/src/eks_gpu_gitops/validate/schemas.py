"""The schema stage: every object of every scope against its strict schema (schemas/checker.py)."""

from __future__ import annotations

from ..model import Scope, removal
from ..rules.registry import Finding
from ..rules.stages import SCHEMA_INVALID, SCHEMA_MISSING
from ..schemas.checker import SchemaChecker, schema_version


def check_schemas(
    scopes: list[Scope], checker: SchemaChecker, progress
) -> tuple[dict[int, list[Finding]], dict[int, list[str]]]:
    """(findings by scope index, notes on the schema versions used by scope index)."""
    found: dict[int, list[Finding]] = {}
    notes: dict[int, list[str]] = {}
    checked = 0
    for index, scope in enumerate(scopes):
        scope_checker = checker.with_crds(scope.objects)
        version = schema_version(scope.kubernetes_version)
        if version != scope.kubernetes_version:
            notes.setdefault(index, []).append(
                f"{scope.env or 'inputs'}: built-in kinds checked with the schemas of Kubernetes {version}, "
                f"the nearest kubernetes-validate has to {scope.kubernetes_version}"
            )
        findings = found.setdefault(index, [])
        for manifest in [*scope.objects, *([scope.cluster_config] if scope.cluster_config else [])]:
            checked += 1
            problems = scope_checker.check(manifest, version)
            if problems and removal(manifest.api_version, manifest.kind, scope.kubernetes_version):
                continue  # removed-api says it better
            findings.extend(
                (SCHEMA_MISSING if p.missing else SCHEMA_INVALID).finding(manifest, p.message, p.path) for p in problems
            )
    progress(f"schemas: {checked} objects checked")
    return found, notes
