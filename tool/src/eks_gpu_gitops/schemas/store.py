"""Where the pinned CRD and eksctl schemas are read from, and reading them: a local folder laid out like the
upstream copies (crds/<file>, eksctl/schema.json; --schema-dir or GITOPS_SCHEMA_DIR), or a user cache that
each pinned URL (platform.yaml) is downloaded into once. checker.py checks objects against them."""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from pathlib import Path

import yaml

from ..core import yaml_limits
from ..core.errors import InputError
from ..core.files import write_atomically

SCHEMA_DIR_VARIABLE = "GITOPS_SCHEMA_DIR"
CACHE_VARIABLE = "GITOPS_CACHE_DIR"


def _safe_part(part: str) -> str:
    """One path component made of plain characters only; never "", "." or ".."."""
    cleaned = re.sub(r"[^A-Za-z0-9._-]", "_", part)
    return cleaned if cleaned.strip(".") else cleaned.replace(".", "_") or "_"


def local_name(url: str) -> str:
    """Where a schema lives inside a schema folder: crds/<file> or eksctl/schema.json; the file name is
    the URL's last component with anything but letters, digits, ".", "_" and "-" replaced, so it never
    names a place outside the folder."""
    file = _safe_part(url.split("?", 1)[0].split("#", 1)[0].rsplit("/", 1)[-1])
    return "eksctl/schema.json" if file == "schema.json" else f"crds/{file}"


def _cache_path(cache_dir: Path, url: str) -> Path:
    """The cache file for `url`: <host>/<path> with every component made safe, always inside cache_dir."""
    address = url.split("?", 1)[0].split("#", 1)[0].split("://", 1)[-1]
    parts = [_safe_part(part) for part in address.split("/") if part]
    path = cache_dir.joinpath(*parts) if parts else cache_dir / "_"
    if not path.resolve().is_relative_to(cache_dir.resolve()) or path.resolve() == cache_dir.resolve():
        raise InputError(f"schema URL {url!r} names no file inside the cache {cache_dir}")
    return path


def default_cache_dir() -> Path:
    base = os.environ.get(CACHE_VARIABLE) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "gitops-tools"
    )
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

    def path(self, url: str) -> Path:
        """The file `url` is read from (in the cache it may not be downloaded yet)."""
        if self.schema_dir is not None:
            return self.schema_dir / local_name(url)
        return _cache_path(self.cache_dir, url)

    def _fetch(self, url: str) -> Path:
        path = self.path(url)
        if self.schema_dir is not None:
            if not path.is_file():
                raise InputError(f"{path}: schema file missing from the schema folder {self.schema_dir}")
            return path
        if not path.is_file():
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as error:
                raise InputError(f"{path.parent}: cannot create the schema cache: {error.strerror}") from None
            try:
                with urllib.request.urlopen(url, timeout=30) as response:
                    data = response.read()
            except (urllib.error.URLError, OSError) as error:
                reason = getattr(error, "reason", error)
                raise InputError(
                    f"cannot download schema {url}: {reason}; "
                    f"give a local copy with --schema-dir or {SCHEMA_DIR_VARIABLE}"
                ) from None
            try:
                write_atomically(path, data)
            except OSError as error:
                raise InputError(f"{path}: cannot write to the schema cache: {error.strerror}") from None
        return path

    @staticmethod
    def _parse(path: Path, url: str):
        try:
            text = path.read_text()
            return json.loads(text) if path.suffix == ".json" else yaml_limits.load(text)
        except (OSError, ValueError, yaml.YAMLError) as error:
            raise InputError(f"{path}: unreadable schema for {url}: {str(error).splitlines()[0]}") from None
