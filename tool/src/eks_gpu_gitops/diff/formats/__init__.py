"""Output formats: each turns a Report into text. The table maps a name to its function."""

from __future__ import annotations

from dataclasses import dataclass

from . import json_format, markdown, text


@dataclass
class Options:
    color: bool = False  # text: ANSI colours
    max_chars: int = markdown.DEFAULT_LIMIT  # markdown: the most characters the comment may have
    full_diff_hint: str = ""  # markdown: how to see what the cap left out


FORMATS = {
    "text": lambda report, options: text.render(report, color=options.color),
    "markdown": lambda report, options: markdown.render(report, options.max_chars, options.full_diff_hint),
    "json": lambda report, options: json_format.render(report),
}
