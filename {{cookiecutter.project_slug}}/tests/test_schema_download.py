"""Pinned schemas are downloaded once into the cache and read from there afterwards, offline.

A real HTTP server on the loopback interface stands in for raw.githubusercontent.com.
"""

from __future__ import annotations

import functools
import http.server
import threading
from pathlib import Path

import pytest

from gitops_tools.errors import InputError
from gitops_tools.schemas import SCHEMA_DIR_VARIABLE, SchemaStore

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
