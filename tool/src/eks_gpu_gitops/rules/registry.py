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

# The severity policy: a rule's severity follows from what happens if its finding is ignored. Each rule names
# one of these consequences; registration refuses a severity that does not follow from it. A team that holds
# itself to more (an error for an untagged image in production, say) raises a rule in its configuration file
# (validate/config.py), not in the catalogue.
CONSEQUENCES = {
    "api-server": ("error", "the API server rejects the object, so Flux's apply of its whole Kustomization fails"),
    "flux": ("error", "Flux fails to build, apply or reconcile it"),
    "eksctl": ("error", "eksctl refuses the ClusterConfig, or creating the cluster or a node group fails"),
    "ec2": ("error", "EC2 or EC2 Auto Scaling refuses the launch, or the capacity can never be provided"),
    "job": ("error", "the workload itself fails, or can never start or be scheduled"),
    "unverified": ("error", "validate could not check the input, so passing it would claim what nobody checked"),
    "cost": ("warning", "it works, but costs more than it needs to (idle GPU-hours, storage kept or lost)"),
    "performance": ("warning", "it works, but slower than the hardware allows"),
    "risk": ("warning", "it works, but a choice is risky: data loss, drift, exposure, or a later change that fails"),
    "unchecked": ("warning", "part of the input could not be checked; nothing says it is wrong"),
    "configured": ("error", "the level the repository's own configuration (its .yamllint) gives it"),
}

# The catalogue's chapters, in the order of docs/rules.md.
CATEGORIES = (
    "Sources and schemas",
    "MPIJob",
    "GPUs",
    "Scheduling",
    "Capacity and queueing",
    "EFA",
    "Node health",
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
    stage: str = "rules"
    suppressible: bool = True  # False: an annotation cannot hide its findings
    premise: str = ""  # what the rendered context must show for the rule to apply (one sentence; required)
    consequence: str = ""  # a key of CONSEQUENCES: why the rule has its severity (required)

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
    if rule.severity not in SEVERITIES:
        problems.append(f"severity must be one of {', '.join(SEVERITIES)}")
    if rule.consequence not in CONSEQUENCES:
        problems.append(f"consequence {rule.consequence!r} is not one of the policy's ({', '.join(CONSEQUENCES)})")
    elif CONSEQUENCES[rule.consequence][0] != rule.severity and rule.stage != "source":
        problems.append(
            f"severity {rule.severity} does not follow from consequence {rule.consequence!r} "
            f"(the policy makes it {CONSEQUENCES[rule.consequence][0]})"
        )
    if not rule.premise.endswith(".") or "\n" in rule.premise:
        problems.append("premise must be one line ending with a period: what the rendered context must show")
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
        suppressible: bool = True,
        premise: str = "",
        consequence: str = "",
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
                    suppressible=suppressible,
                    premise=" ".join(premise.split()),
                    consequence=consequence,
                )
            )
            return check

        return decorate

    return rule


def stage_rule(
    rule_id: str,
    severity: str,
    stage: str,
    *,
    category: str,
    description: str,
    remediation: str,
    docs: str,
    premise: str = "",
    consequence: str = "",
) -> Rule:
    """A rule whose findings a pipeline stage makes (yamllint, the schema check, the runner)."""
    return register(
        Rule(
            rule_id,
            severity,
            description,
            remediation,
            " ".join(docs.split()),
            category,
            None,
            (),
            stage,
            premise=" ".join(premise.split()),
            consequence=consequence,
        )
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
    premise="A rule's check raised on the rendered objects.",
    consequence="unverified",
)
