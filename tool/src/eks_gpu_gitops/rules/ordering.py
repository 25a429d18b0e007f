"""Ordering rules over the Flux graph: paths, dependsOn, sources, and CRDs before their resources.

Where a CRD comes from:
- a CustomResourceDefinition in a Flux Kustomization's rendered output;
- a source that cannot be rendered offline, listed in REMOTE_PROVIDERS below (or in platform.yaml
  under `crd_providers:`, same shape): a nested Flux Kustomization whose GitRepository or
  OCIRepository URL matches `url`, or a HelmRelease of chart `chart`, provides `provides`;
- Flux's own kinds, installed by `flux bootstrap` before anything in clusters/<env>/.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..model import BUILTIN_GROUPS, FLUX_KUSTOMIZATION, FluxKustomization, Manifest, Scope, mapping, sequence
from ..model.flux_sources import EXTERNAL_ARTIFACT, Sources, references
from .registry import Finding, category

rule = category("Ordering")

REMOTE_PROVIDERS = (
    # The MPI operator's kustomize overlays (manifests/base holds kubeflow.org_mpijobs.yaml).
    {"url": "github.com/kubeflow/mpi-operator", "provides": ["kubeflow.org/MPIJob"]},
    # Kueue's Helm chart (charts/kueue/templates/crd), from its OCI repository or by name.
    {
        "url": "oci://registry.k8s.io/kueue/charts/kueue",
        "chart": "kueue",
        "provides": [
            "kueue.x-k8s.io/ResourceFlavor",
            "kueue.x-k8s.io/ClusterQueue",
            "kueue.x-k8s.io/LocalQueue",
            "kueue.x-k8s.io/Cohort",
            "kueue.x-k8s.io/WorkloadPriorityClass",
            "kueue.x-k8s.io/AdmissionCheck",
            "kueue.x-k8s.io/Topology",
            "kueue.x-k8s.io/ProvisioningRequestConfig",
            "kueue.x-k8s.io/Workload",
        ],
    },
    # The FSx CSI driver's chart installs no CRD (charts/aws-fsx-csi-driver/templates at v1.9.0: a CSIDriver,
    # the controller Deployment, the node DaemonSet, RBAC).
    {"url": "https://kubernetes-sigs.github.io/aws-fsx-csi-driver", "chart": "aws-fsx-csi-driver", "provides": []},
)
_BOOTSTRAP_GROUPS = (
    "kustomize.toolkit.fluxcd.io",
    "source.toolkit.fluxcd.io",
    "helm.toolkit.fluxcd.io",
    "notification.toolkit.fluxcd.io",
    "image.toolkit.fluxcd.io",
    "source.extensions.fluxcd.io",
)
# CRDs every EKS cluster has without GitOps: the VPC CNI (the vpc-cni add-on, on every cluster unless its default
# add-ons are disabled) installs these (aws/amazon-vpc-cni-k8s, charts/aws-vpc-cni/crds/customresourcedefinition.yaml).
EKS_PROVIDED = ("crd.k8s.amazonaws.com/ENIConfig", "networking.k8s.aws/PolicyEndpoint")
# Objects that are never applied to the cluster.
_NOT_APPLIED_GROUPS = ("eksctl.io", "kustomize.config.k8s.io")


def normalise_url(url: str) -> str:
    url = str(url).strip().lower()
    for prefix in ("https://", "http://", "ssh://", "git@", "oci://"):
        url = url.removeprefix(prefix)
    return url.replace("github.com:", "github.com/").removesuffix("/").removesuffix(".git")


def is_custom_resource(manifest: Manifest) -> bool:
    group = manifest.group
    return group not in BUILTIN_GROUPS and group not in _NOT_APPLIED_GROUPS and group not in _BOOTSTRAP_GROUPS


@dataclass
class Provider:
    top: FluxKustomization  # the entry point that applies it
    via: Manifest | None  # the nested Kustomization or HelmRelease that installs the CRD, if not direct
    key: tuple[str, str] | None = None  # (namespace, name) of a nested Flux Kustomization

    def describe(self) -> str:
        return f"{self.top.name}" + (f" (through {self.via.kind} {self.via.name})" if self.via else "")


def _key(manifest: Manifest, default_namespace: str = "flux-system") -> tuple[str, str]:
    return manifest.namespace or default_namespace, manifest.name


class Graph:
    """The environment's Flux Kustomizations, entry points and nested ones, by (namespace, name)."""

    def __init__(self, scope: Scope):
        self.scope = scope
        self.top = {_key(k.manifest): k for k in scope.kustomizations}
        self.nested = {}
        for kustomization in scope.kustomizations:
            for manifest in kustomization.objects:
                if (manifest.group, manifest.kind) == FLUX_KUSTOMIZATION:
                    self.nested[_key(manifest)] = (kustomization, manifest)
        self.manifests = {**{k: v.manifest for k, v in self.top.items()}, **{k: m for k, (_, m) in self.nested.items()}}

    def depends_on(self, key: tuple[str, str]) -> list[tuple[tuple[str, str], int]]:
        """((namespace, name), index in spec.dependsOn) of each dependency."""
        manifest = self.manifests[key]
        return [
            ((str(d.get("namespace") or key[0]), str(d.get("name", ""))), i)
            for i, d in enumerate(sequence(manifest.doc, "spec", "dependsOn"))
            if isinstance(d, dict)
        ]

    def reachable(self, key: tuple[str, str]) -> set[tuple[str, str]]:
        seen, stack = set(), [key]
        while stack:
            current = stack.pop()
            for target, _ in self.depends_on(current) if current in self.manifests else []:
                if target not in seen and target in self.manifests:
                    seen.add(target)
                    stack.append(target)
        return seen


def _provider_table(scope: Scope) -> list[dict]:
    extra = scope.platform.get("crd_providers") if isinstance(scope.platform, dict) else None
    return list(REMOTE_PROVIDERS) + [e for e in extra or [] if isinstance(e, dict)]


def providers(scope: Scope, graph: Graph) -> dict[str, list[Provider]]:
    """ "group/Kind" -> where its CRD comes from."""
    table = _provider_table(scope)
    sources = {(m.kind, m.namespace or "flux-system", m.name): m for m in scope.objects}
    installs = {id(r.manifest): r.objects for r in scope.releases}  # what each rendered HelmRelease installs
    found: dict[str, list[Provider]] = {}
    for top in scope.kustomizations:
        for manifest in top.objects:
            if manifest.kind == "CustomResourceDefinition":
                spec = mapping(manifest.doc, "spec")
                key = f"{spec.get('group', '')}/{mapping(spec, 'names').get('kind', '')}"
                found.setdefault(key, []).append(Provider(top, None))
            elif (manifest.group, manifest.kind) == FLUX_KUSTOMIZATION:
                ref = mapping(manifest.doc, "spec", "sourceRef")
                source = sources.get(
                    (
                        str(ref.get("kind", "")),
                        str(ref.get("namespace") or manifest.namespace or "flux-system"),
                        str(ref.get("name", "")),
                    )
                )
                url = normalise_url(mapping(source.doc, "spec").get("url", "")) if source else ""
                for entry in table:
                    if url and entry.get("url") and normalise_url(entry["url"]) == url:
                        for key in entry.get("provides") or []:
                            found.setdefault(str(key), []).append(Provider(top, manifest, _key(manifest)))
            elif manifest.kind == "HelmRelease":
                for installed in installs.get(id(manifest), ()):
                    if installed.kind == "CustomResourceDefinition":
                        spec = mapping(installed.doc, "spec")
                        key = f"{spec.get('group', '')}/{mapping(spec, 'names').get('kind', '')}"
                        found.setdefault(key, []).append(Provider(top, manifest))
                chart = str(mapping(manifest.doc, "spec", "chart", "spec").get("chart", ""))
                ref = mapping(manifest.doc, "spec", "chartRef")  # a chart straight from an OCIRepository
                source = sources.get(
                    (
                        str(ref.get("kind", "")),
                        str(ref.get("namespace") or manifest.namespace or "flux-system"),
                        str(ref.get("name", "")),
                    )
                )
                url = normalise_url(mapping(source.doc, "spec").get("url", "")) if source else ""
                for entry in table:
                    by_chart = chart and entry.get("chart") == chart
                    by_url = url and entry.get("url") and normalise_url(entry["url"]) == url
                    if by_chart or by_url:
                        for key in entry.get("provides") or []:
                            found.setdefault(str(key), []).append(Provider(top, manifest))
    return found


def _waits(manifest: Manifest) -> bool:
    spec = mapping(manifest.doc, "spec")
    return spec.get("wait") is True or bool(sequence(spec, "healthChecks"))


@rule(
    "flux-path-missing",
    "error",
    requires=("flux",),
    premise="The environment's Flux Kustomizations are visible, and one that builds from this repository points "
    "spec.path at a folder the repository does not hold.",
    consequence="flux",
    description="A Flux Kustomization's spec.path does not exist in the repository",
    remediation="Point spec.path at an existing overlay folder (relative to the repository root), or create it.",
    docs="""kustomize-controller fails the Kustomization, and everything that depends on it waits forever.
      A path that exists but does not build is an input error instead: validate stops with exit status 2 and
      kustomize's message.""",
)
def flux_path_missing(scope: Scope):
    for kustomization in scope.kustomizations:
        if not kustomization.rendered:
            yield Finding(
                kustomization.manifest,
                f"Kustomization {kustomization.name} points at {kustomization.path!r}, which does not exist",
                ("spec", "path"),
            )


@rule(
    "dependency-missing",
    "error",
    requires=("flux",),
    premise="The environment's Flux Kustomizations are visible (clusters/<env> and what it applies), and one's "
    "dependsOn names none of them.",
    consequence="flux",
    description="A Flux Kustomization depends on one that does not exist in the environment",
    remediation="Fix the name (and namespace) under spec.dependsOn, or add the missing Kustomization.",
    docs="""Flux keeps a Kustomization with a missing dependency in "dependency not found" and never applies
      it. dependsOn names Flux Kustomizations (not HelmReleases), in the same namespace unless one is
      given.""",
)
def dependency_missing(scope: Scope):
    graph = Graph(scope)
    for key, manifest in graph.manifests.items():
        for target, index in graph.depends_on(key):
            if target not in graph.manifests:
                yield Finding(
                    manifest,
                    f"dependsOn {target[0]}/{target[1]}, which is not a Flux Kustomization of this environment",
                    ("spec", "dependsOn", index),
                )


@rule(
    "dependency-cycle",
    "error",
    requires=("flux",),
    premise="The environment's Flux Kustomizations are visible, and their dependsOn entries form a cycle.",
    consequence="flux",
    description="Flux Kustomizations depend on each other in a cycle",
    remediation="Remove one dependsOn entry of the cycle; dependencies must form a chain or a tree.",
    docs="""Every Kustomization in a dependsOn cycle waits for another one, so none of them is ever
      applied.""",
)
def dependency_cycle(scope: Scope):
    graph = Graph(scope)
    reported = set()
    for key, manifest in graph.manifests.items():
        if key in graph.reachable(key) and key not in reported:
            cycle = sorted(k for k in graph.reachable(key) if key in graph.reachable(k))
            reported.update(cycle)
            yield Finding(
                manifest,
                "dependsOn cycle: " + " -> ".join(name for _, name in cycle) + f" -> {cycle[0][1]}",
                ("spec", "dependsOn"),
            )


@rule(
    "crd-not-installed",
    "error",
    requires=("flux",),
    premise="The environment's Flux Kustomizations and what they apply are visible, every HelmRelease the custom "
    "resource's Kustomization applies or depends on is rendered or listed as a provider, and its kind is none that "
    "EKS itself installs.",
    consequence="api-server",
    description="A custom resource is applied but nothing in the environment installs its CRD",
    remediation="Install the CRD in a Kustomization the resource's Kustomization depends on; for a remote "
    "source, add it to crd_providers in platform.yaml.",
    docs="""Without its CustomResourceDefinition the API server rejects the object ("no matches for kind")
      and the whole Kustomization fails. CRDs are found in the rendered output (what HelmReleases install
      included: a chart's crds/ and templates, as helm-controller installs them), in the remote sources listed
      in the tool's `rules/ordering.py` (the MPI operator's repository), and in `crd_providers:` of
      platform.yaml (entries `{url: <git or oci url>, provides: [group/Kind]}` or `{chart: <name>,
      provides: [...]}`). Flux's own kinds come from `flux bootstrap`, and the VPC CNI's (ENIConfig,
      PolicyEndpoint) from EKS. Premise: every HelmRelease the
      resource's Kustomization depends on (or applies itself) is rendered or listed there; one whose chart is not
      rendered here (offline, a source the repository does not hold) may install the CRD, so the rule says
      nothing about those resources and validate's notes name the release.""",
)
def crd_not_installed(scope: Scope):
    graph = Graph(scope)
    found = providers(scope, graph)
    unknown = _unknown_installers(scope)
    for kustomization in scope.kustomizations:
        key = _key(kustomization.manifest)
        if unknown & {key, *graph.reachable(key)}:
            continue  # a chart not rendered here may install the CRD before these objects are applied
        for manifest in kustomization.objects:
            if (
                is_custom_resource(manifest)
                and manifest.kind != "CustomResourceDefinition"
                and f"{manifest.group}/{manifest.kind}" not in found
                and f"{manifest.group}/{manifest.kind}" not in EKS_PROVIDED
            ):
                yield Finding(
                    manifest,
                    f"nothing in this environment installs the CRD of {manifest.api_version} {manifest.kind}",
                    ("apiVersion",),
                )


def _unknown_installers(scope: Scope) -> set[tuple[str, str]]:
    """The entry points that apply a HelmRelease whose chart is not rendered here (offline, a source the
    repository does not hold) and not in the provider table: what it installs is not known."""
    unrendered = {id(r.manifest) for r in scope.releases if r.note}
    table = _provider_table(scope)
    found = set()
    for top in scope.kustomizations:
        for manifest in top.objects:
            if id(manifest) in unrendered and not _listed(manifest, table, scope):
                found.add(_key(top.manifest))
    return found


def _listed(release: Manifest, table: list[dict], scope: Scope) -> bool:
    """Whether the provider table says what a HelmRelease's chart installs (by chart name or source URL)."""
    chart = str(mapping(release.doc, "spec", "chart", "spec").get("chart", ""))
    ref = mapping(release.doc, "spec", "chartRef") or mapping(release.doc, "spec", "chart", "spec", "sourceRef")
    namespace = str(ref.get("namespace") or release.namespace or "flux-system")
    source = next(
        (
            m
            for m in scope.objects
            if (m.kind, m.namespace or "flux-system", m.name) == (ref.get("kind"), namespace, ref.get("name"))
        ),
        None,
    )
    url = normalise_url(mapping(source.doc, "spec").get("url", "")) if source else ""
    return any(
        (chart and entry.get("chart") == chart) or (url and entry.get("url") and normalise_url(entry["url"]) == url)
        for entry in table
    )


def _ordered(graph: Graph, consumer: FluxKustomization, provider: Provider) -> bool:
    consumer_key = _key(consumer.manifest)
    if provider.via is None and provider.top is consumer:
        return True  # Flux applies CRDs first within one Kustomization
    reachable = graph.reachable(consumer_key)
    return _key(provider.top.manifest) in reachable or (provider.key is not None and provider.key in reachable)


def _unordered_custom_resources(scope: Scope):
    """(graph, Kustomization, custom resource, the providers of its CRD) for each custom resource whose
    Kustomization is not ordered after any Kustomization that installs its CRD."""
    graph = Graph(scope)
    found = providers(scope, graph)
    for kustomization in scope.kustomizations:
        for manifest in kustomization.objects:
            candidates = found.get(f"{manifest.group}/{manifest.kind}")
            if not candidates or not is_custom_resource(manifest):
                continue
            if not any(_ordered(graph, kustomization, p) for p in candidates):
                yield graph, kustomization, manifest, candidates


def _deadlocked(graph: Graph, consumer: FluxKustomization, provider: Provider) -> bool:
    """Whether the Kustomization that installs the CRD waits (through dependsOn) for the one that applies the
    resource, and not the other way round."""
    if _ordered(graph, consumer, provider) or provider.top is consumer:
        return False
    waits = graph.reachable(_key(provider.top.manifest))
    if provider.key is not None:
        waits |= graph.reachable(provider.key)
    return _key(consumer.manifest) in waits


@rule(
    "custom-resource-before-crd",
    "warning",
    requires=("flux",),
    premise="A custom resource's CRD is installed by another Flux Kustomization of the environment (or a nested one "
    "beside it), which the resource's Kustomization does not depend on and which does not depend on it.",
    consequence="risk",
    description="A custom resource's Kustomization does not depend on the one that installs its CRD",
    remediation="Add the CRD's Kustomization to spec.dependsOn of the resource's Kustomization (directly or "
    "through another dependency).",
    docs="""Flux reconciles Kustomizations in parallel unless dependsOn orders them. Without the dependency
      the custom resource may be applied before its CRD exists and fail, on every fresh cluster and after
      every disaster recovery. A CRD installed by a nested Kustomization in the same entry point is not
      ordered either: the nested one reconciles on its own. kustomize-controller retries the failed
      Kustomization (spec.retryInterval) and it succeeds once the CRD is there, so it is a warning; a CRD's
      Kustomization that depends on the resource's is crd-dependency-deadlock's.""",
)
def custom_resource_before_crd(scope: Scope):
    for graph, kustomization, manifest, candidates in _unordered_custom_resources(scope):
        if any(_deadlocked(graph, kustomization, p) for p in candidates):
            continue
        beside = [p for p in candidates if p.top is kustomization and p.via is not None]
        if beside:
            message = (
                f"Kustomization {kustomization.name} applies it next to {beside[0].via.kind} "
                f"{beside[0].via.name}, which installs its CRD on its own schedule"
            )
        else:
            message = (
                f"Kustomization {kustomization.name} applies it but does not depend on "
                f"{' or '.join(p.describe() for p in candidates)}, which installs its CRD"
            )
        yield Finding(manifest, message, ("apiVersion",))


@rule(
    "crd-dependency-deadlock",
    "error",
    requires=("flux",),
    premise="A custom resource's CRD is installed by another Flux Kustomization of the environment that depends, "
    "directly or not, on the resource's Kustomization.",
    consequence="flux",
    description="The Kustomization that installs a CRD waits for the one that applies its custom resources",
    remediation="Reverse the dependency: the custom resources' Kustomization depends on the CRD's, never the other "
    "way round.",
    docs="""dependsOn holds a Kustomization until its dependencies are Ready. The resources' Kustomization
      cannot become Ready before the CRD exists (the API server rejects them, "no matches for kind"), and the
      CRD's Kustomization waits for it, so neither is ever applied, on every fresh cluster.""",
)
def crd_dependency_deadlock(scope: Scope):
    for graph, kustomization, manifest, candidates in _unordered_custom_resources(scope):
        stuck = [p for p in candidates if _deadlocked(graph, kustomization, p)]
        if stuck:
            yield Finding(
                manifest,
                f"{stuck[0].describe()} installs its CRD but depends on Kustomization {kustomization.name}, "
                "which cannot apply it before the CRD exists",
                ("apiVersion",),
            )


@rule(
    "crd-provider-not-waited",
    "warning",
    requires=("flux",),
    premise="A custom resource's Kustomization depends on one that installs its CRD through a nested Kustomization.",
    consequence="risk",
    description="A dependency that installs a CRD through a nested Kustomization does not wait for it",
    remediation="Set wait: true on the nested Kustomization and on the entry point that applies it.",
    docs="""dependsOn waits until the dependency is Ready. Without `wait: true` (or healthChecks) a
      Kustomization is Ready as soon as its objects are applied, before a nested Kustomization has installed
      the CRD, so the first reconcile of the custom resource fails and only a retry succeeds.""",
)
def crd_provider_not_waited(scope: Scope):
    graph = Graph(scope)
    found = providers(scope, graph)
    reported = set()
    for kustomization in scope.kustomizations:
        for manifest in kustomization.objects:
            for provider in found.get(f"{manifest.group}/{manifest.kind}", []) if is_custom_resource(manifest) else []:
                if provider.key is None or not _ordered(graph, kustomization, provider):
                    continue
                direct = provider.key in graph.reachable(_key(kustomization.manifest))
                unwaited = [
                    m for m in ([provider.via] if direct else [provider.via, provider.top.manifest]) if not _waits(m)
                ]
                for waiting in unwaited:
                    if id(waiting) not in reported:
                        reported.add(id(waiting))
                        yield Finding(
                            waiting,
                            f"{waiting.kind} {waiting.name} installs the CRD of {manifest.kind} "
                            f"(through {provider.via.name}) but does not wait",
                            ("spec",),
                        )


@rule(
    "flux-source-missing",
    "error",
    requires=("environment",),
    premise="The whole environment is visible, and a Flux Kustomization, HelmRelease, HelmChart or ArtifactGenerator "
    "reads a source (sourceRef, chartRef, spec.sources) it does not define, the flux-system source of flux bootstrap "
    "taken as defined.",
    consequence="flux",
    description="A Flux object refers to a source the environment does not define",
    remediation="Add the source (GitRepository, OCIRepository, Bucket, HelmRepository, HelmChart, or the "
    "ArtifactGenerator that makes the ExternalArtifact) to the same environment, or fix the reference.",
    docs="""A missing source leaves the Kustomization or HelmRelease not Ready ("source not found"), and
      everything that depends on it waits. Sources are those of Flux v2.9.5: GitRepository, OCIRepository,
      Bucket, HelmRepository and HelmChart (source-controller), the HelmChart a HelmRelease's `chart.spec`
      makes (named `<namespace>-<name>`), and the ExternalArtifacts source-watcher's ArtifactGenerators make
      (by their `spec.artifacts[].name`, in the generator's namespace). The flux-system GitRepository made by
      `flux bootstrap` is taken as present.""",
)
def flux_source_missing(scope: Scope):
    # What defines a source, ExternalArtifacts that ArtifactGenerators make included: model/flux_sources.py.
    sources = Sources(scope.objects)
    for manifest in scope.objects:
        for reference in references(manifest):
            if sources.defines(reference):
                continue
            made = (
                " (none of its ArtifactGenerators makes one by that name)"
                if reference.kind == EXTERNAL_ARTIFACT
                else ""
            )
            yield Finding(
                manifest,
                f"{manifest.kind} {manifest.name} reads {reference.describe()}, which this environment does not "
                f"define{made}",
                reference.path,
            )
