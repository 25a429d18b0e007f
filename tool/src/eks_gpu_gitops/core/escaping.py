"""Text from manifests (object names, values, messages) placed safely in an output.

- Every human-facing output (terminal, CI log, markdown) goes through `neutralise_commands`:
  - the runner reads a line that starts with `::` (after leading spaces) as a workflow command (`::error
    file=...::`, `::add-mask::`, `::stop-commands::`); such a line gets a backslash in front, which markdown
    renders as nothing (`\\:` is a `:`);
  - the older syntax, `##[command]`, is read anywhere in a line (the runner's own log processing): its `##[`
    gets a backslash too (`#\\#[`);
  - control characters (terminal escape sequences, a lone carriage return that rewrites the line on a
    terminal, NUL) and the Unicode bidirectional controls that reorder what a reviewer sees (U+202A-U+202E,
    U+2066-U+2069, U+200E/U+200F, U+061C) are shown as `\\uXXXX`; tab and newline stay.
- Workflow commands themselves: data and properties escaped the way GitHub's toolkit does
  (actions/toolkit packages/core/src/command.ts, escapeData and escapeProperty).
- Markdown: HTML-escaped text inside HTML elements, and code spans whose backtick run is longer than
  any inside the text, so no name closes its `<code>`, `<summary>` or `<details>` early.
"""

from __future__ import annotations

import html
import re

# A line start, any whitespace the runner trims, then `::`.
_COMMAND_LINE = re.compile(r"^([^\S\n]*)(?=::)", re.MULTILINE)
# The runner's older command syntax, read anywhere in a line.
_OLD_COMMAND = re.compile(r"##\[")
# C0 controls but tab and newline, DEL, C1 controls, and the bidirectional controls.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def one_line(text: str) -> str:
    """`text` as one safe line (a progress or error line of a verb): whitespace runs, newlines included, are one
    space."""
    return neutralise_commands(" ".join(str(text).split()))


def neutralise_commands(text: str) -> str:
    """`text` safe for a terminal, a CI log and a markdown comment: no line a GitHub Actions runner would read
    as a workflow command (either syntax), and no control or bidirectional character."""
    text = _UNSAFE.sub(lambda match: f"\\u{ord(match.group()):04x}", str(text))
    text = _OLD_COMMAND.sub("#\\#[", text)
    return _COMMAND_LINE.sub(lambda match: match.group(1) + "\\", text)


def command_data(value: str) -> str:
    value = value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return _OLD_COMMAND.sub("#\\#[", _UNSAFE.sub(lambda match: f"\\u{ord(match.group()):04x}", value))


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


# A code span: a run of backticks, text, the same run again (CommonMark's rule).
_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)")
# What markdown reads as markup outside a code span: emphasis, links and images, headings, tables, strikethrough.
_MARKUP = re.compile(r"([\\`*_\[\]()!#|~])")


def in_markdown(text: str) -> str:
    """Text for a line of a markdown comment, on one line: its code spans (a notice's names, made with
    `code_span`) kept, and everywhere else markup escaped, HTML escaped and `@` made unable to mention anyone,
    so a name cannot make a link, an image or a mention."""
    text = " ".join(str(text).split())
    parts, last = [], 0
    for match in _CODE_SPAN.finditer(text):
        parts += [_plain(text[last : match.start()]), match.group(0)]
        last = match.end()
    parts.append(_plain(text[last:]))
    return neutralise_commands("".join(parts))


def _plain(text: str) -> str:
    return _MARKUP.sub(r"\\\1", html.escape(text, quote=False)).replace("@", "&#64;")
