"""Hide secret values before anything is diffed or printed.

Masked: every value of a Secret's `data` and `stringData` (and its last-applied annotation,
which repeats them), and the literal `value` of any `env` entry whose name looks like a
credential, wherever the env list sits (Pods, Deployments, MPIJob replica templates,
HelmRelease values...). In the other env values and in every `command`/`args` string, only
the secret part: the password of `scheme://user:password@host`, and the value of mpirun's
`-x NAME=value` when NAME looks like a credential. Like Flux's own diff, a secret that is the
same on both sides becomes `***`, one that changed becomes `*** (before)` / `*** (after)`, so
a reviewer sees that a secret changed without seeing it.
"""

from __future__ import annotations

import copy
import re

MASK = "***"
MASK_BEFORE = "*** (before)"
MASK_AFTER = "*** (after)"

# Substrings of an env var name (upper-cased, separators ignored) that mark a credential.
# Deliberately broad: masking a harmless value costs little, printing a key costs a rotation.
_CREDENTIAL_WORDS = (
    "PASSW",
    "PASSPHRASE",
    "PWD",
    "SECRET",
    "TOKEN",
    "KEY",
    "CREDENTIAL",
    "AUTH",
    "PRIVATE",
    "CERT",
    "COOKIE",
    "SALT",
    "SIGNATURE",
    "DSN",
    "CONNECTIONSTRING",
)
_SEPARATORS = re.compile(r"[^A-Z0-9]")
# scheme://user:password@host, group 2 the password (the user may be empty: redis://:password@host).
_URL_PASSWORD = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*://[^\s/:@]*:)([^\s@]+)@")
# mpirun's `-x NAME=value` inside one string (`sh -c "mpirun -x TOKEN=... python train.py"`).
_EXPORT_OPTION = re.compile(r"(?<!\S)-x\s+([A-Za-z_]\w*)=(\"[^\"]*\"|'[^']*'|\S+)")
# NAME=value as the argument after "-x" (["mpirun", "-x", "TOKEN=..."]).
_EXPORT_ARGUMENT = re.compile(r"([A-Za-z_]\w*)=(.*)", re.DOTALL)
# How much of a value is secret: all of it, the secrets in a string, or those in an argument after "-x".
_WHOLE, _TEXT, _EXPORTED = "whole", "text", "exported"
_SECRET_FIELDS = ("data", "stringData")
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def looks_like_credential(name: str) -> bool:
    squeezed = _SEPARATORS.sub("", str(name).upper())
    return any(word in squeezed for word in _CREDENTIAL_WORDS)


def is_secret(doc: dict) -> bool:
    return doc.get("kind") == "Secret" and "/" not in str(doc.get("apiVersion", "v1"))


def secret_slots(doc: dict | None) -> dict[tuple, tuple[tuple, str]]:
    """Where the secrets of `doc` are: {stable id: (path to the value, how much of it is secret)}.

    The id names a value the same way on both sides (env entries by container and variable
    name, not by list position), so before and after compare the right pair.
    """
    if not isinstance(doc, dict):
        return {}
    slots: dict[tuple, tuple[tuple, str]] = {}
    if is_secret(doc):
        for field in _SECRET_FIELDS:
            values = doc.get(field)
            if isinstance(values, dict):
                for key in values:
                    slots[(field, str(key))] = ((field, key), _WHOLE)
            elif values is not None:
                slots[(field,)] = ((field,), _WHOLE)
        metadata = doc.get("metadata")
        annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
        if isinstance(annotations, dict) and _LAST_APPLIED in annotations:
            slots[("annotation", _LAST_APPLIED)] = (("metadata", "annotations", _LAST_APPLIED), _WHOLE)
    _collect(doc, (), (), slots)
    return slots


def _collect(node, path: tuple, ident: tuple, slots: dict) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "env" and isinstance(value, list):
                _collect_env_list(value, path + (key,), ident + (key,), slots)
            if key in ("command", "args") and isinstance(value, list):
                _collect_arguments(value, path + (key,), ident + (key,), slots)
            _collect(value, path + (key,), ident + (key,), slots)
    elif isinstance(node, list):
        for index, item, name in _named_items(node):
            _collect(item, path + (index,), ident + (name,), slots)


def _collect_env_list(entries: list, path: tuple, ident: tuple, slots: dict) -> None:
    for index, entry, name in _named_items(entries):
        if isinstance(entry, dict) and "value" in entry:
            how = _WHOLE if looks_like_credential(entry.get("name", "")) else _TEXT
            _add(slots, ident + (name, "value"), path + (index, "value"), entry["value"], how)


def _collect_arguments(arguments: list, path: tuple, ident: tuple, slots: dict) -> None:
    for index, argument in enumerate(arguments):
        how = _EXPORTED if index and arguments[index - 1] == "-x" else _TEXT
        _add(slots, ident + (index,), path + (index,), argument, how)


def _add(slots: dict, ident: tuple, path: tuple, value, how: str) -> None:
    if how == _WHOLE or (isinstance(value, str) and _secret_spans(value, how)):
        slots[ident] = (path, how)


def _secret_spans(text: str, how: str) -> list[tuple[int, int]]:
    """Where the secrets in a string are (start, end), in order and not overlapping."""
    spans = [match.span(2) for match in _URL_PASSWORD.finditer(text)]
    spans += [match.span(2) for match in _EXPORT_OPTION.finditer(text) if looks_like_credential(match.group(1))]
    exported = _EXPORT_ARGUMENT.fullmatch(text) if how == _EXPORTED else None
    if exported and looks_like_credential(exported.group(1)):
        spans.append(exported.span(2))
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):  # a URL password inside an exported value is one secret
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _secret_part(value, how: str):
    """What is compared between the two sides: the whole value, or the secrets in a string."""
    if how == _WHOLE:
        return value
    return [value[start:end] for start, end in _secret_spans(value, how)]


def _hidden(value, how: str, marker: str):
    if how == _WHOLE:
        return marker
    for start, end in reversed(_secret_spans(value, how)):
        value = value[:start] + marker + value[end:]
    return value


def _named_items(items: list):
    """(index, item, id): an item's id is its `name` (with a count for repeats), else its index."""
    seen: dict[str, int] = {}
    for index, item in enumerate(items):
        name = item.get("name") if isinstance(item, dict) else None
        if isinstance(name, str):
            seen[name] = seen.get(name, 0) + 1
            yield index, item, name if seen[name] == 1 else f"{name}#{seen[name]}"
        else:
            yield index, item, f"#{index}"


def _get(doc, path: tuple):
    for part in path:
        doc = doc[part]
    return doc


def _set(doc, path: tuple, value) -> None:
    for part in path[:-1]:
        doc = doc[part]
    doc[path[-1]] = value


def mask_pair(before: dict | None, after: dict | None) -> tuple[dict | None, dict | None]:
    """Copies of both sides with every secret value replaced by a marker."""
    before_slots, after_slots = secret_slots(before), secret_slots(after)
    before_parts = {ident: _secret_part(_get(before, path), how) for ident, (path, how) in before_slots.items()}
    after_parts = {ident: _secret_part(_get(after, path), how) for ident, (path, how) in after_slots.items()}
    return (
        _masked(before, before_slots, before_parts, after_parts, MASK_BEFORE),
        _masked(after, after_slots, after_parts, before_parts, MASK_AFTER),
    )


def _masked(doc: dict | None, slots: dict, parts: dict, other_parts: dict, changed_marker: str) -> dict | None:
    """A copy of one side with its secrets hidden; those that differ on the other side get `changed_marker`."""
    masked = copy.deepcopy(doc)
    for ident, (path, how) in slots.items():
        changed = ident in other_parts and other_parts[ident] != parts[ident]
        _set(masked, path, _hidden(_get(doc, path), how, changed_marker if changed else MASK))
    return masked


def mask(doc: dict) -> dict:
    """A copy of one object with every secret value replaced by `***`."""
    return mask_pair(doc, None)[0]
