"""Every way into the template, each from a fresh virtual environment holding only what the README installs
(`pip install cookiecutter`, or `pip install cruft`): the interactive prompt answered through a terminal,
`--no-input`, `cruft create`, and `cruft check`, `cruft diff` and `cruft update` in a baked repository after a
template commit. Each result is compared, file by file, with the bake of the development environment."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest
from cookiecutter.main import cookiecutter

from conftest import TEMPLATE, git

TIMEOUT = 600  # seconds: far above what a bake or an install takes, against a hang only
ESCAPES = re.compile(r"\x1b\[[0-9;]*m")


def fresh_venv(folder: Path, package: str) -> Path:
    """A virtual environment with `pip install <package>` and nothing else: the README's first command."""
    subprocess.run([sys.executable, "-m", "venv", str(folder)], check=True, timeout=TIMEOUT)
    subprocess.run([str(folder / "bin" / "pip"), "install", "--quiet", package], check=True, timeout=TIMEOUT)
    return folder / "bin"


def user_env() -> dict:
    """The environment of a user's shell: nothing of the development environment's Python."""
    return {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "EKS_GPU_GITOPS")}


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def assert_same_tree(made: Path, reference: Path, but: tuple[str, ...] = ()) -> None:
    ours, theirs = files(made), files(reference)
    for name in but:
        ours.pop(name, None), theirs.pop(name, None)
    assert sorted(ours) == sorted(theirs)
    assert [name for name in ours if ours[name] != theirs[name]] == []


@pytest.fixture(scope="module")
def cookiecutter_bin(tmp_path_factory) -> Path:
    return fresh_venv(tmp_path_factory.mktemp("venv") / "cookiecutter", "cookiecutter")


@pytest.fixture(scope="module")
def cruft_bin(tmp_path_factory) -> Path:
    return fresh_venv(tmp_path_factory.mktemp("venv") / "cruft", "cruft")


def reference(template_repo: Path, out: Path, answers: dict) -> Path:
    """The development environment's bake of the same answers."""
    return Path(cookiecutter(str(template_repo), no_input=True, output_dir=str(out), extra_context=answers))


def test_the_fresh_environments_hold_no_package_the_tool_needs(cookiecutter_bin, cruft_bin):
    for python in (cookiecutter_bin / "python", cruft_bin / "python"):
        for module in ("ruamel", "eks_gpu_gitops", "jsonschema", "kubernetes"):
            found = subprocess.run([str(python), "-c", f"import {module}"], capture_output=True, timeout=60)
            assert found.returncode != 0, f"{python} has {module}: not a fresh environment"


def test_no_input(cookiecutter_bin, template_repo, tmp_path):
    answers = {"project_slug": "vision", "gpu_instance_type": "p5.48xlarge", "kubernetes_version": "1.33"}
    command = [str(cookiecutter_bin / "cookiecutter"), "--no-input", str(template_repo), "-o", str(tmp_path / "user")]
    result = subprocess.run(
        [*command, *(f"{k}={v}" for k, v in answers.items())],
        env=user_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    assert_same_tree(tmp_path / "user" / "vision", reference(template_repo, tmp_path / "dev", answers))


QUESTIONS = [key for key in json.loads((TEMPLATE / "cookiecutter.json").read_text()) if not key.startswith("_")]
# Every question in order: its prompt, the default it shows, what the test types ("" takes the default).
INTERACTIVE = [
    ("Project name (human readable)", "Horovod Training", "Vision Team"),
    ("Repository name (DNS-1123 label)", "vision-team", ""),
    ("AWS region", "us-west-2", "us-east-1"),
    ("Availability zone of the GPU nodes and the FSx file system", "us-east-1a", "us-east-1d"),
    ("EKS Kubernetes version (1.32, 1.33, 1.34, 1.35)", "1.34", "1.33"),
    ("EKS cluster name prefix (environments add -dev, -prod)", "vision-team", ""),
    ("GPU instance type of prod", "p4d.24xlarge", "p5.48xlarge"),
    ("GPU nodes in prod (= MPI workers)", "2", "3"),
    ("EFA networking: auto (on where the instance type has it), on, off", "auto", ""),
    ("FSx for Lustre deployment type of prod", "SCRATCH_2", "PERSISTENT_1"),
    ("FSx capacity in GiB (prod)", "1200", "2400"),
    ("S3 path to import into FSx (s3://bucket or s3://bucket/prefix; empty for none)", "", "s3://vision-data/imagenet"),
    ("Capacity reservation id for prod's GPU nodes (cr-..., empty for none)", "", ""),
    ("Is that reservation a Capacity Block for ML (yes, no)", "no", ""),
    ("Spot instances for dev's GPU nodes (yes, no; dev has no EFA, prod is never Spot)", "no", "yes"),
    ("Container image repository of the trainer (no tag)", "ghcr.io/example-org/vision-team-trainer", ""),
    ("Git repository Flux syncs from", "https://github.com/example-org/vision-team", ""),
    ("Branch Flux syncs from", "main", "trunk"),
]


def test_the_interactive_prompt_asks_every_question_and_bakes_what_was_typed(cookiecutter_bin, template_repo, tmp_path):
    child = pexpect.spawn(
        str(cookiecutter_bin / "cookiecutter"),
        [str(template_repo), "-o", str(tmp_path / "user")],
        env={**user_env(), "COLUMNS": "250", "LINES": "50"},
        encoding="utf-8",
        timeout=120,
        dimensions=(50, 250),
    )
    asked = []
    for _ in INTERACTIVE:
        child.expect(r"\[(\d+)/(\d+)\](?:\x1b\[[0-9;]*m)* (.*?): $")  # a narrow terminal wraps the line
        asked.append(" ".join(ESCAPES.sub("", child.match.group(3)).split()))
        question, _, typed = INTERACTIVE[len(asked) - 1]
        child.sendline(typed)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0, ESCAPES.sub("", child.before)[-3000:]
    assert len(asked) == len(INTERACTIVE) == 18
    for shown, (question, default, _) in zip(asked, INTERACTIVE, strict=True):
        assert shown.startswith(question) and shown.endswith(f"({default})"), (shown, question, default)
    typed = {key: answer for key, (_, _, answer) in zip(QUESTIONS, INTERACTIVE, strict=True) if answer}
    assert_same_tree(tmp_path / "user" / "vision-team", reference(template_repo, tmp_path / "dev", typed))


def cruft_create(cruft_bin: Path, template_repo: Path, out: Path, answers: dict) -> Path:
    command = [str(cruft_bin / "cruft"), "create", str(template_repo), "--no-input", "--output-dir", str(out)]
    result = subprocess.run(
        [*command, "--extra-context", json.dumps(answers)],
        env=user_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stdout[-2000:] + result.stderr[-3000:]
    return out / answers["project_slug"]


def test_cruft_create(cruft_bin, template_repo, tmp_path):
    answers = {"project_slug": "fleet", "gpu_instance_type": "g6.48xlarge", "gpu_node_count": "4"}
    made = cruft_create(cruft_bin, template_repo, tmp_path / "user", answers)
    baked = reference(template_repo, tmp_path / "dev", answers)
    assert_same_tree(made, baked, but=(".cruft.json",))  # cruft writes its own record of the bake
    state = json.loads((made / ".cruft.json").read_text())
    assert (
        state["template"] == str(template_repo) and state["commit"] == git(template_repo, "rev-parse", "HEAD").strip()
    )
    recorded = {k: v for k, v in state["context"]["cookiecutter"].items() if not k.startswith("_")}
    expected = json.loads((baked / ".cruft.json").read_text())["context"]["cookiecutter"]
    assert recorded == {k: v for k, v in expected.items() if not k.startswith("_")}


def release_a_tool_only_change(template_repo: Path, version: str) -> None:
    """A template commit that changes the tool alone: a fix in its code, its version, and the template's pin of
    it (the one line the generated repository holds of the tool)."""
    init = template_repo / "tool" / "src" / "eks_gpu_gitops" / "__init__.py"
    init.write_text(re.sub(r'__version__ = "[^"]+"', f'__version__ = "{version}"', init.read_text()))
    escaping = template_repo / "tool" / "src" / "eks_gpu_gitops" / "core" / "escaping.py"
    escaping.write_text(escaping.read_text() + "\n# a fix\n")
    pin = template_repo / "{{cookiecutter.project_slug}}" / "requirements.txt"
    pin.write_text(re.sub(r"eks-gpu-gitops==\S+", f"eks-gpu-gitops=={version}", pin.read_text()))
    git(template_repo, "commit", "--quiet", "-am", f"eks-gpu-gitops {version}")


def test_cruft_check_diff_and_update_after_a_tool_only_release_change_the_pin_line_alone(
    cruft_bin, template_repo, tmp_path
):
    work = tmp_path / "template"  # this test commits to the template: a copy of its own
    shutil.copytree(template_repo, work)
    project = cruft_create(cruft_bin, work, tmp_path / "user", {"project_slug": "kept"})
    git(project, "init", "--quiet", "--initial-branch=main")
    git(project, "add", "-A")
    git(project, "commit", "--quiet", "-m", "as generated")
    cruft = [str(cruft_bin / "cruft")]

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*cruft, *args], cwd=project, env=user_env(), capture_output=True, text=True, timeout=TIMEOUT
        )

    assert run("check").returncode == 0
    release_a_tool_only_change(work, "9.9.9")
    checked = run("check")
    assert checked.returncode == 1 and "Traceback" not in checked.stderr, checked.stdout + checked.stderr
    # cruft diff: what the repository changed against the template at the commit it was made from; nothing yet.
    diffed = run("diff")
    assert diffed.returncode == 0 and diffed.stdout == "" and "Traceback" not in diffed.stderr, diffed.stderr
    updated = run("update", "--skip-apply-ask")
    assert updated.returncode == 0 and "Traceback" not in updated.stderr, updated.stdout[-2000:] + updated.stderr
    # cruft stages what it applies; its own record changes by the commit it names, twice.
    numstat = git(project, "diff", "HEAD", "--numstat").split("\n")
    assert sorted(filter(None, numstat)) == ["1\t1\trequirements.txt", "2\t2\t.cruft.json"], numstat
    assert "eks-gpu-gitops==9.9.9" in (project / "requirements.txt").read_text()
    assert run("check").returncode == 0
    git(project, "commit", "--quiet", "-am", "eks-gpu-gitops 9.9.9")
    (project / "README.md").write_text((project / "README.md").read_text() + "\nOur notes.\n")
    diffed = run("diff")  # from the repository to the template: the repository's own line is one the template lacks
    assert diffed.returncode == 0 and "\n-Our notes.\n" in diffed.stdout, diffed.stdout[-2000:]


def run_hook_without(package_missing_python: Path, template: Path, project: Path) -> subprocess.CompletedProcess:
    """The pre-generation hook, rendered as cookiecutter renders it, run by a Python that lacks a package the hook
    needs, from a process whose working folder is the template (as cookiecutter's is while it runs a hook)."""
    text = (template / "hooks" / "pre_gen_project.py").read_text()
    answers = json.loads((template / "cookiecutter.json").read_text())
    answers.update(project_slug="x", availability_zone="us-west-2a", cluster_name="x")
    answers["trainer_image_repository"] = "ghcr.io/example-org/x-trainer"
    answers["git_repository_url"] = "https://github.com/example-org/x"
    hook = project / "hook.py"
    hook.write_text(text.replace("{{ cookiecutter | jsonify }}", json.dumps(answers)))
    parent = "import subprocess, sys; sys.exit(subprocess.run(sys.argv[1:3], cwd=sys.argv[3]).returncode)"
    return subprocess.run(
        [sys.executable, "-c", parent, str(package_missing_python), str(hook), str(project)],
        cwd=template,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_hook_without_a_package_it_needs_says_so_in_one_line(template, tmp_path):
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "bare")], check=True)
    (tmp_path / "project").mkdir()
    result = run_hook_without(tmp_path / "bare" / "bin" / "python", template, tmp_path / "project")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.splitlines() == [
        "error: the template's hooks need the Python package yaml, which cookiecutter brings: reinstall cookiecutter"
    ]
    # The same hook with the development environment's Python passes: the package was all it lacked.
    passed = run_hook_without(Path(sys.executable), template, tmp_path / "project")
    assert passed.returncode == 0, passed.stderr


def test_no_prompt_text_is_read_as_markup():
    """rich (cookiecutter's prompt) reads [...] as a style tag: a prompt or default with one crashed the prompt."""
    context = json.loads((TEMPLATE / "cookiecutter.json").read_text())
    shown = [*context["__prompts__"].values(), *(v for k, v in context.items() if isinstance(v, str) and k[0] != "_")]
    assert [text for text in shown if "[" in text] == []
