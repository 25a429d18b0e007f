"""Flux's post-build variable substitution in the render (post_build.py), on a real repository with real
kustomize: values and their precedence, escapes, defaults, optional and unresolvable sources, disabled
objects, numbers, and Secret values that no output of validate or diff may show.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))  # diff_fixtures sits next to this file
from conftest import REPO  # noqa: E402
from diff_fixtures import GitRepo  # noqa: E402

from eks_gpu_gitops.cli import validate  # noqa: E402
from eks_gpu_gitops.model import FluxKustomization, Manifest  # noqa: E402
from eks_gpu_gitops.render import post_build  # noqa: E402
from eks_gpu_gitops.render import repository as render  # noqa: E402

# Values that come from the Secret: none of them may appear in any output of validate or diff.
SECRET_URL = "https://ml:pw-5f1c9e03@tracker.example.com/api"
SECRET_REGION = "region-from-secret-7d2a41"
SECRET_REGISTRY = "registry-from-secret-9b1e77.example.com"
SECRET_VALUES = (SECRET_URL, "pw-5f1c9e03", SECRET_REGION, SECRET_REGISTRY)

SOURCES = f"""---
apiVersion: v1
kind: ConfigMap
metadata:
  name: run-values
  namespace: flux-system
data:
  RUN_NAME: from-config-map
  REGION: from-config-map
  WORKERS: "2"
---
apiVersion: v1
kind: Secret
metadata:
  name: tracking-values
  namespace: flux-system
data:
  TRACKING_URL: {base64.b64encode(SECRET_URL.encode()).decode()}
  REGION: {base64.b64encode(SECRET_REGION.encode()).decode()}
  RUN_NAME: {base64.b64encode(b"from-secret").decode()}
stringData:
  PRIVATE_REGISTRY: {SECRET_REGISTRY}
"""

# Written as text: `replicas: ${WORKERS}` is a string in the file, a number once Flux substitutes.
WORKLOADS = """---
apiVersion: v1
kind: ConfigMap
metadata:
  name: run-config
  namespace: training
data:
  run: ${RUN_NAME}
  region: ${REGION}
  escaped: $${RUN_NAME}
  epochs: ${EPOCHS:=10}
  url: ${TRACKING_URL}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: run-script
  namespace: training
  annotations:
    kustomize.toolkit.fluxcd.io/substitute: disabled
data:
  run.sh: echo ${HOME} ${USER}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: probe
  namespace: training
spec:
  replicas: ${WORKERS}
  selector:
    matchLabels:
      app: probe
  template:
    metadata:
      labels:
        app: probe
    spec:
      containers:
        - name: probe
          image: ${PRIVATE_REGISTRY}/probe
          env:
            - name: TRACKING
              value: ${TRACKING_URL}
            - name: LOCATION
              value: ${REGION}
"""

POST_BUILD = {
    "substitute": {"RUN_NAME": "inline-run"},
    "substituteFrom": [
        {"kind": "ConfigMap", "name": "run-values"},
        {"kind": "Secret", "name": "tracking-values"},
        {"kind": "ConfigMap", "name": "absent-values", "optional": True},
    ],
}


def add_case(root: Path, post_build: dict | None = None) -> None:
    """Sources in infrastructure, workloads in training, and training's postBuild reading them."""
    for folder, name, text in (
        ("overlays/dev/infrastructure", "substitution-sources.yaml", SOURCES),
        ("overlays/dev/training", "substituted.yaml", WORKLOADS),
    ):
        (root / folder / name).write_text(text)
        kustomization = yaml.safe_load((root / folder / "kustomization.yaml").read_text())
        kustomization["resources"].append(name)
        (root / folder / "kustomization.yaml").write_text("---\n" + yaml.safe_dump(kustomization, sort_keys=False))
    entry = root / "clusters/dev/training.yaml"
    doc = yaml.safe_load(entry.read_text())
    doc["spec"]["postBuild"] = post_build or POST_BUILD
    entry.write_text("---\n" + yaml.safe_dump(doc, sort_keys=False))


def render_dev(root: Path):
    (environment,) = render.render_repository(root, ["dev"])
    return {k.name: k for k in environment.kustomizations}


def find(kustomization, kind: str, name: str) -> dict:
    (doc,) = [m.doc for m in kustomization.objects if (m.kind, m.name) == (kind, name)]
    return doc


@pytest.fixture
def repo(tmp_path) -> GitRepo:
    return GitRepo.create(tmp_path / "repo")


def test_values_come_by_precedence_with_escapes_and_defaults(repo):
    add_case(repo.root)
    training = render_dev(repo.root)["training"]
    assert find(training, "ConfigMap", "run-config")["data"] == {
        "run": "inline-run",  # substitute wins over both sources
        "region": SECRET_REGION,  # the later source (the Secret) wins over the ConfigMap
        "escaped": "${RUN_NAME}",  # $$ is an escaped $
        "epochs": 10,  # the default of a variable no source gives (a number once read back, as in Flux)
        "url": SECRET_URL,  # a Secret's data, decoded
    }
    record = training.substitution
    assert (record.ran, record.unset, record.errors, record.unresolved) == (True, [], [], [])


def test_a_substituted_number_becomes_a_number_and_a_disabled_object_is_left_alone(repo):
    add_case(repo.root)
    training = render_dev(repo.root)["training"]
    probe = find(training, "Deployment", "probe")
    assert probe["spec"]["replicas"] == 2 and isinstance(probe["spec"]["replicas"], int)
    assert probe["spec"]["template"]["spec"]["containers"][0]["image"] == f"{SECRET_REGISTRY}/probe"
    assert find(training, "ConfigMap", "run-script")["data"] == {"run.sh": "echo ${HOME} ${USER}"}


def test_without_any_variable_flux_changes_nothing_not_even_defaults(repo):
    add_case(repo.root, {"substituteFrom": [{"kind": "ConfigMap", "name": "absent-values", "optional": True}]})
    training = render_dev(repo.root)["training"]
    assert find(training, "ConfigMap", "run-config")["data"]["epochs"] == "${EPOCHS:=10}"
    assert find(training, "Deployment", "probe")["spec"]["replicas"] == "${WORKERS}"
    assert training.substitution.ran is False


def test_cluster_settings_and_sources_outside_the_repository_are_left_as_written_and_noted(repo, monkeypatch, capsys):
    post_build = {**POST_BUILD, "substituteFrom": [*POST_BUILD["substituteFrom"], {"kind": "Secret", "name": "vault"}]}
    add_case(repo.root, post_build)
    (repo.root / "overlays/dev/training/substituted.yaml").write_text(
        WORKLOADS.replace("epochs: ${EPOCHS:=10}", "epochs: ${EPOCHS}")
    )
    found = render_dev(repo.root)
    storage_class = find(found["infrastructure"], "StorageClass", "fsx-lustre")
    assert storage_class["parameters"]["subnetId"] == "${FSX_SUBNET_ID}"
    assert storage_class["parameters"]["securityGroupIds"] == "${FSX_SECURITY_GROUP_ID}"
    # vault may hold any name: a variable no known source gives is left for it, not failed
    assert find(found["training"], "ConfigMap", "run-config")["data"]["epochs"] == "${EPOCHS}"
    assert found["training"].substitution.unset == []

    monkeypatch.chdir(repo.root)
    shutil_copy_settings(repo.root)
    validate.main(["--env", "dev", "--format", "json", "--quiet"])
    report = json.loads(capsys.readouterr().out)
    assert [n for n in report["notes"] if "left as written" in n] == [
        "dev: Flux Kustomization infrastructure: ${FSX_SECURITY_GROUP_ID}, ${FSX_SUBNET_ID} left as written, "
        "only the cluster has their values (ConfigMap flux-system/cluster-settings is written on the cluster "
        "by scripts/cluster-settings)",
        "dev: Flux Kustomization training: ${EPOCHS} left as written, only the cluster has their values "
        "(Secret flux-system/vault is not in the repository)",
    ]
    assert [f for f in report["findings"] if f["rule"].startswith("flux-")] == []


def shutil_copy_settings(root: Path) -> None:
    """What validate reads besides clusters/ and overlays/ (the diff fixture copies only those)."""
    for name in ("platform.yaml", ".yamllint"):
        (root / name).write_text((REPO / name).read_text())


def test_a_variable_without_value_or_default_fails_the_kustomization(repo, monkeypatch, capsys):
    add_case(repo.root)
    (repo.root / "overlays/dev/training/substituted.yaml").write_text(
        WORKLOADS.replace("epochs: ${EPOCHS:=10}", "epochs: ${EPOCHS}")
    )
    training = render_dev(repo.root)["training"]
    assert find(training, "ConfigMap", "run-config")["data"]["epochs"] == "${EPOCHS}"
    assert [(m.name, path, text) for m, path, text in training.substitution.unset] == [
        ("run-config", ("data", "epochs"), "${EPOCHS}")
    ]
    monkeypatch.chdir(repo.root)
    shutil_copy_settings(repo.root)
    validate.main(["--env", "dev", "--format", "json", "--quiet"])
    findings = [f for f in json.loads(capsys.readouterr().out)["findings"] if f["rule"] == "flux-variable-unset"]
    assert [(f["resource"], f["path"]) for f in findings] == [("ConfigMap/training/run-config", "data.epochs")]


@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
def test_a_secret_value_never_appears_in_the_diff(repo, fmt):
    add_case(repo.root)
    result = repo.diff("--base", "main", "--env", "dev", "--format", fmt)
    assert result.code == 0, result.err
    assert "run-config" in result.out and "probe" in result.out
    for value in SECRET_VALUES:
        assert value not in result.out + result.err
    assert "inline-run" in result.out  # an inline value is no secret


@pytest.mark.parametrize("fmt", ["text", "json", "github"])
def test_a_secret_value_never_appears_in_validate(repo, monkeypatch, capsys, fmt):
    add_case(repo.root)
    monkeypatch.chdir(repo.root)
    shutil_copy_settings(repo.root)
    validate.main(["--env", "dev", "--format", fmt, "--quiet"])
    out, err = capsys.readouterr()
    assert "image ***/probe is untagged" in out  # image-tag-latest repeats the image: masked
    for value in SECRET_VALUES:
        assert value not in out + err


def test_what_the_build_returned_is_left_unchanged():
    """A build cache may hold the objects a build returned: substitution makes new ones."""
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"n": "${N}"}}
    entry = {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "apps", "namespace": "flux-system"},
        "spec": {"postBuild": {"substitute": {"N": "3"}}},
    }
    built = [Manifest(config, "apps")]
    kustomization = FluxKustomization(Manifest(entry, "clusters/dev/apps.yaml"), "apps", objects=built)
    post_build.substitute_environment([kustomization])
    assert kustomization.objects[0].doc["data"] == {"n": 3}
    assert built[0].doc["data"] == {"n": "${N}"} and kustomization.objects is not built


def _substituted(values: dict, text: str) -> tuple[dict, list]:
    """A ConfigMap whose one value is `text`, through the render's substitution with `values` inline."""
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"v": text}}
    entry = {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": "apps", "namespace": "flux-system"},
        "spec": {"postBuild": {"substitute": values}},
    }
    kustomization = FluxKustomization(
        Manifest(entry, "clusters/dev/apps.yaml"), "apps", objects=[Manifest(config, "a")]
    )
    post_build.substitute_environment([kustomization])
    return kustomization.objects[0].doc["data"], kustomization.substitution.errors


# Flux's own cases (fluxcd/pkg envsubst v1.7.1, eval_test.go TestExpand): the helper runs that library.
UPSTREAM = [
    ({"var01": "abcdEFGH28ij"}, "${#var01}", 12),
    ({"var01": "abcdEFGH28ij"}, "${var01^^}", "ABCDEFGH28IJ"),
    ({"path_name": "/home/bozo/ideas/thoughts.for.today"}, "${path_name:11:5}", "ideas"),
    ({"default_var": "foo1"}, "foo ${var=prefix${default_var}-suffix}", "foo prefixfoo1-suffix"),
    ({"filename": "path/to/file"}, "${filename##*/}", "file"),
    ({"filename": "bash.string.txt"}, "${filename%.*}", "bash.string"),
    ({"stringZ": "foo/bar/baz"}, r"${stringZ//\//-}", "foo-bar-baz"),
    (
        {"var01": "abcdEFGH28ij"},
        "some text ${var01}$${var$${var01}$var01${var01}",
        "some text abcdEFGH28ij${var${var01}$var01abcdEFGH28ij",
    ),
]


@pytest.mark.parametrize(("values", "text", "expected"), UPSTREAM)
def test_substitution_writes_what_flux_writes(values, text, expected):
    data, errors = _substituted(values, text)
    assert (data, errors) == ({"v": expected}, [])


@pytest.mark.parametrize("text", ["${NAME", "${}", "${NAME:=a", "${NAME/}"])
def test_substitution_refuses_what_flux_refuses(text):
    data, errors = _substituted({"NAME": "x"}, text)
    assert data == {"v": text}, "the object is left as written"
    [(manifest, path, message)] = errors
    assert manifest.name == "c" and path == ("data", "v") and text not in message, message


def test_an_invalid_variable_name_fails_the_kustomization_once():
    data, errors = _substituted({"bad-name": "x", "OK": "y"}, "${OK}")
    [(manifest, path, message)] = errors
    assert (manifest.kind, path) == ("Kustomization", ("spec", "postBuild", "substitute", "bad-name"))
    assert "'bad-name' var name is invalid" in message
    assert data == {"v": "${OK}"}
