"""Output formats of a validate result: a table from format name to function (text, json, github, sarif)."""

from __future__ import annotations

import json
from dataclasses import fields, replace
from itertools import groupby

from ..core.credentials import mask_text
from ..core.escaping import command_data, command_property, neutralise_commands
from .runner import Reported, Result
from .sarif import sarif


def mask_reported(finding: Reported) -> Reported:
    """A finding as every output shows it (and the results cache keeps it): credential shapes, and the values
    substituted from a repository's Secrets, masked in each of its texts (the resource and file a substituted
    name lands in, the message a rule wrote, a suppression's reason), not only in what a rule quoted."""
    return replace(
        finding,
        **{f.name: mask_text(value) for f in fields(finding) if isinstance(value := getattr(finding, f.name), str)},
    )


def _masked(result: Result) -> Result:
    """The result as every format prints it: each finding (mask_reported) and note masked, environment names too,
    at this one point where a result becomes output, whatever rule or stage made it."""
    return replace(
        result,
        findings=[mask_reported(f) for f in result.findings],
        skipped=[mask_reported(f) for f in result.skipped],
        notes=[mask_text(note) for note in result.notes],
        environments=[mask_text(env) for env in result.environments],
    )


def _summary(result: Result) -> dict:
    return {
        "errors": result.count("error"),
        "warnings": result.count("warning"),
        "skipped": len(result.skipped),
        "environments": result.environments,
        "objects": result.objects,
    }


def _summary_line(result: Result) -> str:
    counts = _summary(result)

    def n(count, word):
        return f"{count} {word}{'' if count == 1 else 's'}"

    envs = ", ".join(result.environments) or "no environment"
    return (
        f"{n(counts['errors'], 'error')}, {n(counts['warnings'], 'warning')}, {counts['skipped']} suppressed "
        f"in {n(result.objects, 'object')} ({envs})"
    )


def _where(finding: Reported) -> str:
    return f"{finding.file}:{finding.line}" if finding.line else (finding.file or "-")


def text(result: Result) -> str:
    lines = []
    for env, by_env in groupby(result.findings, key=lambda f: f.env):
        lines.append(f"{env or 'sources'}:")
        for file, by_file in groupby(by_env, key=lambda f: f.file):
            lines.append(f"  {file or '-'}")
            for finding in by_file:
                at = f"line {finding.line}" if finding.line else "-"
                subject = f"{finding.resource}: " if finding.resource else ""
                lines.append(f"    {at:<9} {finding.severity:<7} {finding.rule}  {subject}{finding.message}")
                lines.append(f"    {'':<9} {'fix:':<7} {finding.remediation}")
    if result.skipped:
        lines.append("suppressed:")
        lines.extend(f"  {f.env or '-'} {_where(f)} {f.rule} {f.resource}: {f.reason}" for f in result.skipped)
    if result.notes:
        lines.append("notes:")
        lines.extend(f"  {note}" for note in result.notes)
    lines.append(_summary_line(result))
    return neutralise_commands("\n".join(lines) + "\n")


def as_json(result: Result) -> str:
    document = {
        "summary": _summary(result),
        "findings": [f.as_dict() for f in result.findings],
        "skipped": [f.as_dict() for f in result.skipped],
        "notes": result.notes,
    }
    return json.dumps(document, indent=2) + "\n"


def _command(name: str, message: str, **properties) -> str:
    props = ",".join(f"{k}={command_property(str(v))}" for k, v in properties.items() if v not in ("", 0, None))
    return f"::{name}{' ' + props if props else ''}::{command_data(message)}"


def github(result: Result) -> str:
    """GitHub Actions workflow commands: one annotation per finding, on its file and line."""
    lines = []
    for f in result.findings:
        title = f"{f.rule} ({f.env})" if f.env else f.rule
        subject = f"{f.resource}: " if f.resource else ""
        lines.append(
            _command(f.severity, f"{subject}{f.message}\nFix: {f.remediation}", file=f.file, line=f.line, title=title)
        )
    for f in result.skipped:
        lines.append(
            _command(
                "notice",
                f"{f.rule} suppressed on {f.resource}: {f.reason}",
                file=f.file,
                line=f.line,
                title=f"suppressed {f.rule}",
            )
        )
    lines.extend(_command("notice", note) for note in result.notes)
    lines.append(neutralise_commands(_summary_line(result)))
    return "\n".join(lines) + "\n"


FORMATS = {
    "text": lambda result: text(_masked(result)),
    "json": lambda result: as_json(_masked(result)),
    "github": lambda result: github(_masked(result)),
    "sarif": lambda result: sarif(_masked(result)),
}
