"""Plain text for a terminal: impact first, then each changed object's diff (colour optional)."""

from __future__ import annotations

from ...core.escaping import neutralise_commands
from ..model import DANGER, STATUS_SIGN, WARNING, Report
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

_CODES = {"bold": "1", "red": "31", "green": "32", "yellow": "33", "cyan": "36", "dim": "2"}


def render(report: Report, color: bool = False) -> str:
    def paint(text: str, style: str) -> str:
        return f"\033[{_CODES[style]}m{text}\033[0m" if color else text

    lines = [paint(f"Manifest diff: {report.base.label} -> {report.head.label}", "bold")]
    if report.broken:
        lines += ["", paint("Not rendered (their diff is left out)", "bold")]
        lines += [f"  {paint('ERROR', 'red')} {broken.name}: {broken.error}" for broken in report.broken]
    if not report.has_changes:
        lines += ["", NO_CHANGES_IN_OTHERS] if report.broken else [NO_CHANGES]
        return neutralise_commands("\n".join(lines) + "\n")

    lines += ["", paint("Impact", "bold")]
    rows = [("environment", "objects", "MPIJob GPUs", "GPU quota", "GPU node capacity")]
    rows += [(env_title(env), counts(env), *(figure(value) for _, value in figures(env))) for env in report.changed]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        lines.append("  " + "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=False)).rstrip())

    if report.notices:
        lines += ["", paint("Notices", "bold")]
        for env_name, notice in grouped_notices(report):
            style = "red" if notice.severity == DANGER else "yellow" if notice.severity == WARNING else "dim"
            lines.append(
                f"  {paint(notice.severity.upper(), style)} {env_name}: {notice.resource}: "
                f"{notice.title}. {notice.message} [{notice.id}]"
            )

    for env in report.changed:
        lines += ["", paint(f"=== {env_title(env)}: {counts(env)}", "bold")]
        lines += [f"  {line}" for line in figure_lines(env)]
        for change in env.changes:
            title = f"{STATUS_SIGN[change.status]} {change.resource}  ({owner(change)}, {stat(change)})"
            lines += ["", paint(title, "bold")]
            lines += [_paint_diff_line(line, paint) for line in change.diff.splitlines()] or ["  content unchanged"]
    return neutralise_commands("\n".join(lines) + "\n")


def _paint_diff_line(line: str, paint) -> str:
    if line.startswith("@@"):
        return paint(line, "cyan")
    if line.startswith("+"):
        return paint(line, "green")
    if line.startswith("-"):
        return paint(line, "red")
    return line
