"""Flux substitution rules: what Flux's post-build step would fill in, and with what."""

from __future__ import annotations

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


def _defined(scope: Scope) -> set[str]:
    """The names some postBuild of the environment gives a value, and the cluster-settings ones."""
    names = set(CLUSTER_VARIABLES)
    for kustomization in scope.kustomizations:
        if kustomization.substitution is not None:
            names |= kustomization.substitution.defined
    return names


def _as_written(kustomization: FluxKustomization, defined: set[str]):
    """(object, reference, why) for every ${NAME} of a defined name that reaches the cluster as written."""
    record = kustomization.substitution
    for manifest in kustomization.objects:
        disabled = substitution_disabled(manifest.doc)
        if record is not None and record.ran and not disabled:
            continue
        if record is None:
            why = f"Flux Kustomization {kustomization.name} has no postBuild"
        elif disabled:
            why = "substitution is disabled on this object"
        else:
            why = f"Flux Kustomization {kustomization.name}'s postBuild gives no variable (substituteStrategy)"
        for reference in references(manifest.doc):
            if reference.name in defined or (record is not None and not disabled and reference.has_default):
                yield manifest, reference, why


@rule(
    "flux-variable-unset",
    "error",
    requires=("flux",),
    premise="A Flux Kustomization applies an object holding a ${NAME} that its postBuild gives no value and no "
    "default, or a ${NAME} that some postBuild of the environment (or the cluster-settings ConfigMap) defines "
    "while the object's own Kustomization substitutes nothing there.",
    consequence="flux",
    description="A ${VARIABLE} meant for Flux has no value, or reaches the cluster as written",
    remediation="Give it a value in the Flux Kustomization's postBuild (substitute, or a substituteFrom "
    f"source such as the {CLUSTER_SETTINGS} ConfigMap that scripts/cluster-settings writes), a default "
    "(${NAME:=value}), or escape a literal as $${NAME}.",
    docs=f"""A Flux Kustomization with `spec.postBuild` runs envsubst over every object it applies: each
      `${{NAME}}` takes its value from `postBuild.substitute` or a `substituteFrom` ConfigMap or Secret.
      One with neither a value nor a default fails the whole Kustomization (kustomize-controller v1.9
      substitutes strictly by default; without that it would become an empty string: an FSx StorageClass
      without a subnet, a shell script whose `${{HOME}}` vanished). Values come from the repository's own
      ConfigMaps and Secrets and from the `{CLUSTER_SETTINGS}` ConfigMap, which holds
      {", ".join(f"`{name}`" for name in CLUSTER_VARIABLES)}; a Kustomization that also reads a source the
      repository does not describe is not checked. A variable that some postBuild of the environment
      defines (or one of the `{CLUSTER_SETTINGS}` ones) also reaches the cluster as written where Flux
      substitutes nothing: in a Kustomization without `postBuild`, in an object with substitution
      disabled, or where postBuild gives no variable at all (substituteStrategy WithVariables): the object
      then holds the text `${{NAME}}` where a value was meant. Other `${{...}}` there, such as a shell
      script's, are left alone. Strict substitution is kustomize-controller's default from v1.9
      (internal/features/features.go, StrictPostBuildSubstitutions).""",
)
def flux_variable_unset(scope: Scope):
    defined = _defined(scope)
    for kustomization in scope.kustomizations:
        for manifest, reference, why in _as_written(kustomization, defined):
            yield Finding(manifest, f"{reference.text} reaches the cluster as written: {why}", reference.path)
        record = kustomization.substitution
        for manifest, path, text in record.unset if record is not None else ():
            yield Finding(
                manifest,
                f"{text} has no value in Flux Kustomization {kustomization.name}'s postBuild and no default, "
                "so Flux fails the Kustomization (strict substitution)",
                path,
            )


@rule(
    "flux-substitution-invalid",
    "error",
    requires=("flux",),
    premise="A Flux Kustomization has spec.postBuild, and an object it applies holds a ${...} envsubst cannot "
    "parse, or postBuild names a variable Flux refuses, or a substituted object is no longer YAML, or a "
    "substituteFrom ConfigMap or Secret that is not optional is applied only by this same Kustomization.",
    consequence="flux",
    description="Flux's post-build substitution would fail the whole Kustomization",
    remediation="Write variables as ${NAME}, ${NAME:=default} or ${NAME:-default} (escape a literal as "
    "$${...}), name variables [_a-zA-Z][_a-zA-Z0-9]*, and apply a substituteFrom source in a Kustomization "
    "this one dependsOn.",
    docs="""Flux's envsubst (fluxcd/pkg/envsubst v1.7.1, which the render runs) refuses what it cannot parse (an
      unclosed `${NAME`, `${}`, `${ NAME }`), and a postBuild variable (a `substitute` key, or a key of a
      `substituteFrom` ConfigMap or Secret) whose name is not `[_a-zA-Z][_a-zA-Z0-9]*`; a substituted
      object that is no longer valid YAML (a value with `: ` in it) fails too. One such problem fails the
      whole Kustomization, so none of its objects is applied. A `substituteFrom` ConfigMap or Secret that
      the same Kustomization applies does not exist on a new cluster when Flux reads it, before applying
      anything: the Kustomization never gets applied. One marked `optional: true` is read as empty when it
      is absent (fluxcd/pkg/kustomize v1.35.4 kustomize_varsub.go), so it is not reported.""",
)
def flux_substitution_invalid(scope: Scope):
    for kustomization in scope.kustomizations:
        post = post_build(kustomization.manifest.doc)
        if post is None:
            continue
        for index, source in enumerate(sources(post)):
            if source.get("optional") is not True and _applied_by_itself(scope, kustomization, source):
                yield Finding(
                    kustomization.manifest,
                    f"substituteFrom {source.get('kind')}/{source.get('name')} is applied by {kustomization.name} "
                    "itself, so on a new cluster it does not exist yet when Flux substitutes",
                    ("spec", "postBuild", "substituteFrom", index),
                )
        record = kustomization.substitution
        for manifest, path, message in record.errors if record is not None else ():
            yield Finding(manifest, f"{message}, so {kustomization.name} fails", path)


def _applied_by_itself(scope: Scope, kustomization: FluxKustomization, source: dict) -> bool:
    namespace = kustomization.manifest.namespace or "default"
    wanted = (str(source.get("kind", "")), str(source.get("name", "")), namespace)

    def holds(manifest) -> bool:
        return (manifest.kind, manifest.name, manifest.namespace or "default") == wanted

    others = any(holds(m) for k in scope.kustomizations if k is not kustomization for m in k.objects)
    return not others and any(holds(m) for m in kustomization.objects)


pruning = category("Ordering")  # with the other rules about the Flux Kustomizations themselves
# Objects that hold or reserve data and cost: left behind, they keep a volume (and its FSx file system) alive.
_STATEFUL = {("", "PersistentVolumeClaim"), ("", "PersistentVolume"), ("", "Namespace")}
_STATEFUL |= {("storage.k8s.io", "StorageClass")}


@pruning(
    "flux-prune-disabled-with-state",
    "warning",
    requires=("flux",),
    premise="A Flux Kustomization sets spec.prune: false and applies a PersistentVolumeClaim, PersistentVolume, "
    "Namespace or StorageClass.",
    consequence="cost",
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


helm = category("Ordering")  # with the other rules about what Flux applies and whether it can


@helm(
    "helm-release-fails",
    "error",
    requires=("flux",),
    premise="A HelmRelease's chart was fetched from a source the repository holds and rendered as helm-controller "
    "installs it, and the fetch, the values or a template failed.",
    consequence="flux",
    description="A HelmRelease fails to install: its chart or version does not exist, or the chart does not render",
    remediation="Fix the chart name or version (or the source's URL), or the values the chart refuses; the "
    "message is helm-controller's or source-controller's.",
    docs="""Every HelmRelease of an environment is rendered as helm-controller installs it: its chart fetched
      from its source as source-controller fetches it, its values composed from spec.values and valuesFrom, and
      Helm's install run client-side (render/helm_release.py). A chart or version its source does not have,
      values the chart's schema refuses, or a template that fails makes the HelmRelease fail on the cluster
      the same way: nothing it installs is applied, and whatever depends on it waits. A chart that cannot be
      fetched here (offline, a repository that cannot be reached, a source the repository does not hold) is
      a note, not this finding.""",
)
def helm_release_fails(scope: Scope):
    for release in scope.releases:
        if release.error:
            yield Finding(release.manifest, release.error, ("spec",))
