"""Pair the objects of two renders and diff each pair.

Objects pair by (environment, API group, kind, namespace, name). Both sides are compared as
parsed data, so comments, quoting, indentation and key order never show as a change; a
changed object's diff is made from a canonical YAML dump (sorted keys) of masked copies.
An object that moves to another Flux Kustomization is a change even with equal content.

A move to another namespace (an overlay's `namespace:` or a Flux Kustomization's
`targetNamespace` that changes) is one "moved" entry per object instead of a removal and an
addition: its diff shows `namespace: a -> b` and whatever else changed. A removed object and an
added one pair as a move when all of these hold:

- same environment, API group, kind and name, and both have a namespace (cluster-scoped objects,
  the Namespace itself included, stay removed and added: a new name is another object; so does
  an object that only gains or loses a namespace);
- the object is gone from its old namespace (only a removed object pairs: one that is still
  there and also appears elsewhere is a copy, shown as added);
- the pairing is unambiguous: exactly one removed and one added object of that environment,
  group, kind and name (two namespaces renamed at once with same-named objects in each stay
  removed and added).

On the cluster a move is still a deletion and a creation (a namespace is part of an object's
identity): the old object is pruned with its data, which the notices say (notices/deletions.py).
"""

from __future__ import annotations

import difflib
import json

import yaml

from ..model import Environment, Manifest
from .masking import mask_pair
from .model import ADDED, CHANGED, MOVED, REMOVED, Key, ObjectChange

_BaseDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_BaseDumper):
    """Multi-line strings as `|` blocks, so a changed line of a script diffs as one line."""


def _represent_str(dumper, value: str):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)


def canonical_yaml(doc: dict | None) -> list[str]:
    if doc is None:
        return []
    text = yaml.dump(doc, Dumper=_Dumper, sort_keys=True, default_flow_style=False, allow_unicode=True, width=1_000_000)
    return text.splitlines()


def _fingerprint(doc: dict) -> str:
    # JSON keeps 1, "1" and true apart (Python's == does not) and ignores key order when sorted.
    return json.dumps(doc, sort_keys=True, default=str)


def objects_of(environment: Environment) -> list[Manifest]:
    """Everything the diff covers: what Flux applies, plus the eksctl ClusterConfig."""
    found = list(environment.objects)
    if environment.cluster_config is not None:
        found.append(environment.cluster_config)
    return found


def index(environments: list[Environment]) -> dict[Key, Manifest]:
    """Objects by key. A key seen twice (the same object in two places) gets a numbered name,
    so both copies are still compared instead of one hiding the other."""
    found: dict[Key, Manifest] = {}
    for environment in environments:
        for manifest in objects_of(environment):
            key = Key.of(manifest)
            copy_number = 1
            while key in found:
                copy_number += 1
                base = Key.of(manifest)
                key = Key(base.env, base.group, base.kind, base.namespace, f"{base.name} (copy {copy_number})")
            found[key] = manifest
    return found


def unified(before: dict | None, after: dict | None, context: int) -> tuple[str, int, int]:
    """Hunks of the masked objects (no file header lines), with added and deleted line counts."""
    masked_before, masked_after = mask_pair(before, after)
    lines = list(
        difflib.unified_diff(canonical_yaml(masked_before), canonical_yaml(masked_after), n=context, lineterm="")
    )[2:]
    additions = sum(1 for line in lines if line.startswith("+"))
    deletions = sum(1 for line in lines if line.startswith("-"))
    return "\n".join(lines), additions, deletions


def namespace_moves(before: dict[Key, Manifest], after: dict[Key, Manifest]) -> dict[Key, Key]:
    """{head key: base key} of the objects that move to another namespace (the rules above)."""

    def by_identity(keys) -> dict[tuple, list[Key]]:
        found: dict[tuple, list[Key]] = {}
        for key in keys:
            if key.namespace:
                found.setdefault((key.env, key.group, key.kind, key.name), []).append(key)
        return found

    gone = by_identity(key for key in before if key not in after)
    new = by_identity(key for key in after if key not in before)
    return {
        new[identity][0]: old[0] for identity, old in gone.items() if len(old) == 1 and len(new.get(identity, ())) == 1
    }


def pair(base: list[Environment], head: list[Environment], context: int = 3) -> list[ObjectChange]:
    """Every added, removed, changed and moved object, in a stable order."""
    before, after = index(base), index(head)
    moves = namespace_moves(before, after)
    moved_away = set(moves.values())
    changes = []
    for key in sorted((before.keys() - moved_away) | after.keys(), key=_order(before, after)):
        old, new = before.get(moves.get(key, key)), after.get(key)
        if key in moves:
            text, additions, deletions = unified(old.doc, new.doc, context)
            changes.append(
                ObjectChange(
                    key=key,
                    status=MOVED,
                    before=old,
                    after=new,
                    diff=text,
                    additions=additions,
                    deletions=deletions,
                    from_namespace=moves[key].namespace,
                )
            )
            continue
        same = old is not None and new is not None and _fingerprint(old.doc) == _fingerprint(new.doc)
        if same and old.source == new.source:
            continue
        status = ADDED if old is None else REMOVED if new is None else CHANGED
        # An object that only moved to another Flux Kustomization is a change with an empty diff.
        text, additions, deletions = (
            ("", 0, 0) if same else unified(old.doc if old else None, new.doc if new else None, context)
        )
        changes.append(
            ObjectChange(
                key=key, status=status, before=old, after=new, diff=text, additions=additions, deletions=deletions
            )
        )
    return changes


def _order(before: dict[Key, Manifest], after: dict[Key, Manifest]):
    def sort_key(key: Key):
        manifest = after.get(key) or before[key]
        # Per environment, grouped by owner (Flux Kustomization, or eksctl last), then by name.
        owner = (manifest.source == "eksctl", manifest.source)
        return (key.env, owner, key.kind, key.namespace, key.name, key.group)

    return sort_key
