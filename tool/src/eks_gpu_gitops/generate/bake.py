"""What the template writes after cookiecutter has rendered it (its post-generation hook): the dev and prod
environments through the same generator as `new-environment`, and their rows of the README's table.

The template's hooks import this module from the template's checkout, in the Python that runs cookiecutter or
cruft: it and everything it imports need nothing beyond the standard library and PyYAML (which cookiecutter
requires). No network.
"""

from __future__ import annotations

from pathlib import Path

from ..facts import catalog
from . import readme
from .environment import EnvironmentSpec, environment_files, readme_row
from .files import write_new


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
    """The GPU instance types with EFA, by family, then GPUs and vCPUs: the EFA device plugin's node affinity
    (the template's overlays/base/device-plugins/efa/daemonset.yaml lists them; its tests keep the two equal)."""
    by_size = sorted(catalog.GPU_INSTANCE_TYPES.values(), key=lambda t: (t.family, t.gpus, t.vcpus))
    return [t.name for t in by_size if t.has_efa]


def finish(root: Path, answers: dict) -> None:
    specs = environments(answers)
    for spec in specs:
        write_new(root, environment_files(spec))
    readme_path = root / "README.md"
    readme_path.write_text(readme.with_rows(readme_path.read_text(), [readme_row(s) for s in specs]))
