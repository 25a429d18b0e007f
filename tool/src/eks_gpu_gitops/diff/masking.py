"""Hide secret values before anything is diffed or printed.

Where the secrets of an object are is core/credentials.secret_slots, applied to every object of every kind
(validate's rules read the same model):

- whole fields: every value of a Secret's `data` and `stringData`, of a Secret manifest nested at any depth
  (a HelmRelease's `values.extraObjects`, a List's items), of `stringData` and `binaryData` anywhere, of `data`
  under a credential-named key (`values.secrets.x.data`), and the last-applied annotation (it repeats the
  whole object);
- whole values named like a credential, at any depth: the string or number under a mapping key (a ConfigMap's
  `token`, HelmRelease `values.auth.password`, an annotation `example.com/api-token`), every item of a list
  under one, and the `value` of a `{name, value}` pair (env entries, wherever the list sits);
- the argument after a credential-named option in a list (`["--token", "abc"]`);
- a string that holds a Secret manifest (`kind: Secret` with `data` or `stringData`, a chart's template);
- the secret part of any other string (env values, `command`/`args`, `sh -c` scripts, ConfigMap
  files, eksctl `preBootstrapCommands`): the password of `scheme://user:password@host`, the
  value of `NAME=value` / `NAME: value` / `--name=value` / `--name value` when NAME looks like a
  credential (`export WANDB_API_KEY=...`, mpirun's `-x TOKEN=...`, `--password=...`), and the shapes
  credentials.mask_text knows;
- a value Flux's post-build substitution took from one of the repository's Secrets, wherever it landed
  (credentials.add_substituted_secrets).

Like Flux's own diff, a secret that is the same on both sides becomes `***`, one that changed
becomes `*** (before)` / `*** (after)`, so a reviewer sees that a secret changed without seeing it.
"""

from __future__ import annotations

import copy

from ..core.credentials import WHOLE, hide, is_secret, looks_like_credential, mask_text, secret_slots, secret_spans
from .model import Key, Report

__all__ = [
    "MASK",
    "MASK_AFTER",
    "MASK_BEFORE",
    "is_secret",
    "looks_like_credential",
    "mask",
    "mask_names",
    "mask_pair",
    "secret_slots",
]

MASK = "***"
MASK_BEFORE = "*** (before)"
MASK_AFTER = "*** (after)"


def _secret_part(value, how: str):
    """What is compared between the two sides: the whole value, or the secrets in a string."""
    if how == WHOLE:
        return value
    return [value[start:end] for start, end in secret_spans(value)]


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
        _set(masked, path, hide(_get(doc, path), how, changed_marker if changed else MASK))
    return masked


def mask(doc: dict) -> dict:
    """A copy of one object with every secret value replaced by `***`."""
    return mask_pair(doc, None)[0]


def mask_names(report: Report) -> Report:
    """`report` with its names as every format shows them: an object's namespace and name (and the namespace it
    moved from) and each notice's resource and message, credential shapes and values substituted from a Secret
    masked (Flux substitutes names too: `job-${TOKEN}`). The diffs are masked already (mask_pair)."""
    for environment in report.environments:
        for change in environment.changes:
            key = change.key
            change.key = Key(key.env, key.group, key.kind, mask_text(key.namespace), mask_text(key.name))
            change.from_namespace = mask_text(change.from_namespace)
        for notice in environment.notices:
            notice.resource, notice.message = mask_text(notice.resource), mask_text(notice.message)
    return report
