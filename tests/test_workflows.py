"""The template's workflows keep to their contracts: the jobs that may write and what, the image workflow's
triggers, logins and builds, the test workflow's one command (the diff and validate workflows have theirs in
test_diff_workflow.py and test_validate_workflow.py). What any workflow of a generated repository must keep to
(actionlint with shellcheck, GitHub's schema, read-only tokens, no credentials) is the repository's own test,
tests/test_workflows.py of the bake, which test_generated_repository.py runs."""

from __future__ import annotations

import os
import subprocess

import pytest
import yaml

from conftest import REPO
from eks_gpu_gitops.generate.image_repository import resolve

WORKFLOWS = REPO / ".github" / "workflows"
ALL = sorted(WORKFLOWS.iterdir())


def load(name: str) -> dict:
    return yaml.safe_load((WORKFLOWS / name).read_text())


def triggers(workflow: dict) -> dict:
    return workflow.get("on", workflow.get(True))  # YAML 1.1 reads the key `on` as true


def steps(workflow: dict) -> list[dict]:
    return [step for job in workflow["jobs"].values() for step in job.get("steps", [])]


def step(workflow: dict, name: str) -> dict:
    return next(s for s in steps(workflow) if s.get("name") == name)


def uses(workflow: dict, action: str) -> list[dict]:
    return [s for s in steps(workflow) if s.get("uses", "").startswith(f"{action}@")]


def condition(item: dict) -> str:
    return " ".join(item["if"].split())


def test_tokens_are_read_only_except_where_a_job_needs_more():
    writes = {}
    for path in ALL:
        workflow = yaml.safe_load(path.read_text())
        if "workflow_call" in triggers(workflow):
            # Called workflows take their caller's job's permissions: they must not name any.
            assert "permissions" not in workflow and all("permissions" not in j for j in workflow["jobs"].values())
            continue
        assert workflow["permissions"] == {"contents": "read"}, path.name
        for name, job in workflow["jobs"].items():
            granted = {key for key, value in job.get("permissions", {}).items() if value == "write"}
            if granted:
                writes[(path.name, name)] = granted
    assert writes == {
        ("diff.yaml", "diff"): {"pull-requests"},
        ("validate.yaml", "validate"): {"security-events"},
        ("image.yaml", "push-ghcr"): {"packages"},
        ("image.yaml", "push-ecr"): {"id-token"},
    }


IMAGE_PATHS = [
    "trainer/**",
    "overlays/base/training/kustomization.yaml",
    ".github/workflows/image.yaml",
    ".github/workflows/image-build.yaml",
]


def test_image_starts_on_trainer_changes_and_release_tags():
    on = triggers(load("image.yaml"))
    assert on["pull_request"] == {"paths": IMAGE_PATHS}
    assert on["push"] == {"branches": ["**"], "tags": ["v*"], "paths": IMAGE_PATHS}


def test_image_goes_on_only_for_pull_requests_the_default_branch_and_release_tags():
    jobs = load("image.yaml")["jobs"]
    assert condition(jobs["resolve"]) == (
        "github.event_name == 'pull_request' || "
        "github.ref == format('refs/heads/{0}', github.event.repository.default_branch) || "
        "startsWith(github.ref, 'refs/tags/v')"
    )
    # Every other job waits for resolve, so it is skipped where resolve is.
    for name, job in jobs.items():
        if name != "resolve":
            needs = job["needs"] if isinstance(job["needs"], list) else [job["needs"]]
            assert "resolve" in needs, name


def test_image_pull_requests_build_without_pushing_and_pushes_push():
    jobs = load("image.yaml")["jobs"]
    builds = {name: job for name, job in jobs.items() if job.get("uses") == "./.github/workflows/image-build.yaml"}
    assert set(builds) == {"build", "push-ghcr", "push-ecr"}
    assert condition(builds["build"]) == "github.event_name == 'pull_request'"
    assert builds["build"]["with"]["push"] is False
    for name, registry in (("push-ghcr", "ghcr"), ("push-ecr", "ecr")):
        pushed = f"github.event_name == 'push' && needs.resolve.outputs.registry == '{registry}'"
        assert condition(builds[name]) == pushed
        assert builds[name]["with"]["push"] is True and builds[name]["with"]["registry"] == registry
    for job in builds.values():
        assert set(job["needs"]) == {"resolve", "test"}
        assert job["with"]["image"] == "${{ needs.resolve.outputs.image }}"


def test_image_resolve_outputs_what_image_repository_prints():
    resolve_job = load("image.yaml")["jobs"]["resolve"]
    assert set(resolve_job["outputs"]) == set(resolve("ghcr.io/org/trainer")) == {"image", "registry", "aws-region"}
    assert step(load("image.yaml"), "Read the image repository")["run"] == (
        'scripts/tool image-repository >> "$GITHUB_OUTPUT"'
    )


def test_image_lints_and_tests_the_trainer_before_any_build():
    test = load("image.yaml")["jobs"]["test"]
    commands = [s.get("run") for s in test["steps"] if "run" in s]
    assert commands == [
        "make -C trainer setup",
        "trainer/.venv/bin/hadolint --no-color trainer/Dockerfile",
        "make -C trainer test",
    ]
    [python] = [s for s in test["steps"] if s.get("uses", "").startswith("actions/setup-python@")]
    assert python["with"]["cache"] == "pip"
    assert python["with"]["cache-dependency-path"].split() == ["trainer/requirements-cpu.txt", "trainer/Makefile"]


def test_image_logs_in_to_ghcr_with_the_workflow_token():
    build = load("image-build.yaml")
    [login] = uses(build, "docker/login-action")
    assert condition(login) == "inputs.push && inputs.registry == 'ghcr'"
    assert login["with"] == {
        "registry": "ghcr.io",
        "username": "${{ github.actor }}",
        "password": "${{ secrets.GITHUB_TOKEN }}",
    }


def test_image_logs_in_to_ecr_with_a_role_assumed_through_oidc():
    build = load("image-build.yaml")
    names = [s.get("name") for s in steps(build)]
    ecr = ["Check the push role", "Assume the push role", "Log in to ECR"]
    assert names[names.index(ecr[0]) : names.index(ecr[0]) + 3] == ecr
    for name in ecr:
        assert condition(step(build, name)) == "inputs.push && inputs.registry == 'ecr'"
    [credentials] = uses(build, "aws-actions/configure-aws-credentials")
    assert credentials["with"] == {
        "role-to-assume": "${{ inputs.role-to-assume }}",
        "aws-region": "${{ inputs.aws-region }}",
    }
    assert uses(build, "aws-actions/amazon-ecr-login")
    push_ecr = load("image.yaml")["jobs"]["push-ecr"]["with"]
    assert push_ecr["role-to-assume"] == "${{ vars.IMAGE_PUSH_ROLE_ARN }}"
    assert push_ecr["aws-region"] == "${{ needs.resolve.outputs.aws-region }}"


@pytest.mark.parametrize("role", ["", "arn:aws:iam::123456789012:role/trainer-image-push"])
def test_image_fails_in_one_line_without_the_push_role(role):
    script = step(load("image-build.yaml"), "Check the push role")["run"]
    result = subprocess.run(
        ["bash", "-e", "-c", script], env={**os.environ, "ROLE": role}, capture_output=True, text=True, timeout=30
    )
    if role:
        assert result.returncode == 0 and result.stdout == ""
    else:
        assert result.returncode == 1
        [line] = result.stdout.splitlines()
        assert line.startswith("::error::") and "IMAGE_PUSH_ROLE_ARN" in line


def test_image_builds_the_trainer_dockerfile_with_a_layer_cache_and_release_tags():
    build = load("image-build.yaml")
    [meta] = uses(build, "docker/metadata-action")
    assert meta["id"] == "meta" and meta["with"]["images"] == "${{ inputs.image }}"
    assert meta["with"]["tags"].split() == ["type=sha,prefix=sha-", "type=semver,pattern={{version}}"]
    assert meta["with"]["flavor"] == "latest=false"
    [push] = uses(build, "docker/build-push-action")
    assert push["with"] == {
        "context": "trainer",
        "file": "trainer/Dockerfile",
        "push": "${{ inputs.push }}",
        "tags": "${{ steps.meta.outputs.tags }}",
        "labels": "${{ steps.meta.outputs.labels }}",
        "cache-from": "type=gha",
        "cache-to": "type=gha,mode=max",
    }
    assert "if" not in push
    assert (REPO / push["with"]["file"]).is_file()


def test_test_runs_make_test_on_every_pull_request():
    workflow = load("test.yaml")
    assert triggers(workflow) == {"pull_request": None}
    assert [s["run"] for s in steps(workflow) if "run" in s] == ["make test"]
