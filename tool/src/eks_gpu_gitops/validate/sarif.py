"""A validate result as SARIF 2.1.0 (OASIS, sarif-v2.1.0 with errata 01), for GitHub code scanning.

What code scanning reads (docs.github.com, "SARIF support for code scanning"): tool.driver with its name and
rules (id, name, shortDescription, fullDescription and help.text required, at most 1,024 characters for the
descriptions), each result's ruleId, level, message.text and first location (a physicalLocation whose
artifactLocation.uri is relative to the repository's root, region.startLine from 1), and the
primaryLocationLineHash partial fingerprint, which upload-sarif computes from the source line when it is
missing (and warns when a given one differs from its own). So this writes its own partial fingerprint under its
own name, and leaves that one to upload-sarif.

Code scanning keeps one alert per rule and source line. A source file shared by several environments (a base
kustomization) gives one finding per environment on the same line: those are one result here, at the highest
level any environment gives it, whose message and `environments` property name each environment.

The result comes masked (report._masked); nothing here adds text from the repository but file names.
"""

from __future__ import annotations

import hashlib
import json
from importlib import metadata
from itertools import groupby
from pathlib import PurePosixPath
from urllib.parse import quote

from .. import __version__
from ..rules.registry import CONSEQUENCES, Rule, all_rules
from .runner import Reported, Result

SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
TOOL = "eks-gpu-gitops"
SOURCE_ROOT = "%SRCROOT%"
FINGERPRINT = "eksGpuGitopsFinding/v1"
# GitHub shows at most this much of a rule's descriptions.
MAX_DESCRIPTION = 1024
_RANK = {"note": 0, "warning": 1, "error": 2}


def _source_url() -> str:
    """The repository the tool is released from (its pyproject's Source URL), "" when it is not installed."""
    try:
        urls = dict(url.split(", ", 1) for url in metadata.metadata(TOOL).get_all("Project-URL") or [])
    except metadata.PackageNotFoundError:
        return ""
    return urls.get("Source", "").rstrip("/")


def help_uri(rule: Rule, source: str) -> str:
    """The rule's section of docs/rules.md at this version's tag (as `--version` links the documentation)."""
    return f"{source}/blob/v{__version__}/tool/docs/rules.md#{rule.id}" if source else ""


def _pascal(rule_id: str) -> str:
    return "".join(part.capitalize() for part in rule_id.split("-"))


def _cut(text: str, limit: int = MAX_DESCRIPTION) -> str:
    """`text` within `limit` characters: whole sentences where they fit, else cut with an ellipsis."""
    if len(text) <= limit:
        return text
    end = text.rfind(". ", 0, limit - 1)
    return text[: end + 1] if end > 0 else text[: limit - 1] + "…"


def _why(rule: Rule) -> str:
    if rule.stage == "source":
        return "the level yamllint's configuration gives it"
    return CONSEQUENCES[rule.consequence][1] if rule.consequence else ""


def descriptor(rule: Rule, source: str) -> dict:
    """A rule as a SARIF reportingDescriptor."""
    uri = help_uri(rule, source)
    severity = f"{rule.severity}, because {_why(rule)}" if _why(rule) else rule.severity
    facts = [f"Applies when: {rule.premise}"] if rule.premise else []
    facts += [f"Severity: {severity}.", f"Remediation: {rule.remediation}"]
    text = "\n\n".join([f"{rule.description}.", rule.docs, *facts, *([f"Documentation: {uri}"] if uri else [])])
    markdown = "\n".join(
        [
            f"**{rule.description}.**",
            "",
            rule.docs,
            "",
            *(f"- {fact}" for fact in facts),
            *(["", f"[`{rule.id}` in docs/rules.md]({uri})"] if uri else []),
        ]
    )
    found = {
        "id": rule.id,
        "name": _pascal(rule.id),
        "shortDescription": {"text": _cut(f"{rule.description}.")},
        "fullDescription": {"text": _cut(rule.docs)},
        "help": {"text": text, "markdown": markdown},
        "defaultConfiguration": {"level": rule.severity},
        "properties": {
            "tags": [rule.category],
            "stage": rule.stage,
            **({"consequence": rule.consequence} if rule.consequence else {}),
        },
    }
    if uri:
        found["helpUri"] = uri
    return found


def _uri(file: str) -> dict:
    """An artifactLocation: relative to the repository's root (the SRCROOT base), or a file: URI outside it."""
    path = PurePosixPath(file)
    if path.is_absolute():
        return {"uri": path.as_uri()}
    return {"uri": quote(str(path), safe="/"), "uriBaseId": SOURCE_ROOT}


def _location(finding: Reported) -> list[dict]:
    if not finding.file or finding.file == "-":
        return []  # not about a file (a rule that could not finish): no location to annotate
    physical = {"artifactLocation": _uri(finding.file), "region": {"startLine": max(finding.line, 1)}}
    return [{"physicalLocation": physical}]


def _identity(finding: Reported) -> tuple:
    """What makes findings of several environments one result: the same rule, place, object and message."""
    return (finding.rule, finding.file, finding.line, finding.resource, finding.path, finding.message)


def _fingerprint(finding: Reported) -> str:
    """Stable while lines move: the rule, file, object, field and message; the line only for a finding that names
    no object (yamllint's, each about a line)."""
    parts = [finding.rule, finding.file, finding.resource, finding.path, finding.message]
    if not finding.resource:
        parts.append(str(finding.line))
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def _environments_text(group: list[Reported]) -> str:
    envs = [f for f in group if f.env]
    if not envs:
        return ""
    if len({f.severity for f in envs}) == 1:
        return f" (environment{'s' if len(envs) > 1 else ''} {', '.join(f.env for f in envs)})"
    return " (" + "; ".join(f"{f.severity} in {f.env}" for f in envs) + ")"


def _result(group: list[Reported], index: dict[str, int], suppressed: bool) -> dict:
    group = sorted(group, key=lambda f: (-_RANK.get(f.severity, 0), f.env))
    first = group[0]
    subject = f"{first.resource}: " if first.resource else ""
    found = {
        "ruleId": first.rule,
        "ruleIndex": index[first.rule],
        "level": first.severity,
        "message": {"text": f"{subject}{first.message}{_environments_text(group)}"},
        "locations": _location(first),
        "partialFingerprints": {FINGERPRINT: _fingerprint(first)},
        "properties": {
            "environments": sorted({f.env for f in group if f.env}),
            "resource": first.resource,
            "kustomization": first.kustomization,
            "path": first.path,
        },
    }
    if suppressed:
        found["suppressions"] = [{"kind": "inSource", "justification": first.reason}]
    return found


def _results(findings: list[Reported], index: dict[str, int], suppressed: bool) -> list[dict]:
    ordered = sorted(findings, key=_identity)
    return [_result(list(group), index, suppressed) for _, group in groupby(ordered, key=_identity)]


def document(result: Result) -> dict:
    """The SARIF log of a (masked) result: one run, every rule of the catalogue described."""
    source = _source_url()
    rules = all_rules()
    index = {rule.id: position for position, rule in enumerate(rules)}
    driver = {
        "name": TOOL,
        "version": __version__,
        "semanticVersion": __version__,
        "rules": [descriptor(rule, source) for rule in rules],
    }
    if source:
        driver["informationUri"] = source
    run = {
        "tool": {"driver": driver},
        "invocations": [
            {
                "executionSuccessful": True,
                "toolExecutionNotifications": [{"level": "note", "message": {"text": note}} for note in result.notes],
            }
        ],
        "results": _results(result.findings, index, False) + _results(result.skipped, index, True),
        "properties": {"environments": result.environments, "objects": result.objects},
    }
    return {"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}


def sarif(result: Result) -> str:
    return json.dumps(document(result), indent=2) + "\n"
