"""Finish the generated repository: write the dev and prod environments, record the answers.

The environments and their rows of the README's table are written by the tool's own generator
(eks_gpu_gitops.generate.bake, the code `new-environment` runs later, so every environment has one shape),
loaded from the template's tool/src like the pre-generation hook's checks, with nothing beyond the standard
library and PyYAML. Then `.cruft.json` loses the values that describe the machine that ran cookiecutter
(absolute paths) and gains the template commit when the template is a Git checkout. No network.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

ANSWERS = json.loads(r"""{{ cookiecutter | jsonify }}""")
MACHINE_KEYS = ("_output_dir", "_repo_dir", "_checkout")
TOOL_SOURCE = Path("tool") / "src"
MISSING = "the template's hooks need the Python package {package}, which cookiecutter brings: reinstall cookiecutter"


def template_dir() -> Path:
    """The template's folder: cookiecutter and cruft both run a hook while their own working folder is the
    template (cookiecutter 2.7.1, hooks.py run_hook_from_repo_dir: work_in(repo_dir)), and only cookiecutter
    names it in the answers (_repo_dir, relative when it was given so). The same function is in both hooks:
    cookiecutter runs each from a temporary copy of its own, so they cannot share a module."""
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        where = os.readlink(f"/proc/{parent}/cwd")
    else:  # macOS: no /proc; lsof comes with it
        command = ["lsof", "-a", "-p", str(parent), "-d", "cwd", "-Fn"]
        try:
            listed = subprocess.run(command, capture_output=True, text=True).stdout
        except OSError:
            listed = ""
        where = next((line[1:] for line in listed.splitlines() if line.startswith("n")), "")
    if not (Path(where) / TOOL_SOURCE).is_dir():
        sys.exit(f"error: cannot find the template's tool/src, which the hooks load (looked in {where or 'nothing'})")
    return Path(where)


def template_commit(repo_dir: Path) -> str:
    try:
        result = subprocess.run(
            ["git", "-C", str(repo_dir), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return ""
    return result.stdout.strip()


def record_answers(path: Path, repo_dir: Path) -> None:
    state = json.loads(path.read_text())
    answers = state["context"]["cookiecutter"]
    for key in MACHINE_KEYS:
        answers.pop(key, None)
    state["commit"] = state.get("commit") or template_commit(repo_dir)
    path.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    template = template_dir()
    sys.path.insert(0, str(template / TOOL_SOURCE))
    try:
        from eks_gpu_gitops.generate.bake import finish
    except ModuleNotFoundError as error:
        sys.exit(f"error: {MISSING.format(package=error.name)}")

    finish(Path("."), ANSWERS)
    record_answers(Path(".cruft.json"), template)
