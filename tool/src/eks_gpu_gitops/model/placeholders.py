"""Placeholders: a value someone must still fill in. placeholder-value reports them (a warning: the file is a
template, not yet wrong); a rule that judges a value's form skips one that holds a placeholder, since what will
stand there is not written yet."""

from __future__ import annotations

import re

# Each only as a whole token (not inside a longer word): REPLACE-ME and CHANGE-ME in any case and spelling,
# PLACEHOLDER and PLACEHOLDER_<WHAT>, <account-id>-style angle-bracket tokens, runs of four or more x
# (arn:aws:iam::xxxxxxxxxxxx:role), and the upper-case TODO, FIXME, TBD.
PLACEHOLDER = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"(?i:replace[-_]?me|change[-_]?me|placeholder(?:[-_][a-z0-9_]+)?|x{4,})"
    r"|TODO|FIXME|TBD"
    r")(?![A-Za-z0-9])"
    r"|<[A-Za-z][A-Za-z0-9_.-]*>"
)


def holds_placeholder(value: object) -> bool:
    return isinstance(value, str) and PLACEHOLDER.search(value) is not None
