"""The README's table of environments: one row per environment between two marker comments, so
the generators add rows without touching anything else."""

from __future__ import annotations

BEGIN = "<!-- environments: one row each, added by scripts/new-environment -->"
END = "<!-- end of environments -->"


def with_rows(text: str, rows: list[str]) -> str | None:
    """`text` with `rows` added at the end of the table; None when the markers are gone."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        return None
    table = text[start:end]
    new = [row for row in rows if row not in table]
    return text[:end] + "".join(f"{row}\n" for row in new) + text[end:]
