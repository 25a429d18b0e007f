"""HelmReleases rendered as Flux installs them, from charts served on loopback: the template's own charts at
their pins where a registry here serves them (Kueue 0.19.2 through an OCI registry, the FSx CSI driver's chart
over an HTTP index), a stand-in for Cluster Autoscaler's, and small charts of the tests' own.

What is checked: every release of the default bake renders and validates clean, and agrees with `helm
template` of the same chart and values; a values change, a chart bump, valuesFrom a Secret (masked), a
post-renderer patch, a chart that installs CRDs, a chart from the repository itself, a missing chart or
version (one line), offline with and without the chart cache, a repository that does not answer.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chart_repository import (  # noqa: E402
    ChartRepository,
    OciRegistry,
    fsx_chart,
    make_chart,
    oci_registry_binary,
    package_chart,
    push_chart,
    real_chart,
    template_charts,
)
from conftest import REPO  # noqa: E402
from diff_fixtures import GitRepo, environments, objects  # noqa: E402

from eks_gpu_gitops.cli import render as render_cli  # noqa: E402
from eks_gpu_gitops.cli import validate  # noqa: E402
from eks_gpu_gitops.core.errors import InputError  # noqa: E402
from eks_gpu_gitops.model import CLUSTER_SCOPED  # noqa: E402
from eks_gpu_gitops.render import repository as render  # noqa: E402

REQUIRED = bool(os.environ.get("GITOPS_REQUIRE_CHARTS"))
FSX_RELEASE = "overlays/base/fsx-csi/helmrelease.yaml"
AUTOSCALER_RELEASE = "overlays/base/cluster-autoscaler/helmrelease.yaml"
SECRET_TAG = "v1.34.5-s3cr3t-7c1d9e"

WIDGET_CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {type: object, properties: {size: {type: integer}}}
"""


@pytest.fixture(scope="module")
def charts(tmp_path_factory):
    fsx, kueue, registry = real_chart("aws-fsx-csi-driver"), real_chart("kueue"), oci_registry_binary()
    if fsx is None or kueue is None or registry is None:
        if REQUIRED:
            pytest.fail("GITOPS_REQUIRE_CHARTS is set, and Go or the module proxy could not give the charts")
        pytest.skip("Go or the module proxy could not give the real charts and the OCI registry")
    work = tmp_path_factory.mktemp("charts")
    served = template_charts(work)  # FSx 1.17.0 (its folder below) and the Cluster Autoscaler stand-in 9.59.0
    pinned = work / "fsx-1.17.0" / "aws-fsx-csi-driver"
    package_chart(fsx_chart(work / "fsx-1.17.1", "1.17.1", "1.9.1"), served)
    widget = {"configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: widgets\ndata: {a: b}\n"}
    package_chart(make_chart(work / "src", "widgets", "1.0.0", widget, crds={"widget.yaml": WIDGET_CRD}), served)
    with ChartRepository(served) as http, OciRegistry(registry) as oci:
        pushed = push_chart(package_chart(kueue, work / "oci"), oci.url, "kueue/charts")
        yield SimpleNamespace(http=http, oci=pushed, work=work, pinned=pinned)


@pytest.fixture
def online(monkeypatch, tmp_path):
    """The network allowed (the loopback one), and a chart cache of this test's own."""
    monkeypatch.delenv("GITOPS_OFFLINE", raising=False)
    monkeypatch.setenv("GITOPS_CHART_CACHE", str(tmp_path / "chart-cache"))
    return tmp_path / "chart-cache"


@pytest.fixture
def repo(tmp_path, charts, online) -> GitRepo:
    repo = GitRepo.create(tmp_path / "repo")
    for path in ("overlays/base/fsx-csi/helmrepository.yaml", "overlays/base/cluster-autoscaler/helmrepository.yaml"):
        _edit(repo, path, lambda doc: doc["spec"].update(url=charts.http.url))
    _edit(
        repo,
        "overlays/base/kueue/ocirepository.yaml",
        lambda doc: doc["spec"].update(url=charts.oci.url, insecure=True),
    )
    for name in ("platform.yaml", ".yamllint"):
        shutil.copy(REPO / name, repo.root / name)
    repo.commit("charts on loopback")
    return repo


def _edit(repo: GitRepo, path: str, change) -> None:
    docs = [d for d in yaml.safe_load_all(repo.path(path).read_text()) if d]
    for doc in docs:
        change(doc)
    repo.path(path).write_text("".join("---\n" + yaml.safe_dump(d, sort_keys=False) for d in docs))


def _release(repo: GitRepo, env: str, name: str):
    (environment,) = render.render_repository(repo.root, [env])
    return next(r for r in environment.releases if r.name == name)


def _validate(repo: GitRepo, monkeypatch, capsys, *args: str) -> tuple[int, dict]:
    monkeypatch.chdir(repo.root)
    code = validate.main(["--format", "json", "--quiet", *args])
    return code, json.loads(capsys.readouterr().out)


def test_every_release_of_the_default_bake_renders_from_its_chart(repo, charts):
    (environment,) = render.render_repository(repo.root, ["prod"])
    rendered = {r.name: r for r in environment.releases}
    assert {name: (r.chart, r.error, r.note) for name, r in rendered.items()} == {
        "aws-fsx-csi-driver": ("aws-fsx-csi-driver 1.17.0", "", ""),
        "cluster-autoscaler": ("cluster-autoscaler 9.59.0", "", ""),
        "kueue": ("kueue 0.19.2", "", ""),
    }
    kinds = {(m.kind, m.namespace, m.name): m for r in rendered.values() for m in r.objects}
    node = kinds[("DaemonSet", "kube-system", "fsx-csi-node")]  # targetNamespace, as helm-controller installs it
    assert node.doc["spec"]["template"]["spec"]["tolerations"] == [{"operator": "Exists"}]
    assert node.labels["helm.toolkit.fluxcd.io/name"] == "aws-fsx-csi-driver"  # helm-controller's origin labels
    manager = kinds[("Deployment", "kueue-system", "kueue-controller-manager")]
    assert manager.doc["spec"]["template"]["spec"]["nodeSelector"] == {"role": "system"}  # the release's values
    # helm-controller templates an OCIRepository's chart with the artifact digest in its version (v1.6.4
    # mutateChartWithSourceRevision); a HelmRepository's chart keeps its own.
    digest = charts.oci.digest.removeprefix("sha256:")[:12]
    assert manager.labels["helm.sh/chart"] == f"kueue-0.19.2_{digest}"
    assert node.labels["helm.sh/chart"] == "aws-fsx-csi-driver-1.17.0"
    crds = sorted(m.name for m in rendered["kueue"].objects if m.kind == "CustomResourceDefinition")
    assert len(crds) == 11 and "clusterqueues.kueue.x-k8s.io" in crds
    autoscaler = kinds[("Deployment", "kube-system", "cluster-autoscaler")]
    assert "--expander=least-waste" in autoscaler.doc["spec"]["template"]["spec"]["containers"][0]["command"]
    assert {m.env for r in rendered.values() for m in r.objects} == {"prod"}


def test_the_render_matches_helm_template_of_the_same_chart_and_values(repo, charts):
    helm = os.environ.get("GITOPS_HELM")
    if not helm:
        if REQUIRED:
            pytest.fail("GITOPS_HELM is not set (make helm builds Helm v4.2.4)")
        pytest.skip("no Helm CLI to compare with (GITOPS_HELM)")
    release = _release(repo, "prod", "aws-fsx-csi-driver")
    values = repo.root.parent / "fsx-values.yaml"
    values.write_text(yaml.safe_dump(release.manifest.doc["spec"]["values"]))  # as the environment renders them
    command = [helm, "template", "aws-fsx-csi-driver", str(charts.pinned), "--namespace", "kube-system"]
    command += ["--kube-version", "1.34.0", "--values", str(values)]
    template = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    expected = {}
    for doc in yaml.safe_load_all(template):
        if doc:
            group = doc["apiVersion"].rpartition("/")[0]
            if (group, doc["kind"]) not in CLUSTER_SCOPED:
                doc["metadata"].setdefault("namespace", "kube-system")  # where Helm installs it
            expected[(doc["kind"], doc["metadata"].get("namespace", ""), doc["metadata"]["name"])] = doc
    ours = {}
    for manifest in release.objects:
        doc = json.loads(json.dumps(manifest.doc))
        labels = doc["metadata"]["labels"]
        for origin in ("helm.toolkit.fluxcd.io/name", "helm.toolkit.fluxcd.io/namespace"):
            labels.pop(origin)
        if not labels:
            del doc["metadata"]["labels"]
        ours[(manifest.kind, manifest.namespace, manifest.name)] = doc
    assert sorted(ours) == sorted(expected)
    for key, doc in expected.items():
        assert json.dumps(ours[key], sort_keys=True, indent=1) == json.dumps(doc, sort_keys=True, indent=1), key


def test_validate_sees_every_chart_object_and_the_crds_charts_install(repo, monkeypatch, capsys):
    code, report = _validate(repo, monkeypatch, capsys, "--env", "prod")
    assert code == 0, report["findings"]
    assert [f for f in report["findings"] if f["severity"] == "error"] == []
    assert not [n for n in report["notes"] if "HelmRelease" in n]
    # The bake's 21 objects and what its three charts install (12 + 1 + 78).
    assert report["summary"]["objects"] >= 21 + 12 + 1 + 78


def test_a_values_change_shows_in_the_diff_and_trips_the_gpu_taint_rule(repo, monkeypatch, capsys):
    _edit(repo, FSX_RELEASE, lambda doc: doc["spec"]["values"]["node"].update(tolerateAllTaints=False))
    result = repo.diff("--base", "main", "--format", "json", "--env", "prod")
    changed = objects(environments(result)["prod"])
    assert "DaemonSet kube-system/fsx-csi-node" in changed, sorted(changed)
    assert "HelmRelease flux-system/aws-fsx-csi-driver" in changed
    code, report = _validate(repo, monkeypatch, capsys, "--env", "prod")
    found = [(f["rule"], f["resource"], f["path"]) for f in report["findings"] if f["severity"] == "error"]
    assert code == 1
    assert found == [
        ("fsx-node-plugin-not-on-gpu-nodes", "DaemonSet/kube-system/fsx-csi-node", "spec.template.spec.tolerations")
    ]


def test_a_chart_bump_shows_what_the_chart_changes(repo):
    _edit(repo, FSX_RELEASE, lambda doc: doc["spec"]["chart"]["spec"].update(version="1.17.1"))
    result = repo.diff("--base", "main", "--format", "json", "--env", "prod")
    changed = objects(environments(result)["prod"])
    for resource in ("DaemonSet kube-system/fsx-csi-node", "Deployment kube-system/fsx-csi-controller"):
        assert resource in changed, sorted(changed)
        assert "v1.9.1" in json.dumps(changed[resource]) and "v1.9.0" in json.dumps(changed[resource])


def test_values_from_a_secret_are_rendered_and_never_shown(repo, monkeypatch, capsys):
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "autoscaler-values", "namespace": "flux-system"},
        "stringData": {"values.yaml": yaml.safe_dump({"extraArgs": {"api-token": SECRET_TAG}})},
    }
    repo.add_resource("overlays/base/cluster-autoscaler", "values-secret.yaml", secret)
    reference = {"kind": "Secret", "name": "autoscaler-values"}
    _edit(repo, AUTOSCALER_RELEASE, lambda doc: doc["spec"].update(valuesFrom=[reference]))
    release = _release(repo, "prod", "cluster-autoscaler")
    (deployment,) = release.objects
    command = deployment.doc["spec"]["template"]["spec"]["containers"][0]["command"]
    # helm-controller merges valuesFrom, then spec.values over them: both reach the chart.
    assert f"--api-token={SECRET_TAG}" in command and "--expander=least-waste" in command
    result = repo.diff("--base", "main", "--format", "markdown", "--env", "prod")
    assert "Deployment kube-system/cluster-autoscaler" in result.out and SECRET_TAG not in result.out + result.err
    monkeypatch.chdir(repo.root)
    validate.main(["--env", "prod"])
    out, err = capsys.readouterr()
    assert SECRET_TAG not in out + err


def test_a_post_renderer_patch_reaches_the_chart_objects(repo):
    patch = {"target": {"kind": "Deployment"}, "patch": "- op: add\n  path: /metadata/labels/patched\n  value: 'yes'\n"}
    _edit(repo, AUTOSCALER_RELEASE, lambda doc: doc["spec"].update(postRenderers=[{"kustomize": {"patches": [patch]}}]))
    (deployment,) = _release(repo, "prod", "cluster-autoscaler").objects
    assert deployment.labels["patched"] == "yes"


def _add_widgets(repo: GitRepo, crds: str | None) -> None:
    release = {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": "widgets", "namespace": "flux-system"},
        "spec": {
            "interval": "1h",
            "targetNamespace": "training",
            "chart": {
                "spec": {
                    "chart": "widgets",
                    "version": "1.0.0",
                    "sourceRef": {"kind": "HelmRepository", "name": "autoscaler"},
                }
            },
            **({"install": {"crds": crds}} if crds else {}),
        },
    }
    repo.add_resource("overlays/base/cluster-autoscaler", "widgets.yaml", release)
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w", "namespace": "training"}}
    repo.add_resource("overlays/base/training", "widget.yaml", widget)


@pytest.mark.parametrize(("policy", "installed"), [(None, True), ("Create", True), ("Skip", False)])
def test_the_crds_a_chart_installs_count_as_installed(repo, monkeypatch, capsys, policy, installed):
    _add_widgets(repo, policy)
    release = _release(repo, "prod", "widgets")
    assert [m.name for m in release.objects if m.kind == "CustomResourceDefinition"] == (
        ["widgets.example.com"] if installed else []
    )
    _, report = _validate(repo, monkeypatch, capsys, "--env", "prod")
    missing = [(f["resource"], f["path"]) for f in report["findings"] if f["rule"] == "crd-not-installed"]
    assert missing == ([] if installed else [("Widget/training/w", "apiVersion")])


def test_a_chart_from_the_repository_itself(repo, charts):
    shutil.copytree(charts.work / "src" / "widgets", repo.path("charts/widgets"))
    release = {
        "apiVersion": "helm.toolkit.fluxcd.io/v2",
        "kind": "HelmRelease",
        "metadata": {"name": "local-widgets", "namespace": "flux-system"},
        "spec": {
            "interval": "1h",
            "chart": {
                "spec": {"chart": "./charts/widgets", "sourceRef": {"kind": "GitRepository", "name": "flux-system"}}
            },
        },
    }
    repo.add_resource("overlays/base/cluster-autoscaler", "local-widgets.yaml", release)
    rendered = _release(repo, "prod", "local-widgets")
    assert (rendered.error, sorted((m.kind, m.namespace, m.name) for m in rendered.objects)) == (
        "",
        [("ConfigMap", "flux-system", "widgets"), ("CustomResourceDefinition", "", "widgets.example.com")],
    )


def test_a_version_the_repository_does_not_have_is_one_line(repo, monkeypatch, capsys):
    _edit(repo, FSX_RELEASE, lambda doc: doc["spec"]["chart"]["spec"].update(version="1.99.0"))
    monkeypatch.chdir(repo.root)
    assert render_cli.main(["--env", "prod", "--out", str(repo.root.parent / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("render: overlays/prod/infrastructure: HelmRelease flux-system/aws-fsx-csi-driver: ")
    assert 'chart "aws-fsx-csi-driver" version "1.99.0" not found' in err
    assert not (repo.root.parent / "out").exists()
    code, report = _validate(repo, monkeypatch, capsys, "--env", "prod")
    failed = [(f["rule"], f["resource"]) for f in report["findings"] if f["rule"] == "helm-release-fails"]
    assert (code, failed) == (1, [("helm-release-fails", "HelmRelease/flux-system/aws-fsx-csi-driver")])


def test_offline_a_chart_not_in_the_cache_is_a_note_and_a_cached_one_renders(repo, charts, monkeypatch, capsys):
    monkeypatch.setenv("GITOPS_OFFLINE", "1")
    (environment,) = render.render_repository(repo.root, ["prod"])
    assert [(r.name, r.objects, r.error) for r in environment.releases] == [
        ("aws-fsx-csi-driver", [], ""),
        ("cluster-autoscaler", [], ""),
        ("kueue", [], ""),
    ]
    assert all("not in the chart cache (offline)" in r.note for r in environment.releases)
    monkeypatch.delenv("GITOPS_OFFLINE")
    render.render_repository(repo.root, ["prod"])  # fills the chart cache
    asked = len(charts.http.requests)
    monkeypatch.chdir(repo.root)
    code = validate.main(["--env", "prod", "--format", "json", "--quiet", "--offline"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and not [n for n in report["notes"] if "HelmRelease" in n]
    assert len(charts.http.requests) == asked  # nothing asked of the repository: exact versions, cached


def test_a_repository_that_does_not_answer_times_out_into_a_note(repo, charts):
    _edit(repo, "overlays/base/cluster-autoscaler/helmrepository.yaml", lambda doc: doc["spec"].update(timeout="2s"))
    charts.http.stall = True
    try:
        release = _release(repo, "prod", "cluster-autoscaler")
    finally:
        charts.http.stall = False
    assert release.objects == [] and release.retry
    assert release.note.startswith(
        "its chart from HelmRepository flux-system/autoscaler is not in the chart cache (cannot reach"
    )


# --- fluxcd's kustomize-helm example (Flux 2.6 layout): the CRDs its cert-manager HelmRelease installs -----------

CORPUS = Path(os.environ.get("GITOPS_CORPUS_DIR") or Path(__file__).resolve().parents[3] / "shared" / "corpus")
EXAMPLE = CORPUS / "good-flux2-example-v2.6"
# cert-manager's chart makes its CRDs from templates when crds.enabled (the example sets it): a stand-in with
# one of them, ClusterIssuer, the kind the example's infra-configs applies.
CERT_MANAGER_CRDS = """{{- if .Values.crds.enabled }}
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: clusterissuers.cert-manager.io
spec:
  group: cert-manager.io
  names: {kind: ClusterIssuer, listKind: ClusterIssuerList, plural: clusterissuers, singular: clusterissuer}
  scope: Cluster
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
{{- end }}
"""


@pytest.fixture
def example(tmp_path) -> Path:
    if not EXAMPLE.is_dir():
        pytest.skip(f"no corpus at {CORPUS} (GITOPS_CORPUS_DIR)")
    copy = tmp_path / "example"
    shutil.copytree(EXAMPLE, copy)
    return copy


def _crd_findings(root: Path, monkeypatch, capsys) -> tuple[list, list]:
    monkeypatch.chdir(root)
    validate.main(["--env", "production", "--format", "json", "--quiet"])
    report = json.loads(capsys.readouterr().out)
    return [(f["resource"], f["rule"]) for f in report["findings"] if f["rule"] == "crd-not-installed"], report["notes"]


def test_the_example_offline_raises_no_false_crd_alarm_and_names_what_it_did_not_render(example, monkeypatch, capsys):
    found, notes = _crd_findings(example, monkeypatch, capsys)
    assert found == []
    assert sorted(n.split(":")[1].strip() for n in notes if "HelmRelease" in n) == [
        "HelmRelease cert-manager",
        "HelmRelease ingress-nginx",
        "HelmRelease podinfo",
    ]


@pytest.mark.parametrize("enabled", [True, False], ids=["crds-enabled", "crds-disabled"])
def test_the_example_counts_the_crds_its_cert_manager_chart_installs(
    example, tmp_path, online, monkeypatch, capsys, enabled
):
    served = tmp_path / "served"
    values = {"crds": {"enabled": False}}
    package_chart(
        make_chart(tmp_path / "src", "cert-manager", "1.17.2", {"crds.yaml": CERT_MANAGER_CRDS}, values), served
    )
    package_chart(make_chart(tmp_path / "src", "ingress-nginx", "4.12.1", {}), served)
    package_chart(make_chart(tmp_path / "src", "podinfo", "6.8.0", {}), served)
    with ChartRepository(served) as http:
        for path in (
            "infrastructure/controllers/cert-manager.yaml",
            "infrastructure/controllers/ingress-nginx.yaml",
            "apps/base/podinfo/repository.yaml",
        ):
            text = (example / path).read_text()
            docs = [d for d in yaml.safe_load_all(text) if d]
            for doc in docs:
                if doc["kind"] == "HelmRepository":
                    doc["spec"] = {"interval": "24h", "url": http.url}
                if doc["kind"] == "HelmRelease" and doc["metadata"]["name"] == "cert-manager":
                    doc["spec"]["values"]["crds"]["enabled"] = enabled
            (example / path).write_text("".join("---\n" + yaml.safe_dump(d, sort_keys=False) for d in docs))
        found, notes = _crd_findings(example, monkeypatch, capsys)
    assert not [n for n in notes if "HelmRelease" in n]
    assert found == ([] if enabled else [("ClusterIssuer/letsencrypt", "crd-not-installed")])


def test_a_chart_from_an_oci_helm_repository_and_a_tag_it_does_not_have(repo, charts):
    """A HelmRepository of type oci: the chart is <url>/<name>, its version a tag (Helm's registry client)."""
    registry = charts.oci.url.rsplit("/", 1)[0]  # oci://127.0.0.1:PORT/kueue/charts
    repository = {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "HelmRepository",
        "metadata": {"name": "kueue-oci", "namespace": "flux-system"},
        "spec": {"interval": "1h", "type": "oci", "url": registry, "insecure": True},
    }
    repo.add_resource("overlays/base/kueue", "helmrepository.yaml", repository)

    def by_name(version: str):
        def change(doc):
            if doc["kind"] == "HelmRelease":
                del doc["spec"]["chartRef"]
                source = {"kind": "HelmRepository", "name": "kueue-oci"}
                doc["spec"]["chart"] = {"spec": {"chart": "kueue", "version": version, "sourceRef": source}}

        return change

    _edit(repo, "overlays/base/kueue/helmrelease.yaml", by_name("0.19.x"))
    release = _release(repo, "prod", "kueue")
    assert (release.chart, release.error, len(release.objects)) == ("kueue 0.19.2", "", 78)
    _edit(
        repo, "overlays/base/kueue/helmrelease.yaml", lambda doc: doc["spec"]["chart"]["spec"].update(version="9.9.9")
    )
    with pytest.raises(InputError) as raised:
        render.render_repository(repo.root, ["prod"])
    assert str(raised.value).startswith("overlays/prod/infrastructure: HelmRelease flux-system/kueue: chart ")
    assert 'kueue/charts/kueue version "9.9.9" not found' in str(raised.value)
