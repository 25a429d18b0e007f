"""Helpers for the diff tests: a real git repository made from this repository's manifests.

`GitRepo.create` copies clusters/ and overlays/ of the repository the tests run in into a
temporary folder (`copy_manifests`), runs `git init` and commits them. Tests then edit files, commit, and run
diff in-process (`GitRepo.diff`) or through scripts/diff (`GitRepo.cli`).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml
from conftest import REPO as REPOSITORY

COPIED = ("clusters", "overlays")
_GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "diff tests",
    "GIT_AUTHOR_EMAIL": "diff-tests@example.com",
    "GIT_COMMITTER_NAME": "diff tests",
    "GIT_COMMITTER_EMAIL": "diff-tests@example.com",
}


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> dict:
        return json.loads(self.out)


def copy_manifests(folder: Path) -> None:
    """clusters/ and overlays/ of this repository into `folder` (no git)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in COPIED:
        shutil.copytree(REPOSITORY / name, folder / name, ignore=shutil.ignore_patterns("flux-system"))


@dataclass
class GitRepo:
    root: Path

    @classmethod
    def create(cls, folder: Path) -> GitRepo:
        copy_manifests(folder)
        repo = cls(folder)
        repo.git("init", "--quiet", "--initial-branch=main")
        repo.commit("manifests as generated")
        return repo

    def git(self, *args: str) -> str:
        env = {**os.environ, **_GIT_IDENTITY}
        result = subprocess.run(["git", *args], cwd=self.root, env=env, capture_output=True, text=True)
        assert result.returncode == 0, f"git {' '.join(args)}: {result.stderr}"
        return result.stdout.strip()

    def commit(self, message: str) -> str:
        self.git("add", "--all")
        self.git("commit", "--quiet", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD")

    # --- editing ---------------------------------------------------------------------------------

    def path(self, relative: str) -> Path:
        return self.root / relative

    def read_yaml(self, relative: str):
        return yaml.safe_load(self.path(relative).read_text())

    def write_yaml(self, relative: str, data) -> None:
        self.path(relative).parent.mkdir(parents=True, exist_ok=True)
        self.path(relative).write_text(yaml.safe_dump(data, sort_keys=False))

    def add_patch(self, folder: str, patch: dict) -> None:
        """Append one entry to `patches:` of folder/kustomization.yaml."""
        kustomization = self.read_yaml(f"{folder}/kustomization.yaml")
        kustomization.setdefault("patches", []).append(patch)
        self.write_yaml(f"{folder}/kustomization.yaml", kustomization)

    def add_resource(self, folder: str, name: str, document: dict) -> None:
        self.write_yaml(f"{folder}/{name}", document)
        kustomization = self.read_yaml(f"{folder}/kustomization.yaml")
        kustomization.setdefault("resources", []).append(name)
        self.write_yaml(f"{folder}/kustomization.yaml", kustomization)

    # --- running diff ----------------------------------------------------------------------------

    def diff(self, *args: str) -> Result:
        """scripts/diff's main() in this process, run from the repository root."""
        from eks_gpu_gitops.cli.diff import main

        out, err = io.StringIO(), io.StringIO()
        here = Path.cwd()
        os.chdir(self.root)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(list(args))
        finally:
            os.chdir(here)
        return Result(code, out.getvalue(), err.getvalue())

    def cli(self, *args: str, env: dict | None = None) -> Result:
        """The real command line: this repository's scripts/diff, run in the test repository."""
        environment = {**os.environ, **(env or {})}
        result = subprocess.run(
            [str(REPOSITORY / "scripts" / "diff"), *args],
            cwd=self.root,
            env=environment,
            capture_output=True,
            text=True,
            timeout=300,
        )
        return Result(result.returncode, result.stdout, result.stderr)


def environments(result: Result) -> dict[str, dict]:
    """JSON output's environments by name."""
    return {env["name"]: env for env in result.json()["environments"]}


def objects(env: dict) -> dict[str, dict]:
    """One environment's changed objects by "Kind namespace/name"."""
    return {obj["resource"]: obj for obj in env["objects"]}
