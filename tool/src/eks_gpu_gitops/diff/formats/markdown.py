"""A pull-request comment: summary table and notices first, then a collapsible diff per object.

GitHub refuses comments over 65,536 characters. The summary always fits (its table and
notice list are capped too); object diffs are added whole, in order, while they fit, and
the comment then says exactly which ones were left out.
"""

from __future__ import annotations

import re

from ...core.escaping import code_span, in_html, in_markdown, in_table, neutralise_commands
from ..model import DANGER, INFO, STATUS_SIGN, WARNING, EnvironmentDiff, ObjectChange, Report
from .common import (
    NO_CHANGES,
    NO_CHANGES_IN_OTHERS,
    counts,
    env_title,
    figure,
    figure_lines,
    figures,
    grouped_notices,
    owner,
    stat,
)

GITHUB_LIMIT = 65_536
# Room for what a workflow adds around the body (a hidden marker, a footer).
DEFAULT_LIMIT = 60_000
ARROW = "→"
_ICONS = {DANGER: "🛑", WARNING: "⚠️", INFO: "ℹ️"}
_LISTED_CUTS = 20  # names of left-out diffs the note lists before "and N more"
_NOTE_RESERVE = 4_000  # characters kept free for that note
_LONGEST_NAME = 120
_LONGEST_HINT = 400
_LONGEST_ERROR = 1_000


def render(report: Report, max_chars: int = DEFAULT_LIMIT, full_diff_hint: str = "") -> str:
    head = _summary(report, max_chars)
    if not report.has_changes:
        return neutralise_commands(head)
    budget = max_chars - len(head) - _NOTE_RESERVE
    body, cut = _sections(report, budget)
    return neutralise_commands(head + _cut_note(cut, full_diff_hint) + body)


def _summary(report: Report, max_chars: int) -> str:
    lines = ["## Manifest diff", "", f"{code_span(report.base.label)} {ARROW} {code_span(report.head.label)}"]
    lines += _broken(report, max_chars)
    if not report.has_changes:
        return "\n".join(lines + ["", NO_CHANGES_IN_OTHERS if report.broken else NO_CHANGES]) + "\n"
    changed, total = report.changed, len(report.environments)
    rendered = "rendered " if report.broken else ""
    lines[2] += f": changes in **{len(changed)} of {total}** {rendered}environment{'s' if total != 1 else ''}."
    lines += [
        "",
        "| Environment | Objects | MPIJob GPUs | GPU quota | GPU node capacity | Notices |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    rows = [_row(env) for env in changed]
    lines += _fit(rows, max_chars // 4, "| … | {n} more environments | | | | |")
    lines += [
        "",
        "<sub>MPIJob GPUs: replicas x `nvidia.com/gpu` over all MPIJobs; those in a Kueue queue take turns, "
        "so each alone must fit. GPU quota: `nvidia.com/gpu` nominalQuota over the Kueue ClusterQueues. "
        "GPU node capacity: maxSize x GPUs per instance over the eksctl node groups, which Cluster "
        "Autoscaler grows up to while jobs wait.</sub>",
    ]
    if report.notices:
        items = [
            f"- {_ICONS[notice.severity]} **{in_html(env_name)}** · {code_span(notice.resource)} · "
            f"**{in_markdown(notice.title)}**: {in_markdown(notice.message)} <sub>{in_html(notice.id)}</sub>"
            for env_name, notice in grouped_notices(report)
        ]
        lines += ["", "### Notices", ""] + _fit(items, max_chars // 4, "- … and {n} more notices")
    return "\n".join(lines) + "\n\n"


def _broken(report: Report, max_chars: int) -> list[str]:
    """A section naming each environment that does not render, with its one-line error."""
    if not report.broken:
        return []
    items = [
        # A code span, not <code>: markdown would read backticks in the error inside an HTML element.
        f"- **{in_html(broken.name)}**: {code_span(_clip(broken.error, _LONGEST_ERROR))}"
        for broken in report.broken
    ]
    return [
        "",
        "### 🛑 Not rendered",
        "",
        "The diff of these environments is left out, and the check fails until they render:",
        "",
        *_fit(items, max_chars // 8, "- … and {n} more environments"),
    ]


def _row(env: EnvironmentDiff) -> str:
    cells = [
        _env_cell(env),
        in_table(counts(env)),
        *(figure(value, ARROW) for _, value in figures(env)),
        _notice_counts(env),
    ]
    return "| " + " | ".join(cells) + " |"


def _env_cell(env: EnvironmentDiff) -> str:
    return f"**{in_table(env_title(env))}**"


def _notice_counts(env: EnvironmentDiff) -> str:
    found = [
        f"{_ICONS[severity]} {sum(1 for n in env.notices if n.severity == severity)}"
        for severity in (DANGER, WARNING, INFO)
        if any(n.severity == severity for n in env.notices)
    ]
    return " ".join(found) or "–"


def _fit(items: list[str], budget: int, more: str) -> list[str]:
    """As many items as fit in `budget` characters, then one line counting the rest."""
    kept, used = [], 0
    for index, item in enumerate(items):
        if used + len(item) + 1 > budget:
            return kept + [more.format(n=len(items) - index)]
        kept.append(item)
        used += len(item) + 1
    return kept


def _sections(report: Report, budget: int) -> tuple[str, list[tuple[str, ObjectChange]]]:
    """The collapsible diffs that fit, and (environment, change) for each one left out."""
    parts, cut, used = [], [], 0
    for env in report.changed:
        figures = "".join(f"- {in_html(line)}\n" for line in figure_lines(env, ARROW))
        opening = (
            f"<details><summary><b>{in_html(env_title(env))}</b>: {in_html(counts(env))}</summary>\n\n"
            f"{figures}{chr(10) if figures else ''}"
        )
        closing = "</details>\n\n"
        kept = []
        for change in env.changes:
            section = _object_section(change)
            cost = len(section) + (0 if kept else len(opening) + len(closing))
            if used + cost <= budget:
                kept.append(section)
                used += cost
            else:
                cut.append((env.name, change))
        if kept:
            parts.append(opening + "".join(kept) + closing)
    return "".join(parts), cut


def _object_section(change: ObjectChange) -> str:
    fence = _fence(change.diff)
    summary = (
        f"{in_html(STATUS_SIGN[change.status])} <code>{in_html(change.resource)}</code> "
        f"({in_html(owner(change))}, {stat(change)})"
    )
    body = f"{fence}diff\n{change.diff}\n{fence}" if change.diff else "Content unchanged."
    return f"<details><summary>{summary}</summary>\n\n{body}\n\n</details>\n\n"


def _fence(content: str) -> str:
    """A backtick fence longer than any backtick run inside the content."""
    longest = max((len(run) for run in re.findall(r"`+", content)), default=0)
    return "`" * max(3, longest + 1)


def _cut_note(cut: list[tuple[str, ObjectChange]], hint: str) -> str:
    if not cut:
        return ""
    names = [code_span(_clip(f"{env}: {change.resource}", _LONGEST_NAME)) for env, change in cut[:_LISTED_CUTS]]
    more = f" and {len(cut) - _LISTED_CUTS} more" if len(cut) > _LISTED_CUTS else ""
    how = f" {_clip(hint, _LONGEST_HINT)}" if hint else " Run `scripts/diff` locally for the full diff."
    return (
        f"> [!NOTE]\n> The diffs of {len(cut)} object{'s' if len(cut) != 1 else ''} were left out to keep "
        f"this comment under GitHub's {GITHUB_LIMIT:,}-character limit: {', '.join(names)}{more}.{how}\n\n"
    )


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
