"""`make demo`: the loop a team lives in, on the default project: bake it, render what Flux applies, validate it,
then a pull request and its diff.

    .venv/bin/python tools/demo.py [--out DIR]

The project is baked into DIR (default demo/, which the template's .gitignore keeps out of its own history) as a
Git repository of its own, and its scripts/<verb> run the tool this environment has installed (the working copy
of tool/, as `make setup` installs it). Each step prints the command, then what it shows.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

from cookiecutter.main import cookiecutter

TEMPLATE = Path(__file__).resolve().parent.parent
GIT = ["git", "-c", "user.name=demo", "-c", "user.email=demo@example.com", "-c", "commit.gpgsign=false"]


def step(title: str) -> None:
    print(f"\n== {title}", flush=True)


def run(project: Path, *command: str, head: int | None = None, allowed: tuple[int, ...] = (0,)) -> str:
    """Run a command in the project as a person would, print it and (the end of) what it printed."""
    print(f"$ {' '.join(command)}", flush=True)
    environment = {**os.environ, "EKS_GPU_GITOPS": str(Path(sys.executable).with_name("eks-gpu-gitops"))}
    result = subprocess.run(list(command), cwd=project, env=environment, capture_output=True, text=True)
    # What the command answers; its progress lines (stderr) only when it failed.
    shown = (result.stdout if result.returncode in allowed else result.stdout + result.stderr).strip().splitlines()
    for line in shown[:head]:
        print(f"  {line}")
    if head is not None and len(shown) > head:
        print(f"  ... ({len(shown) - head} more lines)")
    if result.returncode not in allowed:
        sys.exit(f"demo: `{' '.join(command)}` exited with {result.returncode}")
    return result.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("demo"))
    args = parser.parse_args()
    out = args.out.resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)

    step("Bake the default project (cookiecutter --no-input)")
    project = Path(cookiecutter(str(TEMPLATE), no_input=True, output_dir=str(out)))
    print(f"  {project}")
    subprocess.run([*GIT, "init", "--quiet", "--initial-branch=main"], cwd=project, check=True)
    subprocess.run([*GIT, "add", "-A"], cwd=project, check=True)
    subprocess.run([*GIT, "commit", "--quiet", "-m", "as generated"], cwd=project, check=True)

    step("Render what Flux applies to each environment, and what eksctl creates")
    run(project, "scripts/render")

    step("Validate every environment, as the validate workflow does on each pull request")
    run(project, "scripts/validate", "--quiet")

    step("A pull request: add a training job to dev (scripts/new-job), on a branch")
    subprocess.run([*GIT, "checkout", "--quiet", "-b", "add-a-job"], cwd=project, check=True)
    run(project, "scripts/new-job", "resnet-trial", "--env", "dev", "--workers", "1")
    subprocess.run([*GIT, "add", "-A"], cwd=project, check=True)
    subprocess.run([*GIT, "commit", "--quiet", "-m", "dev: a trial job"], cwd=project, check=True)

    step("What the pull request changes, as the diff workflow comments it")
    run(project, "scripts/diff", "--base", "main", head=24)

    print(f"\nThe project is in {project}; its README says what comes next (eksctl, flux bootstrap).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
