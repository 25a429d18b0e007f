"""Refuse bad answers before cookiecutter writes anything.

The checks live in the generated repository's `gitops_tools.answers` (the generators use
the same code); this hook only loads them from the template and reports. A non-zero exit
makes cookiecutter delete the half-made project folder.
"""

import json
import os
import sys
from pathlib import Path

ANSWERS = json.loads(r"""{{ cookiecutter | jsonify }}""")
PACKAGE_DIR = Path("{% raw %}{{cookiecutter.project_slug}}{% endraw %}") / "scripts"


def template_dir() -> Path:
    """The template checkout. cookiecutter runs this hook from a temporary copy with the
    project folder as working directory, and `_repo_dir` is relative when the template was
    given as a relative path; cookiecutter itself is inside the template folder meanwhile."""
    given = Path(ANSWERS["_repo_dir"])
    if given.is_absolute():
        return given
    candidates = [Path(f"/proc/{os.getppid()}/cwd"), Path(os.environ.get("PWD", ".")) / given]
    for candidate in candidates:
        if (candidate / "cookiecutter.json").is_file():
            return candidate.resolve()
    sys.exit(f"error: cannot find the template folder {given} to check the answers")


def main() -> int:
    sys.path.insert(0, str(template_dir() / PACKAGE_DIR))
    from gitops_tools.answers import check_answers

    problems = check_answers(ANSWERS)
    if not problems:
        return 0
    # One line: later problems are often echoes of the first (a bad slug makes the
    # derived cluster name and image repository bad too).
    print(f"error: {problems[0]}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
