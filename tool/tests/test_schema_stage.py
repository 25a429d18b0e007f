"""The schema stage on inputs from elsewhere: in folder mode what is not a Kubernetes manifest is not checked; a value
that still holds a ${VARIABLE} something will substitute is not type-checked, one Flux applies as written is; and
eksctl's schema is held to what eksctl accepts."""

from __future__ import annotations

import copy
import json

import yaml
from conftest import SCHEMA_DIR

from eks_gpu_gitops.cli import validate
from eks_gpu_gitops.facts.schemas import SCHEMAS
from eks_gpu_gitops.model import Manifest, Scope
from eks_gpu_gitops.model.manifest import FluxKustomization
from eks_gpu_gitops.model.substitution import Substitution
from eks_gpu_gitops.schemas.checker import SchemaChecker, SchemaStore
from eks_gpu_gitops.validate.schemas import check_schemas

DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
        - name: web
          image: nginx:1.27.3
          ports:
            - containerPort: PORT
"""

CLUSTER = """apiVersion: eksctl.io/v1alpha5
kind: ClusterConfig
metadata:
  name: example
  region: us-west-2
  version: "1.34"
"""


def _run(tmp_path, monkeypatch, capsys, files: dict[str, str]) -> tuple[int, dict]:
    folder = tmp_path / "inputs"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    code = validate.main([str(folder), "--format", "json", "--quiet", "--offline"])
    return code, json.loads(capsys.readouterr().out)


def _schema(report: dict) -> list[tuple[str, str, str]]:
    return [
        (f["resource"], f["path"], f["message"])
        for f in report["findings"]
        if f["rule"] in ("schema-invalid", "schema-missing")
    ]


def test_a_yaml_file_with_no_apiversion_or_kind_is_named_in_a_note_not_checked(tmp_path, monkeypatch, capsys):
    values = "replicaCount: 2\nimage:\n  repository: nginx\n"
    code, report = _run(
        tmp_path, monkeypatch, capsys, {"values.yaml": values, "web.yaml": DEPLOYMENT.replace("PORT", "80")}
    )
    assert (code, _schema(report)) == (0, [])
    assert [n for n in report["notes"] if "values.yaml" in n] == [
        "inputs: 1 YAML file with no apiVersion or kind in any document, so not Kubernetes manifests, not checked: "
        "inputs/values.yaml"
    ]


def test_a_document_without_kind_in_a_manifest_file_is_still_invalid(tmp_path, monkeypatch, capsys):
    text = DEPLOYMENT.replace("PORT", "80") + "---\nmetadata:\n  name: stray\n"
    code, report = _run(tmp_path, monkeypatch, capsys, {"web.yaml": text})
    assert code == 1
    assert [(path, message) for _, path, message in _schema(report)] == [("", "object has no apiVersion or kind")]


def test_a_variable_in_an_integer_field_is_not_a_type_error(tmp_path, monkeypatch, capsys):
    code, report = _run(tmp_path, monkeypatch, capsys, {"web.yaml": DEPLOYMENT.replace("PORT", "${APP_PORT}")})
    assert (code, _schema(report)) == (0, [])


def test_a_word_in_an_integer_field_is_a_type_error(tmp_path, monkeypatch, capsys):
    code, report = _run(tmp_path, monkeypatch, capsys, {"web.yaml": DEPLOYMENT.replace("PORT", "http")})
    assert code == 1
    assert _schema(report) == [
        ("Deployment/web", "spec.template.spec.containers.0.ports.0.containerPort", _schema(report)[0][2])
    ]
    assert _schema(report)[0][2].endswith("expected integer")


OIDC = (
    CLUSTER
    + """identityProviders:
  - name: corporate
    type: oidc
    issuerURL: https://example.okta.com
    clientID: kubernetes
"""
)

HYBRID = (
    CLUSTER
    + """remoteNetworkConfig:
  remoteNodeNetworks:
    - cidrs: ["10.80.146.0/24"]
"""
)


def test_eksctl_accepts_an_identity_provider_with_its_type(tmp_path, monkeypatch, capsys):
    code, report = _run(tmp_path, monkeypatch, capsys, {"cluster.yaml": OIDC})
    assert _schema(report) == []


def test_an_identity_provider_with_an_unknown_field_is_still_invalid(tmp_path, monkeypatch, capsys):
    code, report = _run(tmp_path, monkeypatch, capsys, {"cluster.yaml": OIDC + "    issuer: typo\n"})
    assert [(resource, path) for resource, path, _ in _schema(report)] == [
        ("ClusterConfig/example", "identityProviders.0")
    ]


def test_eksctl_accepts_remote_networks_without_a_gateway(tmp_path, monkeypatch, capsys):
    code, report = _run(tmp_path, monkeypatch, capsys, {"cluster.yaml": HYBRID})
    assert _schema(report) == []


def test_a_clusterconfig_field_the_pinned_eksctl_does_not_know_is_invalid(tmp_path, monkeypatch, capsys):
    text = CLUSTER + "vpc:\n  controlPlaneOnPrivateSubnets: true\n"
    code, report = _run(tmp_path, monkeypatch, capsys, {"cluster.yaml": text})
    assert (code, _schema(report)) == (
        1,
        [("ClusterConfig/example", "vpc", "vpc: unknown field controlPlaneOnPrivateSubnets")],
    )


def _stage(substitution, complete: bool = True) -> list[tuple[str, str]]:
    """schema-invalid findings of one Deployment whose replicas is `${REPLICAS}`, in a repository environment whose
    Flux Kustomization has postBuild (substitution) or not, or in folder mode (not complete)."""
    doc = yaml.safe_load(DEPLOYMENT.replace("PORT", "80"))
    doc["spec"]["replicas"] = "${REPLICAS}"
    deployment = Manifest(copy.deepcopy(doc), "apps/web.yaml", env="prod")
    entry = Manifest(
        {
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {"name": "apps", "namespace": "flux-system"},
        },
        "clusters/prod/apps.yaml",
    )
    flux = FluxKustomization(entry, "apps", objects=[deployment], substitution=Substitution() if substitution else None)
    scope = Scope("prod", [deployment], kustomizations=[flux], complete=complete, kubernetes_version="1.33")
    checker = SchemaChecker(SchemaStore(SCHEMAS, schema_dir=SCHEMA_DIR))
    found, _ = check_schemas([scope], checker, lambda line: None)
    return [(f.manifest.resource, ".".join(map(str, f.path))) for f in found[0] if f.rule == "schema-invalid"]


def test_a_variable_flux_applies_as_written_is_a_type_error():
    """No postBuild: Flux applies `${REPLICAS}` as it is, and the API server refuses a string for replicas."""
    assert _stage(substitution=False) == [("Deployment/web", "spec.replicas")]


def test_a_variable_flux_substitutes_is_judged_once_substituted():
    assert _stage(substitution=True) == []
    assert _stage(substitution=False, complete=False) == []  # folder mode: a template's script fills it in
