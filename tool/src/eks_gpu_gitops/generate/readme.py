"""The README's table of environments: one row per environment between two marker comments, so
the generators add and replace rows without touching anything else (new-environment adds an environment's
row, scale replaces it)."""

from __future__ import annotations

BEGIN = "<!-- environments: one row each, added by scripts/new-environment -->"
END = "<!-- end of environments -->"


def _table(text: str) -> tuple[int, int] | None:
    """Where the table's rows are (from the line after BEGIN to END); None when the markers are gone."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        return None
    return start + len(BEGIN), end


def with_rows(text: str, rows: list[str]) -> str | None:
    """`text` with `rows` added at the end of the table; None when the markers are gone."""
    where = _table(text)
    if where is None:
        return None
    start, end = where
    table = text[start:end]
    new = [row for row in rows if row not in table]
    return text[:end] + "".join(f"{row}\n" for row in new) + text[end:]


def _starts_row(line: str, env: str) -> bool:
    return line.startswith(f"| `{env}` |")


def row_of(text: str, env: str) -> str | None:
    """The table's row of environment `env` (readme_row's shape: its first cell is the name); None when there
    is none, or no table."""
    where = _table(text)
    if where is None:
        return None
    return next((line for line in text[where[0] : where[1]].splitlines() if _starts_row(line, env)), None)


def with_row(text: str, env: str, row: str) -> str | None:
    """`text` with `row` in place of environment `env`'s row (added at the end when it has none); None when the
    markers are gone."""
    where = _table(text)
    if where is None:
        return None
    start, end = where
    lines = text[start:end].splitlines(keepends=True)
    replaced = [f"{row}\n" if _starts_row(line, env) else line for line in lines]
    if replaced == lines and row_of(text, env) is None:
        return with_rows(text, [row])
    return text[:start] + "".join(replaced) + text[end:]
