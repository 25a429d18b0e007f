"""The pull-request validate workflow runs yamllint, ruff and validate with annotations on every
pull request, with the pinned tool installed from pip's cache (actionlint and the workflow schema: the
generated repository's own tests/test_workflows.py)."""

from __future__ import annotations

from pathlib import Path

import yaml

from conftest import REPO

WORKFLOW = Path(".github") / "workflows" / "validate.yaml"


def test_runs_yamllint_ruff_and_validate_on_every_pull_request_and_the_default_branch():
    workflow = yaml.safe_load((REPO / WORKFLOW).read_text())
    # YAML 1.1 reads `on` as true. The default branch's runs fill the render cache pull requests restore.
    assert workflow.get("on", workflow.get(True)) == {"pull_request": None, "push": {"branches": ["**"]}}
    [job] = workflow["jobs"].values()
    assert job["if"] == (
        "github.event_name == 'pull_request' || github.ref_name == github.event.repository.default_branch"
    )
    commands = [step.get("run", "") for job in workflow["jobs"].values() for step in job["steps"]]
    assert any(c.startswith(".venv/bin/yamllint --format github") for c in commands)
    lines = [line for c in commands for line in c.splitlines()]
    assert ".venv/bin/ruff check --output-format github ." in lines and ".venv/bin/ruff format --check ." in lines
    assert "scripts/validate --format github --sarif validate.sarif" in lines
    assert workflow["permissions"] == {"contents": "read"}


def test_uploads_validates_sarif_to_code_scanning_even_when_validate_fails():
    """The SARIF validate writes goes to code scanning whatever validate's exit status (the job still fails on the
    validate step), never a validate.sarif the change itself carries, with security-events: write on this job
    only."""
    workflow = yaml.safe_load((REPO / WORKFLOW).read_text())
    [job] = workflow["jobs"].values()
    steps = [step.get("name", step.get("uses")) for step in job["steps"]]
    validate = next(step for step in job["steps"] if step.get("name") == "validate")
    assert validate["id"] == "validate"
    assert validate["run"].splitlines() == [
        "rm -f validate.sarif",
        "scripts/validate --format github --sarif validate.sarif",
    ]
    [upload] = [step for step in job["steps"] if step.get("uses", "").startswith("github/codeql-action/upload-sarif@")]
    # Pinned by major version tag, as every other action of the template.
    assert upload["uses"] == "github/codeql-action/upload-sarif@v4"
    assert steps.index(upload["name"]) == steps.index("validate") + 1
    assert upload["with"] == {"sarif_file": "validate.sarif", "category": "validate"}
    condition = " ".join(upload["if"].split())
    # Not `success()`: it runs after a failed validate step, and only when that step ran (so wrote the file).
    assert condition == "!cancelled() && steps.validate.outcome != 'skipped' && hashFiles('validate.sarif') != ''"
    assert upload["continue-on-error"] is True  # a repository without code scanning does not fail the check
    assert job["permissions"] == {"contents": "read", "actions": "read", "security-events": "write"}
    assert workflow["permissions"] == {"contents": "read"}


def test_a_change_that_touches_no_manifest_or_linted_file_skips_every_heavy_step_but_still_reports():
    workflow = yaml.safe_load((REPO / WORKFLOW).read_text())
    [job] = workflow["jobs"].values()
    assert job["if"].startswith("github.event_name == 'pull_request' ||")  # a required check never waits
    steps = {step.get("name", step.get("uses")): step for step in job["steps"]}
    assert "scripts/ci-changes HEAD^1" in steps["What the change touches"]["run"]
    assert steps["validate"]["if"] == "env.MANIFESTS == 'true'"
    for name in ("Install the tooling", "yamllint", "ruff", "actions/setup-python@v6"):
        assert steps[name]["if"] == "env.MANIFESTS == 'true' || env.LINTED == 'true'", name
    cache = steps["Cache the renders"]
    assert cache["with"]["path"] == "~/.cache/gitops-renders"
    # The tool's wheel carries its Go helper: no Go step. The renders depend on the tool's pin.
    assert not any(step.get("uses", "").startswith("actions/setup-go@") for step in job["steps"])
    inputs = "${{ hashFiles('clusters/**', 'overlays/**', 'requirements.txt', 'platform.yaml') }}"
    assert cache["env"]["RENDER_INPUTS"] == inputs and cache["with"]["key"].endswith("-${{ env.RENDER_INPUTS }}")
    assert cache["with"]["restore-keys"].strip() in cache["with"]["key"]


def test_installs_the_pinned_tool_with_pips_cache():
    workflow = yaml.safe_load((REPO / WORKFLOW).read_text())
    [job] = workflow["jobs"].values()
    [python] = [s for s in job["steps"] if s.get("uses", "").startswith("actions/setup-python@")]
    assert python["with"]["cache"] == "pip" and python["with"]["cache-dependency-path"] == "requirements*.txt"
    install = next(s for s in job["steps"] if s.get("name") == "Install the tooling")
    assert install["run"] == "make setup"
    assert "eks-gpu-gitops==" in (REPO / "requirements.txt").read_text()
