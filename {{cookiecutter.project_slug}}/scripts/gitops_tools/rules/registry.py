"""The rule registry: each rule is data (id, severity, description, remediation, docs) plus a
pure check function over one rendered environment (a `Scope`).

A check yields `Finding`s; it never decides whether a finding is suppressed, how severe it is
in a given environment, or how it is printed: the runner (gitops_tools.runner) does that.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable

from ..manifests import Manifest

SEVERITIES = ("error", "warning")

# What a rule may need beyond the objects themselves. The runner skips a rule, and says so,
# when its scope lacks one of them.
CONTEXTS = {
    "cluster": "the eksctl ClusterConfig (found among the inputs, or --cluster-config FILE)",
    "environment": "the whole environment (validate the repository root or clusters/<env>)",
    "flux": "the Flux Kustomizations of clusters/<env>/ (validate the repository root or clusters/<env>)",
}

# Where a rule's findings come from: the YAML sources, the schema check, a check function, or the
# runner itself (a check function that failed).
STAGES = ("source", "schema", "rules", "runner")

ID_PATTERN = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)+$")


@dataclass(frozen=True)
class Rule:
    id: str
    severity: str
    description: str
    remediation: str
    docs: str
    category: str
    check: Callable[..., Iterable["Finding"]] | None = None
    requires: tuple[str, ...] = ()
    production_severity: str | None = None   # severity in production environments, when it differs
    stage: str = "rules"

    def severity_in(self, production: bool) -> str:
        return self.production_severity if production and self.production_severity else self.severity


@dataclass
class Finding:
    rule: str
    manifest: Manifest | None
    message: str
    path: tuple = ()             # field path inside the object, to find the source line
    severity: str | None = None  # None: the rule's own severity
    file: str = ""               # only for findings that are not about one object (yamllint)
    line: int = 0


REGISTRY: dict[str, Rule] = {}


def _check_definition(rule: Rule) -> list[str]:
    problems = []
    if not ID_PATTERN.match(rule.id):
        problems.append("id must be kebab-case with at least two words")
    if rule.id in REGISTRY:
        problems.append("duplicate id")
    if rule.severity not in SEVERITIES or rule.production_severity not in (None, *SEVERITIES):
        problems.append(f"severity must be one of {', '.join(SEVERITIES)}")
    if not rule.description or "\n" in rule.description or rule.description.endswith("."):
        problems.append("description must be one line without a final period")
    if not rule.remediation.endswith("."):
        problems.append("remediation must end with a period")
    if not rule.docs.strip():
        problems.append("docs must not be empty")
    if rule.stage not in STAGES or (rule.stage == "rules") != (rule.check is not None):
        problems.append("a rules-stage rule needs a check function, and only it")
    unknown = set(rule.requires) - set(CONTEXTS)
    if unknown:
        problems.append(f"unknown context {sorted(unknown)}")
    return problems


def register(rule: Rule) -> Rule:
    problems = _check_definition(rule)
    if problems:
        raise ValueError(f"rule {rule.id!r}: " + "; ".join(problems))
    REGISTRY[rule.id] = rule
    return rule


def category(name: str):
    """A decorator factory for one module's rules: `rule = category("GPUs")`, then
    `@rule("id", "error", description=..., remediation=..., docs=...)` over a check function."""

    def rule(rule_id: str, severity: str, *, description: str, remediation: str, docs: str,
             requires: tuple[str, ...] = (), production_severity: str | None = None):
        def decorate(check):
            register(Rule(rule_id, severity, description, remediation, " ".join(docs.split()), name,
                          check, tuple(requires), production_severity))
            return check
        return decorate

    return rule


def stage_rule(rule_id: str, severity: str, stage: str, *, category: str, description: str,
               remediation: str, docs: str) -> Rule:
    """A rule whose findings a pipeline stage makes (yamllint, the schema check)."""
    return register(Rule(rule_id, severity, description, remediation, " ".join(docs.split()), category,
                         None, (), None, stage))
