"""Flux's post-build variable substitution: which variables a rendered object asks Flux to fill in.

The substitution itself runs in the helper with Flux's own library (render/post_build.py). What is here reads
objects for the rules, where Flux does not substitute (no postBuild, substitution disabled) or to say where a
reference is, the way fluxcd/pkg/envsubst v1.7.1 (kustomize-controller v1.9.5's) reads them:
- only the braced form is a variable; `$$` is an escaped `$`, so `$${NAME}` is literal text and
  `$$${NAME}` a `$` followed by a variable;
- `${NAME=x}`, `${NAME:=x}`, `${NAME:-x}`, `${NAME:?x}` and `${NAME:+x}` give a value when NAME has
  none; other operators (`${NAME:1}`, `${NAME,}`, `${NAME/a/b}`, `${#NAME}`) do not;
- a variable with neither a value nor a default fails the whole Kustomization (strict substitution, on
  by default since kustomize-controller v1.9). An object labelled or annotated
  `kustomize.toolkit.fluxcd.io/substitute: disabled` is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from .fields import mapping, sequence, strings

DISABLE_KEY = "kustomize.toolkit.fluxcd.io/substitute"
# Any braced reference, whatever substitutes it (Flux, or envsubst run on a template read in folder mode).
_BRACED = re.compile(r"\$\{[^}]*\}")
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


def holds_variable(value) -> bool:
    """Whether a value, or any string inside it, still holds a ${...} reference."""
    if isinstance(value, str):
        return _BRACED.search(value) is not None
    if isinstance(value, dict):
        return any(holds_variable(item) for item in value.values())
    if isinstance(value, list):
        return any(holds_variable(item) for item in value)
    return False


@dataclass
class Unresolved:
    """A substituteFrom source whose values only the cluster has."""

    source: str  # "ConfigMap flux-system/cluster-settings"
    why: str
    names: set[str] | None  # the variables it holds, None when unknown (it may hold any)


@dataclass
class Substitution:
    """What post_build.py did to the objects of one Flux Kustomization with spec.postBuild."""

    ran: bool = False  # False: no variables and substituteStrategy WithVariables, so Flux changed nothing
    defined: set[str] = field(default_factory=set)  # names with a value, or with one only the cluster has
    unresolved: list[Unresolved] = field(default_factory=list)
    # (object, field path, reference as written): a ${NAME} with no value and no default (left as written).
    unset: list[tuple] = field(default_factory=list)
    # (object, field path, reference as written): left as written, its value is on the cluster only.
    left: list[tuple] = field(default_factory=list)
    # (object, field path, message): what makes Flux fail the whole Kustomization.
    errors: list[tuple] = field(default_factory=list)


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
