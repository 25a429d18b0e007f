"""Finish the generated repository: record the answers for `cruft update`.

Cookiecutter renders `.cruft.json` with every answer; this hook drops the values that
describe the machine that ran cookiecutter (absolute paths) and records the template
commit when the template is a Git checkout. It never needs the network.
"""

import json
import subprocess
from pathlib import Path

MACHINE_KEYS = ("_output_dir", "_repo_dir", "_checkout")


def template_commit(repo_dir: str) -> str:
    try:
        result = subprocess.run(["git", "-C", repo_dir, "rev-parse", "HEAD"],
                                capture_output=True, text=True, check=True)
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
    record_answers(Path(".cruft.json"))
