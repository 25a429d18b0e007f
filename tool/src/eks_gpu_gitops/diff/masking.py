"""Hide secret values before anything is diffed or printed.

What is secret is data, in the tables below, applied to every object of every kind:

- whole fields: every value of a Secret's `data` and `stringData`, every `binaryData` value (of any
  kind), and the last-applied annotation (it repeats the whole object);
- whole values named like a credential: the string or number under a mapping key (a ConfigMap's
  `token`, HelmRelease `values.db.password`, an annotation `example.com/api-token`) and the
  `value` of a `{name, value}` pair (env entries, wherever the list sits);
- the argument after a credential-named option in a list (`["--token", "abc"]`);
- the secret part of any other string (env values, `command`/`args`, `sh -c` scripts, ConfigMap
  files, eksctl `preBootstrapCommands`): the password of `scheme://user:password@host`, and the
  value of `NAME=value` / `NAME: value` / `--name=value` / `--name value` when NAME looks like a
  credential (`export WANDB_API_KEY=...`, mpirun's `-x TOKEN=...`, `--password=...`);
- a value Flux's post-build substitution took from one of the repository's Secrets, wherever it landed
  (credentials.add_substituted_secrets).

Like Flux's own diff, a secret that is the same on both sides becomes `***`, one that changed
becomes `*** (before)` / `*** (after)`, so a reviewer sees that a secret changed without seeing it.
"""

from __future__ import annotations

import copy

from ..core.credentials import OPTION, is_substituted_secret, looks_like_credential, secret_spans

MASK = "***"
MASK_BEFORE = "*** (before)"
MASK_AFTER = "*** (after)"

# How much of a value is secret: all of it, or the secret parts of a string.
_WHOLE, _TEXT = "whole", "text"
_SECRET_FIELDS = ("data", "stringData")
_ALWAYS_SECRET_FIELDS = ("binaryData",)
_LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def is_secret(doc: dict) -> bool:
    return doc.get("kind") == "Secret" and "/" not in str(doc.get("apiVersion", "v1"))


def secret_slots(doc: dict | None) -> dict[tuple, tuple[tuple, str]]:
    """Where the secrets of `doc` are: {stable id: (path to the value, how much of it is secret)}.

    The id names a value the same way on both sides (list items by their `name`, not by
    position), so before and after compare the right pair.
    """
    if not isinstance(doc, dict):
        return {}
    slots: dict[tuple, tuple[tuple, str]] = {}
    fields = (*(_SECRET_FIELDS if is_secret(doc) else ()), *_ALWAYS_SECRET_FIELDS)
    for field in fields:
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
    _collect(doc, (), (), slots, {path for path, _ in slots.values()})
    return slots


def _collect(node, path: tuple, ident: tuple, slots: dict, taken: set, whole_items: bool = False) -> None:
    """Adds the slots under `node`; `whole_items`: the node is a list under a credential name."""
    if path in taken:
        return
    if isinstance(node, dict):
        named = looks_like_credential(node.get("name", "")) if isinstance(node.get("name"), str) else False
        for key, value in node.items():
            whole = looks_like_credential(key) or (key == "value" and named)
            _collect_value(value, path + (key,), ident + (key,), slots, taken, whole)
    elif isinstance(node, list):
        previous = None
        for index, item, name in _named_items(node):
            option = OPTION.fullmatch(previous) if isinstance(previous, str) else None
            whole = whole_items or (bool(option) and looks_like_credential(option.group(1)))
            _collect_value(item, path + (index,), ident + (name,), slots, taken, whole)
            previous = item


def _collect_value(value, path: tuple, ident: tuple, slots: dict, taken: set, whole: bool) -> None:
    if isinstance(value, (dict, list)):
        _collect(value, path, ident, slots, taken, whole and isinstance(value, list))
    elif path in taken or value is None or isinstance(value, bool):
        return
    elif whole or (not isinstance(value, str) and is_substituted_secret(value)):
        slots[ident] = (path, _WHOLE)
    elif isinstance(value, str) and secret_spans(value):
        slots[ident] = (path, _TEXT)


def _secret_part(value, how: str):
    """What is compared between the two sides: the whole value, or the secrets in a string."""
    if how == _WHOLE:
        return value
    return [value[start:end] for start, end in secret_spans(value)]


def _hidden(value, how: str, marker: str):
    if how == _WHOLE:
        return marker
    for start, end in reversed(secret_spans(value)):
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
