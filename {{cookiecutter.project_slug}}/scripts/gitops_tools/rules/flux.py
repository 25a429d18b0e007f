"""Flux substitution rules: what Flux's post-build step would fill in, and with what."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model import FluxKustomization, Scope, mapping
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


@dataclass
class _Values:
    """What a Flux Kustomization's postBuild gives values to."""

    names: set[str] = field(default_factory=set)
    known: bool = True  # False: a source the repository does not describe could give any name
    own_sources: list[int] = field(default_factory=list)  # substituteFrom entries it applies itself


def _keys(manifest) -> set[str]:
    return {str(key) for key in [*mapping(manifest.doc, "data"), *mapping(manifest.doc, "stringData")]}


def _values(scope: Scope, kustomization: FluxKustomization) -> _Values:
    post = post_build(kustomization.manifest.doc) or {}
    values = _Values({str(key) for key in mapping(post, "substitute")})
    namespace = kustomization.manifest.namespace or "default"
    for index, source in enumerate(sources(post)):
        kind, name = str(source.get("kind", "")), str(source.get("name", ""))

        def holds(manifest, kind=kind, name=name) -> bool:
            return (manifest.kind, manifest.name, manifest.namespace or "default") == (kind, name, namespace)

        others = [m for k in scope.kustomizations if k is not kustomization for m in k.objects if holds(m)]
        own = [m for m in kustomization.objects if holds(m)]
        if others or own:
            values.names |= _keys((others or own)[0])
            if own and not others:
                values.own_sources.append(index)
        elif (kind, name) == ("ConfigMap", CLUSTER_SETTINGS):
            values.names |= set(CLUSTER_VARIABLES)
        elif source.get("optional") is not True:
            values.known = False
    return values


def _substituted(kustomization: FluxKustomization):
    """(object, reference) for every ${...} Flux reads in what the Kustomization applies."""
    for manifest in kustomization.objects:
        if not substitution_disabled(manifest.doc):
            for reference in references(manifest.doc):
                yield manifest, reference


@rule(
    "flux-variable-unset",
    "error",
    requires=("flux",),
    description="A ${VARIABLE} meant for Flux has neither a value nor a default",
    remediation="Give it a value in the Flux Kustomization's postBuild (substitute, or a substituteFrom "
    f"source such as the {CLUSTER_SETTINGS} ConfigMap that scripts/cluster-settings writes), a default "
    "(${NAME:=value}), or escape a literal as $${NAME}.",
    docs=f"""A Flux Kustomization with `spec.postBuild` runs envsubst over every object it applies: each
      `${{NAME}}` takes its value from `postBuild.substitute` or a `substituteFrom` ConfigMap or Secret, and
      one with neither a value nor a default becomes an empty string (an FSx StorageClass without a subnet,
      a shell script whose `${{HOME}}` vanished). Values come from the repository's own ConfigMaps and
      Secrets and from the `{CLUSTER_SETTINGS}` ConfigMap, which holds
      {", ".join(f"`{name}`" for name in CLUSTER_VARIABLES)}; a Kustomization that also reads a source the
      repository does not describe is not checked. Without `postBuild` Flux substitutes nothing, so one of
      the `{CLUSTER_SETTINGS}` variables reaches the cluster as written (other `${{...}}`, such as a shell
      script's, are left alone there).""",
)
def flux_variable_unset(scope: Scope):
    for kustomization in scope.kustomizations:
        if post_build(kustomization.manifest.doc) is None:
            for manifest, reference in _substituted(kustomization):
                if reference.name in CLUSTER_VARIABLES:
                    yield Finding(
                        manifest,
                        f"{reference.text} reaches the cluster as written: Flux Kustomization "
                        f"{kustomization.name} has no postBuild",
                        reference.path,
                    )
            continue
        values = _values(scope, kustomization)
        if not values.known:
            continue
        for manifest, reference in _substituted(kustomization):
            if reference.name and not reference.has_default and reference.name not in values.names:
                yield Finding(
                    manifest,
                    f"{reference.text} has no value in Flux Kustomization {kustomization.name}'s postBuild "
                    "and no default, so Flux makes it empty",
                    reference.path,
                )


@rule(
    "flux-substitution-invalid",
    "error",
    requires=("flux",),
    description="Flux's post-build substitution would fail the whole Kustomization",
    remediation="Write variables as ${NAME}, ${NAME:=default} or ${NAME:-default} (escape a literal as "
    "$${...}), and apply a substituteFrom source in a Kustomization this one dependsOn.",
    docs="""Flux's envsubst refuses `${NAME-x}`, `${NAME+x}` (only the `:-`, `:+`, `:=`, `:?` and `=` forms
      take a default), `${1}` and `${ NAME }`; one such reference fails the whole Kustomization, so none of
      its objects is applied. A `substituteFrom` ConfigMap or Secret that the same Kustomization applies does
      not exist on a new cluster when Flux reads it, before applying anything: the Kustomization never gets
      applied.""",
)
def flux_substitution_invalid(scope: Scope):
    for kustomization in scope.kustomizations:
        if post_build(kustomization.manifest.doc) is None:
            continue
        for index in _values(scope, kustomization).own_sources:
            source = sources(post_build(kustomization.manifest.doc))[index]
            yield Finding(
                kustomization.manifest,
                f"substituteFrom {source.get('kind')}/{source.get('name')} is applied by {kustomization.name} "
                "itself, so on a new cluster it does not exist yet when Flux substitutes",
                ("spec", "postBuild", "substituteFrom", index),
            )
        for manifest, reference in _substituted(kustomization):
            if not reference.name:
                yield Finding(
                    manifest, f"Flux cannot parse {reference.text}, so {kustomization.name} fails", reference.path
                )


pruning = category("Ordering")  # with the other rules about the Flux Kustomizations themselves
# Objects that hold or reserve data and cost: left behind, they keep a volume (and its FSx file system) alive.
_STATEFUL = {("", "PersistentVolumeClaim"), ("", "PersistentVolume"), ("", "Namespace")}
_STATEFUL |= {("storage.k8s.io", "StorageClass")}


@pruning(
    "flux-prune-disabled-with-state",
    "warning",
    requires=("flux",),
    description="A Flux Kustomization with prune: false applies volumes, claims, namespaces or storage classes",
    remediation="Set spec.prune: true, and protect an object that must outlive its removal from the repository "
    "with the annotation kustomize.toolkit.fluxcd.io/prune: disabled (a Retain reclaim policy keeps the data).",
    docs="""With `prune: false`, kustomize-controller never deletes what it applied: an object removed from
      the repository, or renamed (a new namespace, a claim with another name), stays on the cluster, with
      the volume and the FSx file system behind it, and keeps costing until someone deletes it by hand.
      `scripts/diff` shows such a removal as a deletion the cluster never makes. Flux's way to keep one
      object is the `kustomize.toolkit.fluxcd.io/prune: disabled` annotation on that object.""",
)
def flux_prune_disabled_with_state(scope: Scope):
    for kustomization in scope.kustomizations:
        if mapping(kustomization.manifest.doc, "spec").get("prune") is not False:
            continue
        stateful = sorted(m.resource for m in kustomization.objects if m.group_kind in _STATEFUL)
        if stateful:
            listed = ", ".join(stateful[:3]) + (f" and {len(stateful) - 3} more" if len(stateful) > 3 else "")
            yield Finding(
                kustomization.manifest,
                f"prune is false, so {listed} of {kustomization.name} stay on the cluster when removed "
                "from the repository",
                ("spec", "prune"),
            )
