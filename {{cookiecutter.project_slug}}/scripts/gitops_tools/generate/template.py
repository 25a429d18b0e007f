"""What the template writes after cookiecutter has rendered it (hooks/post_gen_project.py): the
dev and prod environments through the same generator as `scripts/new-environment`, their rows of
the README's table, and the EFA device plugin's instance types from the catalogue. No network.
"""

from __future__ import annotations

from pathlib import Path

from .. import catalog
from . import readme
from .environment import EnvironmentSpec, environment_files, readme_row
from .files import write_new
from .yaml_edit import edit

EFA_DAEMONSET = "overlays/base/device-plugins/efa/daemonset.yaml"


def environments(answers: dict) -> list[EnvironmentSpec]:
    """dev (small single-GPU nodes, scratch FSx deleted with its claim, no EFA, Spot if dev_gpu_spot is yes) and
    prod (the answers)."""
    common = {
        "cluster_prefix": answers["cluster_name"],
        "region": answers["aws_region"],
        "availability_zone": answers["availability_zone"],
    }
    dev = EnvironmentSpec(
        name="dev",
        instance_type=answers["_dev_instance_type"],
        nodes=int(answers["_dev_node_count"]),
        efa=False,
        delete_fsx_with_claim=True,
        spot=answers.get("dev_gpu_spot", "no") == "yes",
        **common,
    )
    return [dev, EnvironmentSpec.from_answers("prod", answers, cluster_prefix=answers["cluster_name"])]


def efa_instance_types() -> list[str]:
    """The GPU instance types with EFA, smallest first within each family."""
    by_size = sorted(catalog.GPU_INSTANCE_TYPES.values(), key=lambda t: (t.family, t.gpus, t.vcpus))
    return [t.name for t in by_size if t.has_efa]


def _set_efa_instance_types(daemonset: dict) -> None:
    terms = daemonset["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    for expression in terms[0]["matchExpressions"]:
        if expression["key"] == "node.kubernetes.io/instance-type":
            expression["values"] = efa_instance_types()


def finish(root: Path, answers: dict) -> None:
    specs = environments(answers)
    for spec in specs:
        write_new(root, environment_files(spec))
    readme_path = root / "README.md"
    readme_path.write_text(readme.with_rows(readme_path.read_text(), [readme_row(s) for s in specs]))
    edit(root / EFA_DAEMONSET, _set_efa_instance_types)
