"""The rule registry: each rule is data (id, severity, category, description, remediation, docs)
plus a pure check function over one rendered environment (a `Scope`).

A check yields `Finding`s without a rule id; `Rule.run` stamps each with the rule's own id, so no
finding names a rule by a string. A check never decides whether a finding is suppressed, how severe
it is in a given environment, or how it is printed: the runner (validate/runner.py) does.
Rules of pipeline stages (yamllint, the schema check, the runner itself) have no check function;
their stage makes findings with `Rule.finding`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..model import Manifest

SEVERITIES = ("error", "warning")

# The catalogue's chapters, in the order of docs/rules.md.
CATEGORIES = (
    "Sources and schemas",
    "MPIJob",
    "GPUs",
    "Scheduling",
    "Capacity and queueing",
    "EFA",
    "FSx for Lustre",
    "Ordering",
    "Flux substitution",
    "Removed APIs and versions",
    "Hygiene and security",
)

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

# An object suppresses a finding of rule X with the annotation <prefix>X: "<reason>".
SUPPRESSION_PREFIX = "validate.gitops/ignore-"

ID_PATTERN = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)+$")


@dataclass
class Finding:
    manifest: Manifest | None
    message: str
    path: tuple = ()  # field path inside the object, to find the source line
    severity: str | None = None  # None: the rule's own severity
    file: str = ""  # only for findings that are not about one object (yamllint)
    line: int = 0
    rule: str = field(default="", compare=False)  # stamped by the registry


@dataclass(frozen=True)
class Rule:
    id: str
    severity: str
    description: str
    remediation: str
    docs: str
    category: str
    check: Callable[..., Iterable[Finding]] | None = None
    requires: tuple[str, ...] = ()
    production_severity: str | None = None  # severity in production environments, when it differs
    stage: str = "rules"
    suppressible: bool = True  # False: an annotation cannot hide its findings

    def severity_in(self, production: bool) -> str:
        return self.production_severity if production and self.production_severity else self.severity

    def run(self, scope) -> list[Finding]:
        """The check's findings over one scope, each stamped with this rule's id."""
        found = list(self.check(scope))
        for finding in found:
            finding.rule = self.id
        return found

    def finding(self, manifest: Manifest | None, message: str, path: tuple = (), **where) -> Finding:
        """A finding of this rule made by a pipeline stage (`where`: severity, file, line)."""
        return Finding(manifest, message, tuple(path), rule=self.id, **where)


REGISTRY: dict[str, Rule] = {}


def _check_definition(rule: Rule) -> list[str]:
    problems = []
    if not ID_PATTERN.match(rule.id):
        problems.append("id must be kebab-case with at least two words")
    if rule.id in REGISTRY:
        problems.append("duplicate id")
    if rule.category not in CATEGORIES:
        problems.append(f"category {rule.category!r} is not one of the catalogue's ({', '.join(CATEGORIES)})")
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
    if name not in CATEGORIES:
        raise ValueError(f"category {name!r} is not one of the catalogue's ({', '.join(CATEGORIES)})")

    def rule(
        rule_id: str,
        severity: str,
        *,
        description: str,
        remediation: str,
        docs: str,
        requires: tuple[str, ...] = (),
        production_severity: str | None = None,
        suppressible: bool = True,
    ):
        def decorate(check):
            register(
                Rule(
                    rule_id,
                    severity,
                    description,
                    remediation,
                    " ".join(docs.split()),
                    name,
                    check,
                    tuple(requires),
                    production_severity,
                    suppressible=suppressible,
                )
            )
            return check

        return decorate

    return rule


def stage_rule(
    rule_id: str, severity: str, stage: str, *, category: str, description: str, remediation: str, docs: str
) -> Rule:
    """A rule whose findings a pipeline stage makes (yamllint, the schema check, the runner)."""
    return register(
        Rule(rule_id, severity, description, remediation, " ".join(docs.split()), category, None, (), None, stage)
    )


def all_rules() -> list[Rule]:
    """Every registered rule in catalogue order: by category, then id."""
    return sorted(REGISTRY.values(), key=lambda r: (CATEGORIES.index(r.category), r.id))


RULE_FAILED = stage_rule(
    "rule-failed",
    "error",
    "runner",
    category="Sources and schemas",
    description="A rule could not finish on the input, so what it checks is unknown",
    remediation="Fix the schema findings of the same objects first; if there are none, report the message as a "
    "bug of validate.",
    docs="""A rule that stops on input it does not expect (usually an object the schema check already
    rejects) is not silently passed: the run fails with this finding, and the note names the rule.""",
)
