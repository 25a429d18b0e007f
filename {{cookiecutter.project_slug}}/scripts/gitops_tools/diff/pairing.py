"""Pair the objects of two renders and diff each pair.

Objects pair by (environment, API group, kind, namespace, name). Both sides are compared as
parsed data, so comments, quoting, indentation and key order never show as a change; a
changed object's diff is made from a canonical YAML dump (sorted keys) of masked copies.
An object that moves to another Flux Kustomization is a change even with equal content.
"""

from __future__ import annotations

import difflib
import json

import yaml

from ..model import Environment, Manifest
from .masking import mask_pair
from .model import ADDED, CHANGED, REMOVED, Key, ObjectChange

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


def pair(base: list[Environment], head: list[Environment], context: int = 3) -> list[ObjectChange]:
    """Every added, removed and changed object, in a stable order."""
    before, after = index(base), index(head)
    changes = []
    for key in sorted(before.keys() | after.keys(), key=_order(before, after)):
        old, new = before.get(key), after.get(key)
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
