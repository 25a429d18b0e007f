"""Hide secret values before anything is diffed or printed.

Masked: every value of a Secret's `data` and `stringData` (and its last-applied annotation,
which repeats them), and the literal `value` of any `env` entry whose name looks like a
credential, wherever the env list sits (Pods, Deployments, MPIJob replica templates,
HelmRelease values...). Like Flux's own diff, a value that is the same on both sides
becomes `***`, one that changed becomes `*** (before)` / `*** (after)`, so a reviewer sees
that a secret changed without seeing it.
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
    "PASSW", "PASSPHRASE", "PWD", "SECRET", "TOKEN", "KEY", "CREDENTIAL", "AUTH",
    "PRIVATE", "CERT", "COOKIE", "SALT", "SIGNATURE", "DSN", "CONNECTIONSTRING",
)
_SEPARATORS = re.compile(r"[^A-Z0-9]")
_SECRET_FIELDS = ("data", "stringData")
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def looks_like_credential(name: str) -> bool:
    squeezed = _SEPARATORS.sub("", str(name).upper())
    return any(word in squeezed for word in _CREDENTIAL_WORDS)


def is_secret(doc: dict) -> bool:
    return doc.get("kind") == "Secret" and "/" not in str(doc.get("apiVersion", "v1"))


def secret_slots(doc: dict | None) -> dict[tuple, tuple]:
    """Where the secret values of `doc` are: {stable id: path to the value}.

    The id names a value the same way on both sides (env entries by container and variable
    name, not by list position), so before and after compare the right pair.
    """
    if not isinstance(doc, dict):
        return {}
    slots: dict[tuple, tuple] = {}
    if is_secret(doc):
        for field in _SECRET_FIELDS:
            values = doc.get(field)
            if isinstance(values, dict):
                for key in values:
                    slots[(field, str(key))] = (field, key)
            elif values is not None:
                slots[(field,)] = (field,)
        metadata = doc.get("metadata")
        annotations = metadata.get("annotations") if isinstance(metadata, dict) else None
        if isinstance(annotations, dict) and _LAST_APPLIED in annotations:
            slots[("annotation", _LAST_APPLIED)] = ("metadata", "annotations", _LAST_APPLIED)
    _collect_env(doc, (), (), slots)
    return slots


def _collect_env(node, path: tuple, ident: tuple, slots: dict) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "env" and isinstance(value, list):
                _collect_env_list(value, path + (key,), ident + (key,), slots)
            _collect_env(value, path + (key,), ident + (key,), slots)
    elif isinstance(node, list):
        for index, item, name in _named_items(node):
            _collect_env(item, path + (index,), ident + (name,), slots)


def _collect_env_list(entries: list, path: tuple, ident: tuple, slots: dict) -> None:
    for index, entry, name in _named_items(entries):
        if isinstance(entry, dict) and "value" in entry and looks_like_credential(entry.get("name", "")):
            slots[ident + (name, "value")] = path + (index, "value")


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
    before_values = {ident: _get(before, path) for ident, path in before_slots.items()}
    after_values = {ident: _get(after, path) for ident, path in after_slots.items()}
    masked_before = copy.deepcopy(before)
    masked_after = copy.deepcopy(after)
    for ident, path in before_slots.items():
        changed = ident in after_values and after_values[ident] != before_values[ident]
        _set(masked_before, path, MASK_BEFORE if changed else MASK)
    for ident, path in after_slots.items():
        changed = ident in before_values and before_values[ident] != after_values[ident]
        _set(masked_after, path, MASK_AFTER if changed else MASK)
    return masked_before, masked_after


def mask(doc: dict) -> dict:
    """A copy of one object with every secret value replaced by `***`."""
    return mask_pair(doc, None)[0]
