"""Finish the generated repository: write the dev and prod environments, record the answers.

Environments are written by the repository's own generator (`gitops_tools.generate`), the
same code `scripts/new-environment` runs later, so every environment has one shape. Then
`.cruft.json` loses the values that describe the machine that ran cookiecutter (absolute
paths) and gains the template commit when the template is a Git checkout. No network.
"""

import json
import subprocess
import sys
from pathlib import Path

ANSWERS = json.loads({{ cookiecutter | jsonify | tojson }})
MACHINE_KEYS = ("_output_dir", "_repo_dir", "_checkout")

sys.path.insert(0, "scripts")

from gitops_tools.answers import parse_efa  # noqa: E402
from gitops_tools.generate.environment import EnvironmentSpec, environment_files  # noqa: E402
from gitops_tools.generate.files import write_new  # noqa: E402


def environments() -> list[EnvironmentSpec]:
    common = {"cluster_prefix": ANSWERS["cluster_name"], "region": ANSWERS["aws_region"],
              "availability_zone": ANSWERS["availability_zone"], "base_region": ANSWERS["aws_region"]}
    dev = EnvironmentSpec(name="dev", instance_type=ANSWERS["_dev_instance_type"],
                          nodes=int(ANSWERS["_dev_node_count"]), efa=False, delete_fsx_with_claim=True, **common)
    prod = EnvironmentSpec(name="prod", instance_type=ANSWERS["gpu_instance_type"],
                           nodes=int(ANSWERS["gpu_node_count"]),
                           efa=parse_efa(ANSWERS["efa"], ANSWERS["gpu_instance_type"])[0],
                           fsx_deployment_type=ANSWERS["fsx_deployment_type"],
                           fsx_capacity_gib=int(ANSWERS["fsx_capacity_gib"]),
                           fsx_s3_import_path=ANSWERS["fsx_s3_import_path"], **common)
    return [dev, prod]


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
    for spec in environments():
        write_new(Path("."), environment_files(spec))
    record_answers(Path(".cruft.json"))
