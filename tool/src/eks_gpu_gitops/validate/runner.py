"""Run the rule catalogue over scopes, then settle each finding: its severity in that environment,
whether an annotation suppresses it, and where it sits in the sources.

Rules stay pure: everything about matching, suppression and reporting happens here.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field

from ..core.errors import DEBUG_VARIABLE
from ..model import Scope
from ..render.locate import Locator
from ..rules.registry import CONTEXTS, REGISTRY, RULE_FAILED, SUPPRESSION_PREFIX, Finding, Rule, all_rules


@dataclass
class Reported:
    rule: str
    severity: str
    env: str
    file: str
    line: int
    resource: str
    kustomization: str
    message: str
    remediation: str
    path: str = ""
    reason: str = ""  # why it was suppressed (skipped findings only)

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class Result:
    findings: list[Reported] = field(default_factory=list)
    skipped: list[Reported] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    environments: list[str] = field(default_factory=list)
    objects: int = 0

    def count(self, severity: str) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    def exit_code(self, strict: bool = False) -> int:
        return 1 if self.count("error") or (strict and self.count("warning")) else 0


def check_scope(scope: Scope, rules: list[Rule] | None = None) -> tuple[list[Finding], list[str]]:
    """Run the rules-stage rules over one scope: (findings, notes about rules it skipped)."""
    findings, notes = [], []
    skipped: dict[str, list[str]] = {}
    label = scope.env or "inputs"
    for rule in rules if rules is not None else all_rules():
        if rule.stage != "rules":
            continue
        absent = [c for c in rule.requires if not scope.has(c)]
        if absent:
            skipped.setdefault(absent[0], []).append(rule.id)
            continue
        try:
            findings.extend(rule.run(scope))
        except Exception as error:  # malformed input the schema stage reports; never a traceback
            if os.environ.get(DEBUG_VARIABLE):
                raise
            notes.append(
                f"{label}: rule {rule.id} could not finish ({type(error).__name__}: {error}); "
                "fix the schema findings first"
            )
            findings.append(
                RULE_FAILED.finding(
                    None, f"rule {rule.id} could not finish on {label}: {type(error).__name__}: {error}"
                )
            )
    for context, ids in skipped.items():
        notes.append(
            f"{label}: skipped {len(ids)} rule{'s' if len(ids) > 1 else ''} that need{'' if len(ids) > 1 else 's'} "
            f"{CONTEXTS[context]}: {', '.join(ids)}"
        )
    return findings, notes


def _kustomization_names(scope: Scope) -> dict[int, str]:
    return {id(m): k.name for k in scope.kustomizations for m in k.objects}


def settle(scope: Scope, findings: list[Finding], locator: Locator, result: Result) -> None:
    """Give each finding its severity, location and suppression; add it to `result`."""
    owners = _kustomization_names(scope)
    for finding in findings:
        rule = REGISTRY[finding.rule]
        manifest = finding.manifest
        if manifest is not None:
            file, line = locator.locate(manifest, finding.path)
        else:
            file, line = finding.file, finding.line
        reported = Reported(
            rule=rule.id,
            severity=finding.severity or rule.severity,
            env=scope.env if manifest is not None else "",
            file=file,
            line=line,
            resource=manifest.resource if manifest is not None else "",
            kustomization=owners.get(id(manifest), manifest.source if manifest is not None else ""),
            message=finding.message,
            remediation=rule.remediation,
            path=".".join(str(p) for p in finding.path),
        )
        reason = ""
        if manifest is not None and rule.suppressible:
            reason = str(manifest.annotations.get(SUPPRESSION_PREFIX + rule.id) or "").strip()
        if reason:
            reported.reason = reason
            result.skipped.append(reported)
        else:
            result.findings.append(reported)


def sort(result: Result) -> None:
    key = lambda f: (f.env, f.file, f.line, f.rule, f.resource, f.message)  # noqa: E731
    result.findings.sort(key=key)
    result.skipped.sort(key=key)
