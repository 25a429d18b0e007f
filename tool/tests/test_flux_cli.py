"""scripts/render against Flux's own build: `flux build kustomization --dry-run` (the Flux CLI runs the
kustomize generator and post-build substitution of kustomize-controller) on the same Flux Kustomizations,
object for object.

The Flux CLI is found in GITOPS_FLUX or on PATH (`make flux` at the template's root builds the pinned
release into a cache). Without it these tests are skipped, unless GITOPS_REQUIRE_FLUX is set (the template's
own `make test` sets it, so there they always run).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
import yaml

from eks_gpu_gitops.render import repository as render

FLUX = os.environ.get("GITOPS_FLUX") or shutil.which("flux")
if not FLUX and os.environ.get("GITOPS_REQUIRE_FLUX"):
    raise RuntimeError("GITOPS_REQUIRE_FLUX is set but no Flux CLI was found (GITOPS_FLUX or flux on PATH)")
pytestmark = pytest.mark.skipif(not FLUX, reason="no Flux CLI (set GITOPS_FLUX or put flux on PATH)")

# Labels the controller adds to every object it applies; flux build adds them too.
FLUX_LABELS = ("kustomize.toolkit.fluxcd.io/name", "kustomize.toolkit.fluxcd.io/namespace")


def identity(doc: dict) -> tuple:
    metadata = doc.get("metadata") or {}
    return (doc.get("apiVersion"), doc.get("kind"), metadata.get("namespace", ""), metadata.get("name"))


def comparable(doc: dict) -> dict:
    """The object without the labels Flux adds when it applies (scripts/render may leave them out)."""
    doc = yaml.safe_load(yaml.safe_dump(doc))
    labels = (doc.get("metadata") or {}).get("labels")
    if isinstance(labels, dict):
        for key in FLUX_LABELS:
            labels.pop(key, None)
        if not labels:
            doc["metadata"].pop("labels")
    return doc


def flux_build(root, kustomization) -> dict:
    file = root / kustomization.manifest.file
    result = subprocess.run(
        [FLUX, "build", "kustomization", kustomization.name, "--path", str(root / kustomization.path)]
        + ["--kustomization-file", str(file), "--dry-run"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return {identity(d): comparable(d) for d in yaml.safe_load_all(result.stdout) if d}


def ours(kustomization) -> dict:
    return {identity(m.doc): comparable(m.doc) for m in kustomization.objects}


def kustomizations(root, env):
    (environment,) = render.render_repository(root, [env])
    return {k.name: k for k in environment.kustomizations if k.path.startswith("overlays/")}


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_every_flux_kustomization_of_the_repository_renders_as_flux_builds_it(repo_copy, env):
    found = kustomizations(repo_copy, env)
    assert set(found) >= {"infrastructure", "training"}
    for kustomization in found.values():
        expected = flux_build(repo_copy, kustomization)
        assert ours(kustomization) == expected, kustomization.name


TRANSFORMS = {
    "targetNamespace": {"targetNamespace": "ml"},
    "namePrefix": {"namePrefix": "team-a-", "nameSuffix": "-v2"},
    "commonMetadata": {"commonMetadata": {"labels": {"team": "vision"}, "annotations": {"owner": "ml-platform"}}},
    "images": {"images": [{"name": "TRAINER", "newTag": "9.9.9"}]},
    "patches": {
        "patches": [
            {
                "target": {"kind": "MPIJob"},
                "patch": "- op: replace\n  path: /spec/mpiReplicaSpecs/Worker/replicas\n  value: 4\n",
            }
        ]
    },
}


@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
def test_flux_side_transforms_render_as_flux_builds_them(repo_copy, transform):
    entry = repo_copy / "clusters/dev/training.yaml"
    doc = yaml.safe_load(entry.read_text())
    doc["spec"].update(TRANSFORMS[transform])
    if transform == "images":  # the image as the base names it after its own images transform
        base = yaml.safe_load((repo_copy / "overlays/base/training/kustomization.yaml").read_text())
        doc["spec"]["images"][0]["name"] = base["images"][0]["newName"]
    entry.write_text(yaml.safe_dump(doc, sort_keys=False))
    training = kustomizations(repo_copy, "dev")["training"]
    expected = flux_build(repo_copy, training)
    assert ours(training) == expected


# Post-build substitution with inline values: `flux build --dry-run` reads no substituteFrom source (it would
# need the cluster), so the comparison uses spec.postBuild.substitute only; every variable has a value or a
# default (the CLI substitutes leniently unless --strict-substitute, the controller strictly).
SUBSTITUTED = """---
apiVersion: v1
kind: ConfigMap
metadata:
  name: substituted
  namespace: training
data:
  run: ${RUN_NAME}
  upper: ${RUN_NAME^^}
  escaped: $${RUN_NAME} $$${RUN_NAME}
  defaulted: ${EPOCHS:=ten}
  quoted: "x ${QUOTE} y"
  script: |
    cd ${RUN_NAME}
    echo $${HOME}
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: left-alone
  namespace: training
  labels:
    kustomize.toolkit.fluxcd.io/substitute: disabled
data:
  script: echo ${RUN_NAME} $${HOME}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: substituted
  namespace: training
spec:
  replicas: ${WORKERS}
  selector:
    matchLabels:
      app: substituted
  template:
    metadata:
      labels:
        app: substituted
    spec:
      containers:
        - name: main
          image: busybox:1.36
          args: ["--workers=${WORKERS}", "${WORKERS}", "${ENABLED}", "${SCALE}", "${FLAG}", "${DAY}", "${OCTAL}"]
"""


def test_post_build_substitution_renders_as_flux_builds_it(repo_copy):
    folder = repo_copy / "overlays/dev/training"
    (folder / "substituted.yaml").write_text(SUBSTITUTED)
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
    kustomization["resources"].append("substituted.yaml")
    (folder / "kustomization.yaml").write_text(yaml.safe_dump(kustomization, sort_keys=False))
    entry = repo_copy / "clusters/dev/training.yaml"
    doc = yaml.safe_load(entry.read_text())
    values = {"RUN_NAME": "nightly", "WORKERS": "3", "ENABLED": "true", "QUOTE": 'say "hi" \\ now'}
    # read back as Go's YAML reads them, not as PyYAML would: 1e3 a number, y a boolean, a date a string
    values |= {"SCALE": "1e3", "FLAG": "y", "DAY": "2024-01-01", "OCTAL": "010"}
    # spec.postBuild last, every value double-quoted so that the Flux CLI reads each as a string
    quoted = "".join(f"      {key}: {json.dumps(value)}\n" for key, value in values.items())
    entry.write_text(yaml.safe_dump(doc, sort_keys=False) + "  postBuild:\n    substitute:\n" + quoted)
    training = kustomizations(repo_copy, "dev")["training"]
    expected = flux_build(repo_copy, training)
    assert ours(training) == expected
    # and the substitution did happen: a number, a boolean, an escape, a disabled object
    deployment = expected[("apps/v1", "Deployment", "training", "substituted")]
    assert deployment["spec"]["replicas"] == 3
    assert deployment["spec"]["template"]["spec"]["containers"][0]["args"] == [
        "--workers=3", 3, True, 1000, True, "2024-01-01", 8
    ]  # fmt: skip
    data = expected[("v1", "ConfigMap", "training", "substituted")]["data"]
    assert (data["escaped"], data["upper"], data["defaulted"]) == ("${RUN_NAME} $nightly", "NIGHTLY", "ten")
    assert expected[("v1", "ConfigMap", "training", "left-alone")]["data"]["script"] == "echo ${RUN_NAME} $${HOME}"


def test_a_path_without_a_kustomization_file_renders_as_flux_builds_it(repo_copy):
    """Flux generates the kustomization: every manifest below the path, a sub-folder with its own kustomization
    file as a whole, and the Kustomization's transforms on top."""
    folder = repo_copy / "overlays/dev/plain"
    (folder / "nested").mkdir(parents=True)
    (folder / "config.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\ndata:\n  a: b\n")
    (folder / "deep").mkdir()
    (folder / "deep" / "other.yml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: deep\n")
    (folder / "nested" / "kustomization.yaml").write_text("resources: [cm.yaml]\nnamePrefix: nested-\n")
    (folder / "nested" / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: inner\n")
    entry = repo_copy / "clusters/dev/training.yaml"
    doc = yaml.safe_load(entry.read_text())
    doc["spec"]["path"] = "./overlays/dev/plain"
    doc["spec"]["targetNamespace"] = "training"
    entry.write_text(yaml.safe_dump(doc, sort_keys=False))
    (environment,) = render.render_repository(repo_copy, ["dev"])
    training = next(k for k in environment.kustomizations if k.name == "training")
    expected = flux_build(repo_copy, training)
    assert sorted(name for _, _, _, name in expected) == ["deep", "nested-inner", "plain"]
    assert ours(training) == expected
    files = {m.name: m.file for m in training.objects}
    assert files == {"plain": "overlays/dev/plain/config.yaml", "deep": "overlays/dev/plain/deep/other.yml",
                     "nested-inner": "overlays/dev/plain/nested/cm.yaml"}  # fmt: skip


def test_flux_components_render_as_flux_builds_them(repo_copy):
    component = repo_copy / "overlays/dev/extra"
    component.mkdir()
    (component / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\ncommonLabels:\n  component: extra\n"
    )
    entry = repo_copy / "clusters/dev/training.yaml"
    doc = yaml.safe_load(entry.read_text())
    doc["spec"]["components"] = ["../extra"]
    entry.write_text(yaml.safe_dump(doc, sort_keys=False))
    training = kustomizations(repo_copy, "dev")["training"]
    expected = flux_build(repo_copy, training)
    assert ours(training) == expected
    assert all(d["metadata"]["labels"]["component"] == "extra" for d in expected.values())


def test_substitute_strategy_always_renders_as_flux_builds_it(repo_copy):
    """With no variable at all Flux substitutes nothing, unless substituteStrategy is Always (kustomize-controller
    v1.9): then defaults apply."""
    folder = repo_copy / "overlays/dev/training"
    (folder / "defaults.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: defaults\n  namespace: training\n"
        "data:\n  epochs: ${EPOCHS:=10}\n"
    )
    kustomization = yaml.safe_load((folder / "kustomization.yaml").read_text())
    kustomization["resources"].append("defaults.yaml")
    (folder / "kustomization.yaml").write_text(yaml.safe_dump(kustomization, sort_keys=False))
    entry = repo_copy / "clusters/dev/training.yaml"
    doc = yaml.safe_load(entry.read_text())
    for strategy, epochs in ((None, "${EPOCHS:=10}"), ("Always", 10)):
        doc["spec"]["postBuild"] = {"substitute": {}} | ({"substituteStrategy": strategy} if strategy else {})
        entry.write_text(yaml.safe_dump(doc, sort_keys=False))
        training = kustomizations(repo_copy, "dev")["training"]
        expected = flux_build(repo_copy, training)
        assert ours(training) == expected, strategy
        assert expected[("v1", "ConfigMap", "training", "defaults")]["data"]["epochs"] == epochs, strategy
