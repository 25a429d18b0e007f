"""Shared fixtures: bake the template once per named option set, render it once."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from cookiecutter.main import cookiecutter

TEMPLATE = Path(__file__).resolve().parent.parent
PACKAGE_DIR = TEMPLATE / "{{cookiecutter.project_slug}}" / "scripts"
sys.path.insert(0, str(PACKAGE_DIR))

from gitops_tools import render, schemas, settings  # noqa: E402

SCHEMA_DIR = Path(os.environ.get("GITOPS_SCHEMA_DIR") or TEMPLATE.parent / "shared" / "schemas")


def pytest_configure(config):
    if not (SCHEMA_DIR / "eksctl" / "schema.json").is_file():
        raise pytest.UsageError(f"no upstream schemas at {SCHEMA_DIR}; set GITOPS_SCHEMA_DIR")


class Bake:
    """One generated repository and its rendered environments."""

    def __init__(self, path: Path, context: dict):
        self.path = path
        self.context = context
        self._environments = None

    @property
    def environments(self):
        if self._environments is None:
            self._environments = {e.name: e for e in render.render_repository(self.path)}
        return self._environments

    def objects(self, env: str, kind: str) -> list[dict]:
        return [m.doc for m in self.environments[env].objects if m.kind == kind]

    def one(self, env: str, kind: str) -> dict:
        found = self.objects(env, kind)
        assert len(found) == 1, f"{env}: expected one {kind}, found {len(found)}"
        return found[0]

    def cluster_config(self, env: str) -> dict:
        return self.environments[env].cluster_config.doc


@pytest.fixture(scope="session")
def bake_factory(tmp_path_factory):
    cache: dict[str, Bake] = {}

    def bake(name: str, **answers) -> Bake:
        if name not in cache:
            out = tmp_path_factory.mktemp(f"bake-{name}")
            path = Path(cookiecutter(str(TEMPLATE), no_input=True, output_dir=str(out), extra_context=answers))
            cache[name] = Bake(path, answers)
        return cache[name]

    return bake


@pytest.fixture(scope="session")
def schema_checker(bake_factory):
    sources = settings.load(bake_factory("default").path)["schemas"]
    return schemas.SchemaChecker(schemas.SchemaStore(sources, schema_dir=SCHEMA_DIR))
