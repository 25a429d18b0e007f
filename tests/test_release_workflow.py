"""The template's release workflow: actionlint (with shellcheck) and GitHub's schema pass; it builds a wheel per
platform the way tool/tests/test_wheel.py checks them, and the sdist; it refuses a tag that is not the tool's
version or not the template's pin; and only the publishing job may ask for an OIDC token."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import TEMPLATE
from eks_gpu_gitops import __version__

WORKFLOW = TEMPLATE / ".github" / "workflows" / "release.yaml"


def build_hook():
    sys.path.insert(0, str(TEMPLATE / "tool"))
    try:
        import hatch_build
    finally:
        sys.path.remove(str(TEMPLATE / "tool"))
    return hatch_build


def checker(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def test_passes_actionlint_with_shellcheck_and_the_schema():
    linted = subprocess.run(
        [checker("actionlint"), "-no-color", "-shellcheck", checker("shellcheck"), str(WORKFLOW)],
        cwd=TEMPLATE,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert linted.returncode == 0, linted.stdout + linted.stderr
    schema = [checker("check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(WORKFLOW)]
    checked = subprocess.run(schema, capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_builds_every_platform_wheel_and_the_sdist_then_publishes_with_oidc_only():
    workflow = yaml.safe_load(WORKFLOW.read_text())
    assert workflow[True] == {"push": {"tags": ["v*"]}}  # YAML 1.1 reads the key `on` as true
    assert workflow["permissions"] == {"contents": "read"}
    jobs = workflow["jobs"]
    # Every platform the build hook makes a wheel for (tool/hatch_build.py), and no other.
    assert jobs["wheel"]["strategy"]["matrix"]["platform"] == list(build_hook().PLATFORMS)
    build = next(s for s in jobs["wheel"]["steps"] if s.get("name") == "Build the wheel")
    assert build["env"] == {"EKS_GPU_GITOPS_PLATFORM": "${{ matrix.platform }}"}
    assert build["run"] == "python -m pip wheel --no-deps --wheel-dir dist ./tool"
    assert [j for j, job in jobs.items() if "id-token" in job.get("permissions", {})] == ["publish"]
    assert jobs["publish"]["needs"] == ["wheel", "sdist"]
    for job in jobs.values():
        for step in job["steps"]:
            assert "${{" not in step.get("run", ""), step
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False


@pytest.mark.parametrize("tag, ok", [(f"v{__version__}", True), ("v9.9.9", False), (__version__, False)])
def test_refuses_a_tag_that_is_not_the_tools_version(tag, ok):
    steps = yaml.safe_load(WORKFLOW.read_text())["jobs"]["wheel"]["steps"]
    script = next(s for s in steps if s.get("name") == "The tag is the tool's version and the template's pin")["run"]
    result = subprocess.run(
        ["bash", "-e", "-c", script], cwd=TEMPLATE, env={**os.environ, "TAG": tag}, capture_output=True, text=True
    )
    if ok:
        assert result.returncode == 0 and result.stdout == "", result.stdout + result.stderr
    else:
        assert result.returncode == 1 and result.stdout.startswith(f"::error::the tag is {tag} but"), result.stdout
