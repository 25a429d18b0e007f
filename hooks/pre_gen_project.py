"""Refuse bad answers before cookiecutter writes anything.

The checks are the tool's own (eks_gpu_gitops.generate.answers, which its generators use too), loaded from the
template's tool/src: they need only the standard library and PyYAML, which cookiecutter brings, so this hook runs
wherever `pip install cookiecutter` or `pip install cruft` does. A non-zero exit makes cookiecutter delete the
half-made project folder.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

ANSWERS = json.loads(r"""{{ cookiecutter | jsonify }}""")
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


def main() -> int:
    sys.path.insert(0, str(template_dir() / TOOL_SOURCE))
    try:
        from eks_gpu_gitops.generate.answers import check_answers
    except ModuleNotFoundError as error:
        sys.exit(f"error: {MISSING.format(package=error.name)}")

    problems = check_answers(ANSWERS)
    if not problems:
        return 0
    # One line: later problems are often echoes of the first (a bad slug makes the
    # derived cluster name and image repository bad too).
    print(f"error: {problems[0]}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
