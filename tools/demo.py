"""`make demo`: bake the default project, render both environments, show what Flux applies.

Runs the generated repository's own scripts/render with this template's tooling environment,
then lists, per environment and Flux Kustomization in dependency order, the objects Flux
would apply, and the GPU node group eksctl would create.
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
sys.path.insert(0, str(TEMPLATE / "{{cookiecutter.project_slug}}" / "scripts"))

from eks_gpu_gitops.render import repository as render  # noqa: E402


def in_dependency_order(kustomizations):
    ordered, done = [], set()
    pending = list(kustomizations)
    while pending:
        ready = [k for k in pending if set(k.depends_on) <= done] or pending[:1]
        for k in ready:
            ordered.append(k)
            done.add(k.name)
            pending.remove(k)
    return ordered


def show(environments) -> None:
    for environment in environments:
        config = environment.cluster_config.doc
        gpu = next(g for g in config["managedNodeGroups"] if g["name"] == "gpu")
        print(
            f"\n== {environment.name}: cluster {config['metadata']['name']} (Kubernetes "
            f"{config['metadata']['version']}, {config['metadata']['region']})"
        )
        print(
            f"   eksctl GPU node group: {gpu['desiredCapacity']} x {gpu['instanceType']}"
            f" in {', '.join(gpu['availabilityZones'])}, EFA {'on' if gpu.get('efaEnabled') else 'off'}"
        )
        for kustomization in in_dependency_order(environment.kustomizations):
            after = f" (after {', '.join(kustomization.depends_on)})" if kustomization.depends_on else ""
            print(f"   Flux Kustomization {kustomization.name}: ./{kustomization.path}{after}")
            for manifest in kustomization.objects:
                print(f"     - {manifest.resource}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("demo"))
    args = parser.parse_args()
    out = args.out.resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    project = Path(cookiecutter(str(TEMPLATE), no_input=True, output_dir=str(out)))
    print(f"baked the default project into {project}")
    environment = dict(os.environ, GITOPS_PYTHON=sys.executable)
    subprocess.run([str(project / "scripts" / "render")], cwd=project, env=environment, check=True)
    show(render.render_repository(project))
    print(f"\nrendered manifests: {project / 'rendered'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
