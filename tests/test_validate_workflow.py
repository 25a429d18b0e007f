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
    assert "scripts/validate --format github" in commands
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
