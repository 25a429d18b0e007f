"""Flux substitution rules: what Flux's post-build step would fill in, and with what."""

from __future__ import annotations

from ..model import Scope, mapping
from ..model.substitution import (
    CLUSTER_SETTINGS,
    CLUSTER_VARIABLES,
    post_build,
    references,
    sources,
    substitution_disabled,
)
from .registry import Finding, category

rule = category("Flux substitution")


def _keys_in_git(scope: Scope, kind: str, name: str, namespace: str) -> set[str] | None:
    """The keys of a ConfigMap or Secret the repository itself holds, None when it holds none."""
    for manifest in scope.of(kind):
        if manifest.name == name and (manifest.namespace or "default") == namespace:
            keys = set(mapping(manifest.doc, "data")) | set(mapping(manifest.doc, "stringData"))
            return {str(key) for key in keys}
    return None


def _provided(scope: Scope, kustomization) -> set[str] | None:
    """The variables a Flux Kustomization's postBuild gives a value; None when a source the
    repository does not describe could give any."""
    post = post_build(kustomization.manifest.doc) or {}
    provided = {str(key) for key in mapping(post, "substitute")}
    for source in sources(post):
        kind, name = str(source.get("kind", "")), str(source.get("name", ""))
        keys = _keys_in_git(scope, kind, name, kustomization.manifest.namespace or "default")
        if keys is None and (kind, name) == ("ConfigMap", CLUSTER_SETTINGS):
            keys = set(CLUSTER_VARIABLES)
        if keys is None and source.get("optional") is not True:
            return None
        provided |= keys or set()
    return provided


@rule(
    "flux-variable-unset",
    "error",
    requires=("flux",),
    description="A ${VARIABLE} that Flux substitutes has neither a value nor a default",
    remediation="Give it a value in the Flux Kustomization's postBuild (substitute, or a substituteFrom "
    f"source such as the {CLUSTER_SETTINGS} ConfigMap that scripts/cluster-settings writes), a default "
    "(${NAME:=value}), or escape a literal as $${NAME}.",
    docs=f"""A Flux Kustomization with `spec.postBuild` runs envsubst over every object it applies: each
      `${{NAME}}` takes its value from `postBuild.substitute` or a `substituteFrom` ConfigMap or Secret, and
      one with neither a value nor a default becomes an empty string (an FSx StorageClass without a subnet,
      a shell script whose `${{HOME}}` vanished). Values come from the repository's own ConfigMaps and
      Secrets, and from the `{CLUSTER_SETTINGS}` ConfigMap, which holds
      {", ".join(f"`{name}`" for name in CLUSTER_VARIABLES)}. A Kustomization that also reads a source the
      repository does not describe is not checked.""",
)
def flux_variable_unset(scope: Scope):
    for kustomization in scope.kustomizations:
        if post_build(kustomization.manifest.doc) is None:
            continue
        provided = _provided(scope, kustomization)
        if provided is None:
            continue
        for manifest in kustomization.objects:
            if substitution_disabled(manifest.doc):
                continue
            for reference in references(manifest.doc):
                if not reference.has_default and reference.name not in provided:
                    yield Finding(
                        manifest,
                        f"${{{reference.name}}} has no value in Flux Kustomization {kustomization.name}'s postBuild "
                        "and no default, so Flux makes it empty",
                        reference.path,
                    )
