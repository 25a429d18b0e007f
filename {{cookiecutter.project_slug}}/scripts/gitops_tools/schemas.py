"""Strict schema checks for every rendered object.

- Built-in kinds: kubernetes-validate's strict schemas for the environment's Kubernetes version.
- Custom resources (MPIJob, Flux kinds): the CRD's openAPIV3Schema, with every object that
  lists its properties closed (`additionalProperties: false`), the way the API server prunes
  unknown fields, so a misspelt field is an error instead of silently dropped.
- The eksctl ClusterConfig: eksctl's own JSON schema.

CRD and eksctl schemas come from pinned upstream URLs (platform.yaml), downloaded once into a
user cache; a local folder laid out like the upstream copies (crds/<file>, eksctl/schema.json)
can be used instead (--schema-dir or GITOPS_SCHEMA_DIR).
"""

from __future__ import annotations

import copy
import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import jsonschema
import kubernetes_validate
import yaml

from .errors import InputError
from .manifests import Manifest

SCHEMA_DIR_VARIABLE = "GITOPS_SCHEMA_DIR"
CACHE_VARIABLE = "GITOPS_CACHE_DIR"


@dataclass(frozen=True)
class SchemaProblem:
    manifest: Manifest
    message: str
    missing: bool = False   # True when the kind has no schema at all


def local_name(url: str) -> str:
    """Where a schema lives inside a schema folder: crds/<file> or eksctl/schema.json."""
    file = url.rsplit("/", 1)[-1]
    return "eksctl/schema.json" if file == "schema.json" else f"crds/{file}"


def default_cache_dir() -> Path:
    base = os.environ.get(CACHE_VARIABLE) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "gitops-tools")
    return Path(base) / "schemas"


class SchemaStore:
    """Finds, downloads and parses schema documents; each one once per process."""

    def __init__(self, sources: dict[str, str], schema_dir: Path | None = None, cache_dir: Path | None = None):
        self.sources = sources
        env_dir = os.environ.get(SCHEMA_DIR_VARIABLE)
        self.schema_dir = schema_dir or (Path(env_dir) if env_dir else None)
        self.cache_dir = cache_dir or default_cache_dir()
        self._documents: dict[str, object] = {}

    def document(self, key: str):
        """The parsed schema document for "group/Kind", or None when none is configured."""
        url = self.sources.get(key)
        if url is None:
            return None
        if url not in self._documents:
            self._documents[url] = self._parse(self._fetch(url), url)
        return self._documents[url]

    def _fetch(self, url: str) -> Path:
        if self.schema_dir is not None:
            path = self.schema_dir / local_name(url)
            if not path.is_file():
                raise InputError(f"{path}: schema file missing from the schema folder {self.schema_dir}")
            return path
        path = self.cache_dir / url.split("://", 1)[-1]
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                with urllib.request.urlopen(url, timeout=30) as response:
                    data = response.read()
            except (urllib.error.URLError, OSError) as error:
                reason = getattr(error, "reason", error)
                raise InputError(f"cannot download schema {url}: {reason}; "
                                 f"give a local copy with --schema-dir or {SCHEMA_DIR_VARIABLE}") from None
            partial = path.with_suffix(path.suffix + ".part")
            partial.write_bytes(data)
            partial.rename(path)
        return path

    @staticmethod
    def _parse(path: Path, url: str):
        try:
            text = path.read_text()
            return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
        except (OSError, ValueError, yaml.YAMLError) as error:
            raise InputError(f"{path}: unreadable schema for {url}: {str(error).splitlines()[0]}") from None


def close_objects(schema):
    """Copy of an OpenAPI schema where every object with listed properties rejects others."""
    schema = copy.deepcopy(schema)

    def visit(node):
        if isinstance(node, dict):
            if ("properties" in node and "additionalProperties" not in node
                    and not node.get("x-kubernetes-preserve-unknown-fields")):
                node["additionalProperties"] = False
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)

    visit(schema)
    return schema


def _path(error: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in error.absolute_path) or "(root)"


class SchemaChecker:
    def __init__(self, store: SchemaStore):
        self.store = store
        self._validators: dict[tuple[str, str], jsonschema.protocols.Validator] = {}

    def _crd_validator(self, key: str, version: str):
        cache_key = (key, version)
        if cache_key not in self._validators:
            crd = self.store.document(key)
            versions = {v.get("name"): v for v in (crd.get("spec") or {}).get("versions") or []}
            if version not in versions:
                served = ", ".join(sorted(versions))
                raise LookupError(f"apiVersion {key.split('/')[0]}/{version} is not served by the CRD "
                                  f"(served: {served})")
            schema = close_objects(versions[version]["schema"]["openAPIV3Schema"])
            self._validators[cache_key] = jsonschema.Draft7Validator(schema)
        return self._validators[cache_key]

    def _eksctl_validator(self):
        key = ("eksctl.io/ClusterConfig", "")
        if key not in self._validators:
            self._validators[key] = jsonschema.Draft7Validator(self.store.document("eksctl.io/ClusterConfig"))
        return self._validators[key]

    def check(self, manifest: Manifest, kubernetes_version: str) -> list[SchemaProblem]:
        key = f"{manifest.group}/{manifest.kind}"
        if not manifest.api_version or not manifest.kind:
            return [SchemaProblem(manifest, "object has no apiVersion or kind")]
        if manifest.group == "eksctl.io":
            return self._errors(manifest, self._eksctl_validator())
        if key in self.store.sources:
            try:
                validator = self._crd_validator(key, manifest.api_version.rpartition("/")[2])
            except LookupError as error:
                return [SchemaProblem(manifest, str(error))]
            return self._errors(manifest, validator)
        return self._builtin(manifest, kubernetes_version)

    @staticmethod
    def _errors(manifest: Manifest, validator) -> list[SchemaProblem]:
        errors = sorted(validator.iter_errors(manifest.doc), key=lambda e: list(e.absolute_path))
        return [SchemaProblem(manifest, f"{_path(e)}: {e.message}") for e in errors]

    @staticmethod
    def _builtin(manifest: Manifest, kubernetes_version: str) -> list[SchemaProblem]:
        try:
            kubernetes_validate.validate(manifest.doc, kubernetes_version, strict=True)
        except kubernetes_validate.SchemaNotFoundError:
            return [SchemaProblem(manifest, f"no schema for {manifest.api_version} {manifest.kind} in "
                                            f"Kubernetes {kubernetes_version} (removed API, or a custom "
                                            "resource without a schema in platform.yaml)", missing=True)]
        except kubernetes_validate.ValidationError as error:
            return [SchemaProblem(manifest, f"{_builtin_path(error)}{error.message}")]
        except kubernetes_validate.utils.VersionNotSupportedError:
            return [SchemaProblem(manifest, f"kubernetes-validate has no schemas for Kubernetes {kubernetes_version}")]
        return []


def _builtin_path(error) -> str:
    path = ".".join(str(p) for p in getattr(error, "path", []) or [])
    return f"{path}: " if path else ""


@lru_cache(maxsize=None)
def supported_kubernetes_versions() -> tuple[str, ...]:
    return tuple(v.lstrip("v").rsplit(".", 1)[0] for v in kubernetes_validate.utils.all_versions())
