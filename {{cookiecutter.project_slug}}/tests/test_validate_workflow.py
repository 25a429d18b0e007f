"""The pull-request validate workflow passes actionlint and GitHub's workflow schema, and runs
yamllint and validate with annotations on every pull request."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml
from conftest import REPO

WORKFLOW = Path(".github") / "workflows" / "validate.yaml"


def installed(name: str) -> str:
    """A checker from the test extras (`make setup`): beside this interpreter, or on PATH."""
    candidate = Path(sys.executable).with_name(name)
    path = str(candidate) if candidate.is_file() else shutil.which(name)
    assert path, f"{name} is missing; `make setup` installs it with the test extras"
    return path


def lint(workflow: Path, cwd: Path = REPO) -> dict[str, subprocess.CompletedProcess]:
    commands = {
        "actionlint": [installed("actionlint"), "-no-color", str(workflow)],
        "schema": [installed("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(workflow)],
    }
    return {
        name: subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120)
        for name, command in commands.items()
    }


def test_workflow_passes_actionlint_and_the_workflow_schema():
    for name, result in lint(WORKFLOW).items():
        assert result.returncode == 0, f"{name}: {result.stdout}{result.stderr}"


def test_the_linters_catch_a_broken_workflow(tmp_path):
    broken = tmp_path / ".github" / "workflows" / "validate.yaml"
    broken.parent.mkdir(parents=True)
    broken.write_text((REPO / WORKFLOW).read_text().replace("  pull_request:", "  pull_requests:"))
    for name, result in lint(broken.relative_to(tmp_path), cwd=tmp_path).items():
        assert result.returncode != 0, name


def test_runs_yamllint_ruff_and_validate_on_every_pull_request():
    workflow = yaml.safe_load((REPO / WORKFLOW).read_text())
    assert workflow.get("on", workflow.get(True)) == {"pull_request": None}  # YAML 1.1 reads `on` as true
    commands = [step.get("run", "") for job in workflow["jobs"].values() for step in job["steps"]]
    assert any(c.startswith(".venv/bin/yamllint --format github") for c in commands)
    lines = [line for c in commands for line in c.splitlines()]
    assert ".venv/bin/ruff check --output-format github ." in lines and ".venv/bin/ruff format --check ." in lines
    assert "scripts/validate --format github" in commands
    assert workflow["permissions"] == {"contents": "read"}
