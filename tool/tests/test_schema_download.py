"""Pinned schemas are downloaded once into the cache and read from there afterwards, offline.

A real HTTP server on the loopback interface stands in for raw.githubusercontent.com.
"""

from __future__ import annotations

import contextlib
import functools
import http.server
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from eks_gpu_gitops.core.errors import InputError
from eks_gpu_gitops.schemas.checker import SCHEMA_DIR_VARIABLE, SchemaStore, local_name

CRD = """---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
"""
PATH = "example/widget-operator/v1.2.3/config/crd/example.com_widgets.yaml"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture()
def server(tmp_path):
    """Serves tmp_path/site on 127.0.0.1; yields the base URL and a function that stops it."""
    site = tmp_path / "site"
    (site / PATH).parent.mkdir(parents=True)
    (site / PATH).write_text(CRD)
    handler = functools.partial(_QuietHandler, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()

    def stop():
        httpd.shutdown()
        httpd.server_close()

    yield f"http://127.0.0.1:{httpd.server_address[1]}", stop
    if thread.is_alive():
        stop()


def store(base_url: str, cache: Path) -> SchemaStore:
    return SchemaStore({"example.com/Widget": f"{base_url}/{PATH}"}, cache_dir=cache)


def test_first_use_downloads_into_the_cache_then_reads_it_offline(server, tmp_path, monkeypatch):
    monkeypatch.delenv(SCHEMA_DIR_VARIABLE, raising=False)
    base_url, stop = server
    cache = tmp_path / "cache"
    document = store(base_url, cache).document("example.com/Widget")
    assert document["spec"]["names"]["kind"] == "Widget"
    cached = list(cache.rglob("*.yaml"))
    assert [p.name for p in cached] == ["example.com_widgets.yaml"] and not list(cache.rglob("*.part"))

    stop()  # offline from here on: the cached copy serves
    assert store(base_url, cache).document("example.com/Widget") == document


def test_a_failed_download_is_one_clear_input_error(server, tmp_path, monkeypatch):
    monkeypatch.delenv(SCHEMA_DIR_VARIABLE, raising=False)
    base_url, stop = server
    missing = SchemaStore({"example.com/Widget": f"{base_url}/nothing/here.yaml"}, cache_dir=tmp_path / "cache")
    with pytest.raises(InputError, match="cannot download schema .*here.yaml.*--schema-dir"):
        missing.document("example.com/Widget")
    stop()
    with pytest.raises(InputError, match="cannot download schema"):
        store(base_url, tmp_path / "empty-cache").document("example.com/Widget")
    assert not list((tmp_path / "empty-cache").rglob("*.yaml"))


class _TogetherHandler(_QuietHandler):
    """Holds every request until RUNS of them have arrived, so the downloads end at the same moment."""

    barrier: threading.Barrier

    def do_GET(self):
        with contextlib.suppress(threading.BrokenBarrierError):  # a run that never came: serve the others
            self.barrier.wait(timeout=60)
        super().do_GET()


RUNS = 20
DOWNLOAD = """
import sys
from pathlib import Path
from eks_gpu_gitops.core.errors import InputError
from eks_gpu_gitops.schemas.store import SchemaStore
store = SchemaStore({"example.com/Widget": sys.argv[1]}, cache_dir=Path(sys.argv[2]))
try:
    print(store.document("example.com/Widget")["spec"]["names"]["kind"])
except InputError as error:
    sys.exit(f"error: {error}")
"""


def test_concurrent_runs_with_an_empty_cache_all_get_the_schema(tmp_path, monkeypatch):
    monkeypatch.delenv(SCHEMA_DIR_VARIABLE, raising=False)
    site = tmp_path / "site"
    (site / PATH).parent.mkdir(parents=True)
    (site / PATH).write_text(CRD)
    handler = type("Handler", (_TogetherHandler,), {"barrier": threading.Barrier(RUNS)})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(handler, directory=str(site)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    cache = tmp_path / "cache"
    url = f"http://127.0.0.1:{httpd.server_address[1]}/{PATH}"
    try:
        runs = [
            subprocess.Popen(
                [sys.executable, "-c", DOWNLOAD, url, str(cache)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(RUNS)
        ]
        results = [run.communicate(timeout=300) for run in runs]
    finally:
        httpd.shutdown()
        httpd.server_close()
    outcomes = [(run.returncode, out.strip(), err) for run, (out, err) in zip(runs, results, strict=True)]
    assert outcomes == [(0, "Widget", "")] * RUNS
    host = f"127.0.0.1_{httpd.server_address[1]}"  # the port's ":" made safe
    assert [p.relative_to(cache) for p in cache.rglob("*") if p.is_file()] == [Path(host) / PATH]


@pytest.mark.parametrize(
    "url",
    [
        "file://{site}/../../../escape.yaml",
        "file://{site}/a/%2E%2E/%2E%2E/escape.yaml",
        "file://{site}/..",
    ],
)
def test_a_schema_url_never_writes_outside_the_cache(tmp_path, monkeypatch, url):
    monkeypatch.delenv(SCHEMA_DIR_VARIABLE, raising=False)
    site = tmp_path / "a" / "b" / "site"
    site.mkdir(parents=True)
    (tmp_path / "escape.yaml").write_text(CRD)
    cache = tmp_path / "a" / "b" / "cache"
    store_ = SchemaStore({"example.com/Widget": url.format(site=site)}, cache_dir=cache)
    before = sorted(p for p in tmp_path.rglob("*") if not p.is_relative_to(cache))
    try:
        store_.document("example.com/Widget")
    except InputError as error:
        assert "cannot download schema" in str(error) or "names no file inside the cache" in str(error)
    after = sorted(p for p in tmp_path.rglob("*") if not p.is_relative_to(cache))
    assert after == before
    written = [p for p in cache.rglob("*") if p.is_file()]
    assert all(p.resolve().is_relative_to(cache.resolve()) for p in written)
    assert not [p for p in written if p.name.endswith(".part")]


@pytest.mark.parametrize(
    "url, name",
    [
        ("https://example.com/crds/example.com_widgets.yaml", "crds/example.com_widgets.yaml"),
        ("https://example.com/eksctl/schema.json", "eksctl/schema.json"),
        ("https://example.com/x/..", "crds/__"),
        ("https://example.com/x/.", "crds/_"),
        ("https://example.com/x/a%2F..%2Fb.yaml?ref=1", "crds/a_2F.._2Fb.yaml"),
    ],
)
def test_a_local_name_is_one_plain_file_name(url, name):
    assert local_name(url) == name
