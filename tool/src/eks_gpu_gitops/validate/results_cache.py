"""An environment's validate results, kept by a hash of everything they depend on, so that a later run
neither renders nor checks an environment that did not change.

The key of an environment: the reads of an earlier render of it that all give the same value now
(render/repository.py environment_fingerprints: every file, folder listing and path test its builds made, on
the copies of the repository the render builds from), and what checking it reads besides: the tool's own
code (every .py file of eks_gpu_gitops), platform.yaml, the helper that renders, the charts the chart cache
has resolved and whether the network may be used, the schema files and the versions of the schema libraries,
and the --kubernetes-version option. An environment no earlier render's reads hold for has no key before it
is rendered: it is rendered and checked, and its result kept under the key its fresh reads give.

Entries live in the render cache's folder (GITOPS_RENDER_CACHE; `off` turns this off too). What is kept is
what the report would print: messages and notes are masked when kept, while the secrets this run read are
known, so a later run that does not render the environment prints nothing a masked run would not.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from functools import cache
from importlib import metadata
from pathlib import Path

from ..core.credentials import mask_text
from ..core.errors import DEBUG_VARIABLE
from ..render import helm_release, helper, platform, render_cache
from ..render.flux_source import regular_file_bytes
from ..render.repository import environment_fingerprints
from ..schemas.store import SchemaStore
from .report import mask_reported
from .runner import Reported, Result

# Bump when what is kept changes shape, so older entries are never read.
_FORMAT = "1"
_PACKAGE = Path(__file__).resolve().parents[1]
_LIBRARIES = ("jsonschema", "kubernetes-validate", "referencing", "PyYAML")
STAGES = ("load", "schemas", "rules")


@dataclass
class Part:
    """What one environment adds to a validate result."""

    env: str
    findings: list[Reported] = field(default_factory=list)
    skipped: list[Reported] = field(default_factory=list)
    notes: dict[str, list[str]] = field(default_factory=lambda: {stage: [] for stage in STAGES})
    objects: int = 0

    def masked(self) -> Part:
        return Part(
            self.env,
            [mask_reported(f) for f in self.findings],
            [mask_reported(f) for f in self.skipped],
            {stage: [mask_text(n) for n in notes] for stage, notes in self.notes.items()},
            self.objects,
        )

    def to_json(self) -> str:
        return json.dumps(
            {
                "env": self.env,
                "findings": [f.as_dict() for f in self.findings],
                "skipped": [f.as_dict() for f in self.skipped],
                "notes": self.notes,
                "objects": self.objects,
            },
            separators=(",", ":"),
        )

    @classmethod
    def from_json(cls, text: str) -> Part:
        data = json.loads(text)
        return cls(
            data["env"],
            [Reported(**f) for f in data["findings"]],
            [Reported(**f) for f in data["skipped"]],
            {stage: list(data["notes"].get(stage, [])) for stage in STAGES},
            int(data["objects"]),
        )


def merge(parts: list[Part], lint: Result) -> Result:
    """One result: the lint findings, then each environment's, with notes in stage order."""
    result = Result(findings=list(lint.findings), skipped=list(lint.skipped), notes=list(lint.notes))
    for stage in STAGES:
        for part in parts:
            result.notes.extend(part.notes[stage])
    for part in parts:
        result.findings.extend(part.findings)
        result.skipped.extend(part.skipped)
        result.environments.append(part.env or "inputs")
        result.objects += part.objects
    return result


@cache
def _tools_digest() -> str:
    """The tool's own Python: the helper is in the key already, as the render cache names what builds."""
    digest = hashlib.sha256()
    for file in sorted(_PACKAGE.rglob("*.py")):
        if "__pycache__" not in file.parts:
            digest.update(str(file.relative_to(_PACKAGE)).encode() + b"\0" + file.read_bytes() + b"\0")
    return digest.hexdigest()


def _library_versions() -> str:
    found = []
    for name in _LIBRARIES:
        try:
            found.append(f"{name}={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            found.append(f"{name}=none")
    return " ".join(found)


def _file_identity(path: Path) -> str:
    try:
        stat = path.stat()
    except OSError:
        return f"{path} absent"
    return f"{path} {stat.st_size} {stat.st_mtime_ns}"


class ResultsCache:
    """Parts by environment for one repository and one set of options."""

    def __init__(self, root: Path, schemas: SchemaStore, kubernetes_version: str | None):
        self.root = root
        self.store = render_cache.shared()
        if self.store is None:
            self.identity = ""
            return
        digest = hashlib.sha256(f"validate results {_FORMAT}\0".encode())
        for part in (
            _tools_digest(),
            helper.builder(),
            helm_release.cache_identity(),
            _library_versions(),
            kubernetes_version or "",
            os.environ.get(DEBUG_VARIABLE, ""),  # a rule that fails raises with it, rather than a finding
            *(_file_identity(file) for file in schema_files(schemas)),
        ):
            digest.update(part.encode() + b"\0")
        content = regular_file_bytes(root / platform.FILE)
        digest.update(b"not a small regular file" if content is None else content)
        self.identity = digest.hexdigest()

    def keys(self, envs: list[str]) -> dict[str, str | None]:
        """Each environment's key, or None where no earlier render's reads all hold now (it is rendered)."""
        if self.store is None:
            return dict.fromkeys(envs)
        keys: dict[str, str | None] = {}
        for env, fingerprint in environment_fingerprints(self.root, envs).items():
            keys[env] = None
            if fingerprint is not None:
                keys[env] = hashlib.sha256(f"{self.identity}\0{env}\0{fingerprint}".encode()).hexdigest()
        return keys

    def get(self, key: str | None) -> Part | None:
        if key is None or self.store is None:
            return None
        text = self.store.read(key)
        if text is None:
            return None
        try:
            return Part.from_json(text)
        except (ValueError, KeyError, TypeError):
            return None  # from another version of the tools: checked again and replaced

    def put(self, key: str | None, part: Part) -> None:
        if key is not None and self.store is not None:
            self.store.write(key, part.masked().to_json())


def schema_files(store: SchemaStore) -> list[Path]:
    """The files the schema stage reads for the pinned schema URLs (in the cache, once a run downloaded them)."""
    return [store.path(url) for url in sorted(set(store.sources.values()))]
