"""The pull-request validate workflow runs yamllint, ruff and validate with annotations on every
pull request (actionlint and the workflow schema: test_workflows.py)."""

from __future__ import annotations

from pathlib import Path

import yaml
from conftest import REPO

WORKFLOW = Path(".github") / "workflows" / "validate.yaml"


def test_runs_yamllint_ruff_and_validate_on_every_pull_request():
    workflow = yaml.safe_load((REPO / WORKFLOW).read_text())
    assert workflow.get("on", workflow.get(True)) == {"pull_request": None}  # YAML 1.1 reads `on` as true
    commands = [step.get("run", "") for job in workflow["jobs"].values() for step in job["steps"]]
    assert any(c.startswith(".venv/bin/yamllint --format github") for c in commands)
    lines = [line for c in commands for line in c.splitlines()]
    assert ".venv/bin/ruff check --output-format github ." in lines and ".venv/bin/ruff format --check ." in lines
    assert "scripts/validate --format github" in commands
    assert workflow["permissions"] == {"contents": "read"}
