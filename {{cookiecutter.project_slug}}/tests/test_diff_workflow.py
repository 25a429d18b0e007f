"""The pull-request diff workflow passes actionlint and GitHub's workflow schema, and keeps to
its contract: one comment found by a hidden marker, the body passed in files only."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPOSITORY = Path(__file__).resolve().parent.parent
WORKFLOW = REPOSITORY / ".github" / "workflows" / "diff.yaml"


def tool(name: str) -> str:
    """A linter installed by `make setup` (the test extras), next to this interpreter or on PATH."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    assert found, f"{name} is not installed; run 'make setup' (it comes with the test extras)"
    return found


def run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=REPOSITORY, capture_output=True, text=True, timeout=120)


def test_actionlint_passes():
    result = run(tool("actionlint"), "-no-color", str(WORKFLOW.relative_to(REPOSITORY)))
    assert result.returncode == 0, result.stdout + result.stderr


def test_github_workflow_schema_passes():
    result = run(tool("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(WORKFLOW))
    assert result.returncode == 0, result.stdout + result.stderr


def steps() -> list[dict]:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    return workflow["jobs"]["diff"]["steps"]


def test_runs_on_pull_requests_and_diffs_against_the_merge_base_parent():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    assert "pull_request" in workflow[True]  # PyYAML reads the key `on` as True
    checkout = next(s for s in steps() if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["fetch-depth"] == 2
    scripts = "\n".join(s.get("run", "") for s in steps())
    assert "scripts/diff --base HEAD^1 --format markdown --output" in scripts


def test_updates_one_marked_comment_from_a_file():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    marker = workflow["jobs"]["diff"]["env"]["MARKER"]
    assert marker.startswith("<!--") and marker.endswith("-->")
    [post] = [s for s in steps() if "gh api" in s.get("run", "")]
    script = post["run"]
    assert "startswith(\\\"$MARKER\\\")" in script
    assert "--method PATCH" in script and "--method POST" in script
    assert script.count('-F "body=@$RUNNER_TEMP/comment.md"') == 2
    assert "GITHUB_OUTPUT" not in WORKFLOW.read_text()
