"""The loopback chart sources of chart_repository: packed charts, the HTTP Helm repository, upstream charts from
Go module zips and the OCI registry."""

from __future__ import annotations

import hashlib
import json
import sys
import tarfile
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))  # chart_repository sits next to this file
from chart_repository import (  # noqa: E402
    HELM_CHART_MEDIA_TYPE,
    HELM_CONFIG_MEDIA_TYPE,
    OCI_MANIFEST_MEDIA_TYPE,
    REAL_CHARTS,
    ChartRepository,
    OciRegistry,
    make_chart,
    oci_registry_binary,
    package_chart,
    push_chart,
    real_chart,
)

CONFIG_MAP = """apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
data:
  colour: {{ .Values.colour | quote }}
"""

CRD = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
"""


def _demo_chart(root: Path, version: str = "1.2.3") -> Path:
    return make_chart(root, "demo", version, {"configmap.yaml": CONFIG_MAP}, {"colour": "blue"}, {"widgets.yaml": CRD})


def _get(url: str, timeout: float = 10) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        return answer.read()


def test_package_chart_lays_out_a_helm_archive(tmp_path):
    chart = _demo_chart(tmp_path / "src")
    (chart / ".helmignore").write_text("# comment\n*.bak\nscratch/\n")
    (chart / "notes.bak").write_text("ignored")
    (chart / "scratch").mkdir()
    (chart / "scratch" / "file.txt").write_text("ignored")
    (chart / ".git").mkdir()
    (chart / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (chart / "old-0.0.1.tgz").write_bytes(b"not a chart")

    tgz = package_chart(chart, tmp_path / "out")

    assert tgz == tmp_path / "out" / "demo-1.2.3.tgz"
    with tarfile.open(tgz, "r:gz") as archive:
        members = archive.getmembers()
        assert [member.name for member in members] == [
            "demo/Chart.yaml",
            "demo/values.yaml",
            "demo/.helmignore",
            "demo/crds/widgets.yaml",
            "demo/templates/configmap.yaml",
        ]
        assert all(member.isfile() and member.mode == 0o644 for member in members)
        chart_yaml = yaml.safe_load(archive.extractfile("demo/Chart.yaml").read())
        assert yaml.safe_load(archive.extractfile("demo/values.yaml").read()) == {"colour": "blue"}
        assert archive.extractfile("demo/templates/configmap.yaml").read().decode() == CONFIG_MAP
    assert chart_yaml == {
        "apiVersion": "v2",
        "name": "demo",
        "description": "Test chart demo",
        "type": "application",
        "version": "1.2.3",
        "appVersion": "1.0.0",
    }
    # Deterministic: packing again gives the same bytes.
    again = package_chart(chart, tmp_path / "again")
    assert again.read_bytes() == tgz.read_bytes()


def test_repository_serves_index_and_archives(tmp_path):
    charts = tmp_path / "charts"
    tgz = package_chart(_demo_chart(tmp_path / "src"), charts)
    with ChartRepository(charts) as repo:
        assert repo.url.startswith("http://127.0.0.1:")
        index = yaml.safe_load(_get(f"{repo.url}/index.yaml"))
        assert index["apiVersion"] == "v1"
        assert "generated" in index
        (entry,) = index["entries"]["demo"]
        assert entry["apiVersion"] == "v2"
        assert entry["name"] == "demo"
        assert entry["version"] == "1.2.3"
        assert entry["appVersion"] == "1.0.0"
        assert entry["urls"] == ["demo-1.2.3.tgz"]
        assert entry["digest"] == hashlib.sha256(tgz.read_bytes()).hexdigest()
        assert entry["created"]
        archive = _get(f"{repo.url}/{entry['urls'][0]}")
        assert hashlib.sha256(archive).hexdigest() == entry["digest"]
        with pytest.raises(urllib.error.HTTPError) as missing:
            _get(f"{repo.url}/demo-9.9.9.tgz")
        assert missing.value.code == 404
        assert repo.requests == ["/index.yaml", "/demo-1.2.3.tgz", "/demo-9.9.9.tgz"]
        assert repo.count("/demo-1.2.3.tgz") == 1


def test_repository_lists_a_version_added_later(tmp_path):
    charts = tmp_path / "charts"
    package_chart(_demo_chart(tmp_path / "one"), charts)
    with ChartRepository(charts) as repo:
        first = yaml.safe_load(_get(f"{repo.url}/index.yaml"))
        assert [entry["version"] for entry in first["entries"]["demo"]] == ["1.2.3"]
        package_chart(_demo_chart(tmp_path / "two", "1.10.0"), charts)
        second = yaml.safe_load(_get(f"{repo.url}/index.yaml"))
        assert [entry["version"] for entry in second["entries"]["demo"]] == ["1.10.0", "1.2.3"]
        assert second["entries"]["demo"][0]["urls"] == ["demo-1.10.0.tgz"]


def test_stalled_repository_times_the_client_out(tmp_path):
    charts = tmp_path / "charts"
    package_chart(_demo_chart(tmp_path / "src"), charts)
    with ChartRepository(charts) as repo:
        repo.stall = True
        with pytest.raises((TimeoutError, urllib.error.URLError)):
            _get(f"{repo.url}/index.yaml", timeout=1)
        assert repo.requests == ["/index.yaml"]
        repo.stall = False
        assert b"demo-1.2.3.tgz" in _get(f"{repo.url}/index.yaml")


@pytest.mark.parametrize("name", sorted(REAL_CHARTS))
def test_real_chart(name, tmp_path):
    chart = real_chart(name)
    if chart is None:
        pytest.skip(
            f"{name}: Go is missing or {REAL_CHARTS[name].module}@{REAL_CHARTS[name].module_version} "
            "cannot be downloaded from the Go module proxy"
        )
    metadata = yaml.safe_load((chart / "Chart.yaml").read_text())
    assert (metadata["name"], str(metadata["version"])) == (name, REAL_CHARTS[name].version)
    assert "dependencies" not in metadata
    values = yaml.safe_load((chart / "values.yaml").read_text())
    if name == "kueue":
        assert metadata["appVersion"] == "v0.19.2"
        assert len(list((chart / "templates" / "crd").glob("*.yaml"))) == 11
        assert not (chart / "crds").exists()
    else:
        assert values["node"]["tolerateAllTaints"] is True
    with tarfile.open(package_chart(chart, tmp_path), "r:gz") as archive:
        names = archive.getnames()
    assert names[:2] == [f"{name}/Chart.yaml", f"{name}/values.yaml"]
    assert all(entry.startswith(f"{name}/") for entry in names)
    # kueue's .helmignore leaves out its helm-unittest suites (tests/*).
    assert not [entry for entry in names if entry.startswith(f"{name}/tests/")]


def test_push_chart_to_oci_registry(tmp_path):
    binary = oci_registry_binary()
    if binary is None:
        pytest.skip("Go is missing or go-containerregistry's cmd/registry does not build")
    tgz = package_chart(_demo_chart(tmp_path / "src"), tmp_path / "out")
    with OciRegistry(binary) as registry:
        pushed = push_chart(tgz, registry.url, "charts")
        assert pushed.url == f"oci://{registry.host}/charts/demo"
        assert pushed.tag == "1.2.3"
        request = urllib.request.Request(
            f"{registry.url}/v2/charts/demo/manifests/1.2.3", headers={"Accept": OCI_MANIFEST_MEDIA_TYPE}
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            body = answer.read()
        assert "sha256:" + hashlib.sha256(body).hexdigest() == pushed.digest
        manifest = json.loads(body)
        assert manifest["mediaType"] == OCI_MANIFEST_MEDIA_TYPE
        assert manifest["config"]["mediaType"] == HELM_CONFIG_MEDIA_TYPE
        (layer,) = manifest["layers"]
        assert layer["mediaType"] == HELM_CHART_MEDIA_TYPE
        assert _get(f"{registry.url}/v2/charts/demo/blobs/{layer['digest']}") == tgz.read_bytes()
        config = json.loads(_get(f"{registry.url}/v2/charts/demo/blobs/{manifest['config']['digest']}"))
        assert (config["name"], config["version"]) == ("demo", "1.2.3")
