"""The pull-request diff workflow keeps to its contract: one render per side, one comment found by
a hidden marker that a failed diff replaces with the error, the body passed in files only, no
comment where the token is read-only (actionlint and the workflow schema: test_workflows.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml

from conftest import REPO as REPOSITORY

WORKFLOW = REPOSITORY / ".github" / "workflows" / "diff.yaml"


def steps() -> list[dict]:
    workflow = yaml.safe_load(WORKFLOW.read_text())
    return workflow["jobs"]["diff"]["steps"]


def test_runs_on_pull_requests_and_diffs_against_the_merge_base_parent():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    assert "pull_request" in workflow[True]  # PyYAML reads the key `on` as True
    checkout = next(s for s in steps() if s.get("uses", "").startswith("actions/checkout@"))
    assert checkout["with"]["fetch-depth"] == 2
    scripts = "\n".join(s.get("run", "") for s in steps())
    # One run renders each side once: the text diff for the log, the markdown for the comment.
    assert scripts.count("scripts/diff ") == 1
    assert "scripts/diff --base HEAD^1 --format text --color always --markdown-output" in scripts


def test_updates_one_marked_comment_from_a_file():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    marker = workflow["jobs"]["diff"]["env"]["MARKER"]
    assert marker.startswith("<!--") and marker.endswith("-->")
    [post] = [s for s in steps() if "gh api" in s.get("run", "")]
    script = post["run"]
    assert 'startswith(\\"$MARKER\\")' in script
    assert "--method PATCH" in script and "--method POST" in script
    assert script.count('-F "body=@$RUNNER_TEMP/comment.md"') == 2
    assert "GITHUB_OUTPUT" not in WORKFLOW.read_text()


def step(name: str) -> dict:
    return next(s for s in steps() if s.get("name") == name)


def test_comments_only_where_the_token_can_write_and_also_when_the_diff_failed():
    condition = " ".join(step("Create or update the comment")["if"].split())
    assert "github.event.pull_request.head.repo.full_name == github.repository" in condition
    assert "github.actor != 'dependabot[bot]'" in condition
    assert "(success() || steps.diff.outcome == 'failure')" in condition
    assert step("Describe the failure")["if"] == "failure() && steps.diff.outcome == 'failure'"


def run_step(name: str, folder: Path, env: dict) -> subprocess.CompletedProcess:
    """One step's script the way GitHub runs it (bash -e), in `folder`."""
    return subprocess.run(
        ["bash", "-e", "-c", step(name)["run"]],
        cwd=folder,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def fake_diff(folder: Path, script: str) -> dict:
    """scripts/diff in `folder` replaced by `script`; the environment the steps run with."""
    fake = folder / "scripts" / "diff"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/bash\n{script}\n")
    fake.chmod(0o755)
    return {
        "RUNNER_TEMP": str(folder),
        "MARKER": marker(),
        "GITHUB_STEP_SUMMARY": str(folder / "summary.md"),
        "HEAD_SHA": "0123456789abcdef",
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_REPOSITORY": "org/repo",
        "GITHUB_RUN_ID": "42",
    }


def marker() -> str:
    return yaml.safe_load(WORKFLOW.read_text())["jobs"]["diff"]["env"]["MARKER"]


def test_the_diff_step_prints_the_text_and_puts_the_markdown_in_the_comment_and_summary(tmp_path):
    env = fake_diff(tmp_path, 'echo "text diff"; echo "## markdown diff" > "${@: -1}"; echo "diff: wrote it" >&2')

    diff = run_step("Render both sides and diff", tmp_path, env)

    assert diff.returncode == 0 and diff.stdout == "text diff\n" and diff.stderr == "diff: wrote it\n"
    assert (tmp_path / "comment.md").read_text() == f"{marker()}\n\n## markdown diff\n"
    assert (tmp_path / "summary.md").read_text() == "## markdown diff\n"


def test_a_failed_diff_replaces_the_comment_with_its_error(tmp_path):
    error = "diff: base does not render: $(touch pwned) `touch pwned` in overlays/x"
    env = fake_diff(tmp_path, f"echo 'diff text so far'\necho '{error}' >&2\necho 'more' >&2\nexit 2")

    diff = run_step("Render both sides and diff", tmp_path, env)
    assert diff.returncode == 2 and error in diff.stderr and "diff text so far" in diff.stdout
    assert not (tmp_path / "comment.md").exists()

    failure = run_step("Describe the failure", tmp_path, env)
    assert failure.returncode == 0, failure.stderr
    body = (tmp_path / "comment.md").read_text()
    assert body.startswith(f"{marker()}\n\n")
    assert "failed at 0123456789abcdef" in body and f"~~~text\n{error}\n~~~" in body and "more" not in body
    assert "https://github.com/org/repo/actions/runs/42" in body
    assert not (tmp_path / "pwned").exists()
    assert (tmp_path / "summary.md").read_text() == body


def test_an_environment_that_does_not_render_still_posts_the_comment_and_fails(tmp_path):
    # scripts/diff writes the markdown (a "Not rendered" section and the others' diff), then exits 2.
    script = (
        'echo "text"; echo "## markdown with a Not rendered section" > "${@: -1}"; echo "diff: dev ..." >&2; exit 2'
    )
    env = fake_diff(tmp_path, script)

    diff = run_step("Render both sides and diff", tmp_path, env)
    assert diff.returncode == 2 and diff.stderr == "diff: dev ...\n"
    comment = f"{marker()}\n\n## markdown with a Not rendered section\n"
    assert (tmp_path / "comment.md").read_text() == comment

    failure = run_step("Describe the failure", tmp_path, env)
    assert failure.returncode == 0, failure.stderr
    assert (tmp_path / "comment.md").read_text() == comment  # not replaced by the first error line
    assert (tmp_path / "summary.md").read_text() == "## markdown with a Not rendered section\n"


def test_a_change_that_touches_no_manifest_renders_nothing_and_only_updates_an_earlier_comment(tmp_path):
    assert "if" not in yaml.safe_load(WORKFLOW.read_text())["jobs"]["diff"]  # always reports
    for name in ("Install the tooling", "Render both sides and diff", "Cache the renders"):
        assert step(name)["if"] == "env.MANIFESTS == 'true'", name
    env = {"RUNNER_TEMP": str(tmp_path), "MARKER": marker(), "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}
    result = run_step("Nothing to render", tmp_path, env)
    assert result.returncode == 0, result.stderr
    body = (tmp_path / "comment.md").read_text()
    assert body.startswith(f"{marker()}\n\n## Manifest diff\n") and "nothing to diff" in body
    script = step("Create or update the comment")["run"]
    assert '[ -z "$id" ] && [ "$MANIFESTS" != true ]' in script  # no new comment for such a change
