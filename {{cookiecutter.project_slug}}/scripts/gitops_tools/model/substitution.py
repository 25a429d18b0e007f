"""Flux's post-build variable substitution: which variables a rendered object asks Flux to fill in.

kustomize-controller runs envsubst over every object of a Flux Kustomization that has
`spec.postBuild` (fluxcd/pkg kustomize/v1.39.0, kustomize/kustomize_varsub.go; envsubst/v1.7.0,
parse/parse.go): only the braced form `${NAME}` is a variable, `$${NAME}` is an escaped literal, and
a variable with neither a value nor a default (`${NAME:=default}`, `${NAME:-default}`) becomes an
empty string unless the controller runs with strict substitution. An object labelled or annotated
`kustomize.toolkit.fluxcd.io/substitute: disabled` is left alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from .fields import mapping, sequence

DISABLE_KEY = "kustomize.toolkit.fluxcd.io/substitute"
# ${NAME}, ${NAME:=x}, ${NAME-x}, ${NAME:+x}, ...; not after another $ (the escape).
_REFERENCE = re.compile(r"(?<!\$)\$\{([_A-Za-z][_A-Za-z0-9]*)(:?[-=+?])?")
# Operators that give a value when the variable has none (`?` fails instead, which is no value).
_DEFAULTS = {"-", "=", "+", ":-", ":=", ":+"}

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
    name: str
    has_default: bool
    path: tuple


def references(value, path: tuple = ()) -> Iterator[Reference]:
    """Every `${NAME...}` in the strings of `value`, with where it is."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from references(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from references(item, (*path, index))
    elif isinstance(value, str):
        for match in _REFERENCE.finditer(value):
            yield Reference(match.group(1), match.group(2) in _DEFAULTS, path)


def substitution_disabled(doc: dict) -> bool:
    metadata = mapping(doc, "metadata")
    return any(mapping(metadata, part).get(DISABLE_KEY) == "disabled" for part in ("labels", "annotations"))


def post_build(kustomization: dict) -> dict | None:
    """spec.postBuild of a Flux Kustomization, or None when Flux substitutes nothing in it."""
    spec = mapping(kustomization, "spec")
    return spec.get("postBuild") if isinstance(spec.get("postBuild"), dict) else None


def sources(post: dict) -> list[dict]:
    return [s for s in sequence(post, "substituteFrom") if isinstance(s, dict)]
