"""Source lines of rendered fields: base resources, patch files, inline patches, plain files."""

from __future__ import annotations

import pytest

from eks_gpu_gitops.model import parse_stream, read_file
from eks_gpu_gitops.render import helper
from eks_gpu_gitops.render.locate import Locator

BASE = """---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: serve
spec:
  replicas: 1
  selector:
    matchLabels:
      app: serve
  template:
    metadata:
      labels:
        app: serve
    spec:
      containers:
        - name: serve
          image: serve:1.0
"""

OVERLAY = """---
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../base
patches:
  - path: replicas.yaml
  - path: image.yaml
    target:
      kind: Deployment
      name: serve
  - target:
      kind: Deployment
    patch: |-
      - op: add
        path: /spec/template/spec/containers/0/args
        value: [--port, "8080"]
"""

REPLICAS = """---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: serve
spec:
  replicas: 3
"""

IMAGE = """---
# a JSON patch
- op: replace
  path: /spec/template/spec/containers/0/image
  value: serve:2.0
"""


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("tree")
    for folder, files in {
        "base": {"kustomization.yaml": "---\nresources:\n  - deployment.yaml\n", "deployment.yaml": BASE},
        "overlay": {"kustomization.yaml": OVERLAY, "replicas.yaml": REPLICAS, "image.yaml": IMAGE},
    }.items():
        (tmp_path / folder).mkdir()
        for name, text in files.items():
            (tmp_path / folder / name).write_text(text)
    [manifest] = parse_stream(helper.build(tmp_path / "overlay"), "overlay")
    return tmp_path, manifest


def line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


@pytest.mark.parametrize(
    "path, file, text, needle",
    [
        (("spec", "replicas"), "overlay/replicas.yaml", REPLICAS, "replicas: 3"),
        (("spec", "template", "spec", "containers", 0, "image"), "overlay/image.yaml", IMAGE, "value: serve:2.0"),
        (
            ("spec", "template", "spec", "containers", 0, "args", 1),
            "overlay/kustomization.yaml",
            OVERLAY,
            "value: [--port",
        ),
        (("spec", "selector", "matchLabels"), "base/deployment.yaml", BASE, "matchLabels:"),
        ((), "base/deployment.yaml", BASE, "apiVersion"),
    ],
)
def test_rendered_field_points_at_its_source(tree, path, file, text, needle):
    root, manifest = tree
    assert Locator(root).locate(manifest, path) == (file, line_of(text, needle))


def test_plain_file_document(tmp_path):
    (tmp_path / "two.yaml").write_text(REPLICAS + BASE.replace("name: serve", "name: other", 1))
    other = read_file(tmp_path / "two.yaml", tmp_path)[1]
    assert Locator(tmp_path).locate(other, ("spec", "replicas")) == (
        "two.yaml",
        line_of(REPLICAS + BASE, "replicas: 1"),
    )


def test_unknown_source_is_line_zero(tmp_path):
    [manifest] = parse_stream(REPLICAS, "gone.yaml")
    assert Locator(tmp_path).locate(manifest, ("spec",)) == ("gone.yaml", 0)


SETTINGS = """---
apiVersion: gitops.local/v1alpha1
kind: EnvironmentSettings
metadata:
  name: prod
  annotations:
    config.kubernetes.io/local-config: "true"
serve:
  replicas: 4
  args:
    - --port
    - "9090"
"""

COMPONENT = """---
apiVersion: kustomize.config.k8s.io/v1alpha1
kind: Component
replacements:
  - source: {kind: EnvironmentSettings, fieldPath: serve.replicas}
    targets:
      - select: {kind: Deployment, name: serve}
        fieldPaths: [spec.replicas]
  - source: {kind: EnvironmentSettings, fieldPath: serve.args}
    targets:
      - select: {kind: Deployment, name: serve}
        fieldPaths: ["spec.template.spec.containers.[name=serve].args"]
        options: {create: true}
"""

ENVIRONMENT = """---
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - ../base
  - settings.yaml
components:
  - ../component
"""


@pytest.fixture(scope="module")
def settings_tree(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("settings-tree")
    files = {
        "base": {"kustomization.yaml": "---\nresources:\n  - deployment.yaml\n", "deployment.yaml": BASE},
        "component": {"kustomization.yaml": COMPONENT},
        "prod": {"kustomization.yaml": ENVIRONMENT, "settings.yaml": SETTINGS},
    }
    for folder, contents in files.items():
        (tmp_path / folder).mkdir()
        for name, text in contents.items():
            (tmp_path / folder / name).write_text(text)
    [manifest] = parse_stream(helper.build(tmp_path / "prod"), "prod")
    return tmp_path, manifest


@pytest.mark.parametrize(
    "path, file, text, needle",
    [
        (("spec", "replicas"), "prod/settings.yaml", SETTINGS, "replicas: 4"),
        (("spec", "template", "spec", "containers", 0, "args", 1), "prod/settings.yaml", SETTINGS, '- "9090"'),
        (("spec", "template", "spec", "containers", 0, "image"), "base/deployment.yaml", BASE, "image: serve:1.0"),
    ],
)
def test_a_value_copied_from_settings_points_at_its_settings_line(settings_tree, path, file, text, needle):
    root, manifest = settings_tree
    assert manifest.doc["spec"]["replicas"] == 4  # kustomize copied it, and dropped the settings object
    assert Locator(root).locate(manifest, path) == (file, line_of(text, needle))
