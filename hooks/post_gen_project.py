"""Finish the generated repository: write the dev and prod environments, record the answers.

The environments, their rows of the README's table and the EFA device plugin's instance types are
written by the repository's own generator (`gitops_tools.generate.template`), the same code
`scripts/new-environment` runs later, so every environment has one shape. Then `.cruft.json` loses
the values that describe the machine that ran cookiecutter (absolute paths) and gains the template
commit when the template is a Git checkout. No network.
"""

import json
import subprocess
import sys
from pathlib import Path

ANSWERS = json.loads(r"""{{ cookiecutter | jsonify }}""")
MACHINE_KEYS = ("_output_dir", "_repo_dir", "_checkout")

sys.path.insert(0, "scripts")

from gitops_tools.generate import template  # noqa: E402


def template_commit(repo_dir: str) -> str:
    try:
        result = subprocess.run(
            ["git", "-C", repo_dir, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return ""
    return result.stdout.strip()


def record_answers(path: Path) -> None:
    state = json.loads(path.read_text())
    answers = state["context"]["cookiecutter"]
    repo_dir = answers.get("_repo_dir", "")
    for key in MACHINE_KEYS:
        answers.pop(key, None)
    state["commit"] = state.get("commit") or template_commit(repo_dir)
    path.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    template.finish(Path("."), ANSWERS)
    record_answers(Path(".cruft.json"))
