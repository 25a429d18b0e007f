"""Text from manifests (object names, values, messages) placed safely in an output.

- A CI log: the runner reads a line that starts with `::` (after leading spaces) as a workflow
  command (`::error file=...::`, `::add-mask::`, `::stop-commands::`); such a line of a plain or
  markdown output gets a backslash in front, which markdown renders as nothing (`\\:` is a `:`).
- Workflow commands themselves: data and properties escaped the way GitHub's toolkit does
  (actions/toolkit packages/core/src/command.ts, escapeData and escapeProperty).
- Markdown: HTML-escaped text inside HTML elements, and code spans whose backtick run is longer than
  any inside the text, so no name closes its `<code>`, `<summary>` or `<details>` early.
"""

from __future__ import annotations

import html
import re

# A line start (also after a lone carriage return), any whitespace the runner trims, then `::`.
_COMMAND_LINE = re.compile(r"(^|\r)([^\S\r\n]*)(?=::)", re.MULTILINE)


def neutralise_commands(text: str) -> str:
    """`text` with no line that a GitHub Actions runner would read as a workflow command."""
    return _COMMAND_LINE.sub(lambda match: match.group(1) + match.group(2) + "\\", text)


def command_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def command_property(value: str) -> str:
    return command_data(value).replace(":", "%3A").replace(",", "%2C")


def in_html(text: str) -> str:
    """Text for inside an HTML element of a markdown comment, on one line."""
    return html.escape(" ".join(str(text).split()), quote=False)


def in_table(text: str) -> str:
    """Text for a markdown table cell: HTML-escaped, with `|` escaped."""
    return in_html(text).replace("|", "\\|")


def code_span(text: str) -> str:
    """A markdown code span that shows `text` literally, whatever backticks it holds."""
    text = " ".join(str(text).split())
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"
