"""Flux's post-build variable substitution: which variables a rendered object asks Flux to fill in.

kustomize-controller runs envsubst over every object of a Flux Kustomization that has
`spec.postBuild` (fluxcd/pkg kustomize/v1.39.0, kustomize/kustomize_varsub.go; envsubst/v1.7.0,
parse/parse.go and template.go), read here the same way:
- only the braced form is a variable; `$$` is an escaped `$`, so `$${NAME}` is literal text and
  `$$${NAME}` a `$` followed by a variable;
- `${NAME=x}`, `${NAME:=x}`, `${NAME:-x}`, `${NAME:?x}` and `${NAME:+x}` give a value when NAME has
  none; other operators (`${NAME:1}`, `${NAME,}`, `${NAME/a/b}`, `${#NAME}`) do not;
- what the parser refuses (`${NAME-x}`, `${NAME+x}`, `${1}`, `${ NAME }`) fails the whole
  Kustomization;
- a variable with neither a value nor a default becomes an empty string, unless the controller runs
  with strict substitution. An object labelled or annotated `kustomize.toolkit.fluxcd.io/substitute:
  disabled` is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from .fields import mapping, sequence, strings

DISABLE_KEY = "kustomize.toolkit.fluxcd.io/substitute"
_OPENING = re.compile(r"(\$+)\{")
_NAME = re.compile(r"[_A-Za-z][_A-Za-z0-9]*")
_DEFAULTS = ("=", ":=", ":-", ":?", ":+")
_OTHER_FUNCTIONS = ("}", ":", ",", "^", "/", "#", "%")

# The per-cluster values no repository holds (the FSx file system's subnet and security group
# exist only once `eksctl create cluster` has made the VPC). scripts/cluster-settings writes them
# into this ConfigMap in flux-system; the Flux Kustomizations read it with postBuild.substituteFrom.
CLUSTER_SETTINGS = "cluster-settings"
CLUSTER_VARIABLES = {
    "FSX_SUBNET_ID": "the cluster's private subnet in the GPU nodes' availability zone",
    "FSX_SECURITY_GROUP_ID": "the EKS cluster security group, which every node is in",
}


@dataclass(frozen=True)
class Reference:
    name: str  # "" when Flux cannot parse it
    has_default: bool
    path: tuple
    text: str  # as written, from `${` on


def _reference(text: str, start: int, path: tuple) -> Reference:
    """The reference whose `${` is at `start`."""
    body = text[start + 2 :]
    end = text.find("}", start)
    shown = text[start : end + 1 if end >= 0 else len(text)][:40]
    if body.startswith("#"):
        name = _NAME.match(body, 1)
        return Reference(name.group() if name else "", False, path, shown)
    name = _NAME.match(body)
    if not name:
        return Reference("", False, path, shown)
    rest = body[name.end() :]
    if rest.startswith(_DEFAULTS):
        return Reference(name.group(), True, path, shown)
    if rest.startswith(_OTHER_FUNCTIONS):
        return Reference(name.group(), False, path, shown)
    return Reference("", False, path, shown)


def references(value) -> Iterator[Reference]:
    """Every `${...}` Flux would read in `value` (keys included), with where it is."""
    for path, text in strings(value, keys=True):
        for match in _OPENING.finditer(text):
            if len(match.group(1)) % 2 == 1:  # an even run of $ is only escapes
                yield _reference(text, match.end() - 2, path)


def substitution_disabled(doc: dict) -> bool:
    metadata = mapping(doc, "metadata")
    return any(mapping(metadata, part).get(DISABLE_KEY) == "disabled" for part in ("labels", "annotations"))


def post_build(kustomization: dict) -> dict | None:
    """spec.postBuild of a Flux Kustomization, or None when Flux substitutes nothing in it."""
    spec = mapping(kustomization, "spec")
    return spec.get("postBuild") if isinstance(spec.get("postBuild"), dict) else None


def sources(post: dict) -> list[dict]:
    return [s for s in sequence(post, "substituteFrom") if isinstance(s, dict)]
