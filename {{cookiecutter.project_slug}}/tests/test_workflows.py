"""Every workflow passes actionlint, with shellcheck on its scripts, and GitHub's workflow schema (Dependabot's
file its own), and keeps to the rules that keep CI safe on pull requests from anyone: a read-only token unless
a job says otherwise, checkouts that keep no credentials, expressions reaching scripts only through `env`, no
static cloud keys."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.y*ml"))


def installed(name: str) -> str:
    """A checker requirements-dev.txt installs: beside this interpreter, or on PATH."""
    candidate = Path(sys.executable).with_name(name)
    path = str(candidate) if candidate.is_file() else shutil.which(name)
    assert path, f"{name} is missing; `make setup` installs it"
    return path


def steps(workflow: dict) -> list[dict]:
    return [step for job in workflow["jobs"].values() for step in job.get("steps", [])]


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_passes_actionlint_with_shellcheck(workflow):
    # shellcheck named explicitly: actionlint skips its shellcheck rule without a word when none is on PATH.
    command = [installed("actionlint"), "-no-color", "-shellcheck", installed("shellcheck"), str(workflow)]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    "path, schema",
    [(w, "vendor.github-workflows") for w in WORKFLOWS] + [(ROOT / ".github" / "dependabot.yml", "vendor.dependabot")],
    ids=lambda item: item.name if isinstance(item, Path) else item,
)
def test_passes_githubs_schema(path, schema):
    command = [installed("check-jsonschema"), "--builtin-schema", schema, str(path)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_scripts_take_expressions_only_through_env(workflow):
    # `${{ }}` in a script is pasted in before bash parses it: a branch name could run as code.
    for step in steps(yaml.safe_load(workflow.read_text())):
        assert "${{" not in step.get("run", ""), step.get("name", step["run"])


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_checkouts_keep_no_credentials(workflow):
    for step in steps(yaml.safe_load(workflow.read_text())):
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] is False


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_the_token_is_read_only_unless_a_job_asks_for_more(workflow):
    document = yaml.safe_load(workflow.read_text())
    triggers = document.get("on", document.get(True))  # YAML 1.1 reads the key `on` as true
    if "workflow_call" in triggers:  # a called workflow takes its caller's job's permissions
        assert "permissions" not in document
    else:
        assert document["permissions"] == {"contents": "read"}


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_no_static_credentials(workflow):
    text = workflow.read_text()
    assert "aws-access-key-id" not in text and "aws-secret-access-key" not in text
    assert text.count("secrets.") == text.count("secrets.GITHUB_TOKEN")
