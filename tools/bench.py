"""Time `scripts/validate` on a fleet of environments against the render floor and kubernetes-validate.

    .venv/bin/python tools/bench.py [--environments N] [--repeat R] [--keep DIR]

Bakes the default project and grows it to a fleet of N environments (default 24) with the
repository's own generator, `scripts/new-environment`, cycling through GPU types, node counts
and FSx types, so environments differ the way real ones do. Then, in one run, best of R each
(runs alternate, so load from elsewhere hits all three alike):

- floor: kustomize alone (the binary validate uses), sequentially, over every overlay validate
  renders: each environment's Flux Kustomization paths and its eksctl overlay;
- validate: `scripts/validate --format json` over the whole repository, a fresh process as in CI
  (lint, render, strict schemas, rules, report);
- kubernetes-validate: its command line, strict, over the same overlays rendered to files
  (rendering not counted; it checks built-in kinds only and skips the custom resources);
- validate's checks alone: lint, schemas, rules and report over the already rendered fleet, in
  a fresh process (what validate adds to rendering, the fair match for kubernetes-validate).

Each line shows the wall time and the CPU time of the command with its children: on a shared
machine the wall times move with load from elsewhere, the CPU times much less. The target is
validate within 1.5 x the floor. Schemas come from GITOPS_SCHEMA_DIR (`make bench`
points it at ../shared/schemas) or the download cache.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_diff import bake  # noqa: E402  (the same fast bake as the diff bench)

TARGET = 1.5
# (instance type, nodes, FSx deployment type, capacity GiB): the cycle new environments follow.
SHAPES = (
    ("g5.xlarge", 2, "SCRATCH_2", 1200),
    ("g5.12xlarge", 2, "SCRATCH_2", 2400),
    ("p4d.24xlarge", 2, "PERSISTENT_2", 2400),
    ("g6.48xlarge", 4, "SCRATCH_1", 3600),
    ("p5.48xlarge", 2, "PERSISTENT_1", 2400),
    ("g6e.12xlarge", 1, "SCRATCH_2", 1200),
    ("p4de.24xlarge", 4, "PERSISTENT_2", 4800),
    ("g5.48xlarge", 2, "SCRATCH_2", 1200),
)


def grow(project: Path, environments: int) -> list[str]:
    """Add environments with scripts/new-environment (in this process) up to `environments`."""
    from eks_gpu_gitops.cli import new_environment

    names = sorted(p.name for p in (project / "clusters").iterdir() if p.is_dir())
    here = Path.cwd()
    os.chdir(project)
    try:
        while len(names) < environments:
            instance, nodes, fsx_type, capacity = SHAPES[len(names) % len(SHAPES)]
            name = f"team-{len(names):02d}"
            argv = [
                name,
                "--instance-type",
                instance,
                "--nodes",
                str(nodes),
                "--fsx-deployment-type",
                fsx_type,
                "--fsx-capacity-gib",
                str(capacity),
            ]
            with open(os.devnull, "w") as quiet:
                stdout, sys.stdout = sys.stdout, quiet
                try:
                    code = new_environment.main(argv)
                finally:
                    sys.stdout = stdout
            if code != 0:
                raise SystemExit(f"bench: new-environment {' '.join(argv)} failed")
            names.append(name)
    finally:
        os.chdir(here)
    return names


def overlays(project: Path) -> list[Path]:
    """Every folder validate renders: Flux Kustomization paths and eksctl overlays."""
    from eks_gpu_gitops.render import helper
    from eks_gpu_gitops.render import repository as render

    found = []
    for environment in render.render_repository(project):
        found += [project / k.path for k in environment.kustomizations if helper.has_kustomization(project / k.path)]
        found.append(project / "overlays" / environment.name / "eksctl")
    return found


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # includes waited-for grandchildren
    return usage.ru_utime + usage.ru_stime


def timed(command: list[str], **options) -> tuple[tuple[float, float], subprocess.CompletedProcess]:
    """((wall seconds, CPU seconds of the command and its children), result)."""
    start, cpu = time.perf_counter(), _child_cpu()
    result = subprocess.run(command, capture_output=True, text=True, **options)
    return (time.perf_counter() - start, _child_cpu() - cpu), result


def kustomize_command() -> list[str]:
    """The kustomize a person runs: the standalone binary, else kubectl's."""
    return ["kustomize", "build"] if shutil.which("kustomize") else ["kubectl", "kustomize"]


def floor(folders: list[Path]) -> tuple[float, float]:
    start, cpu = time.perf_counter(), _child_cpu()
    for folder in folders:
        subprocess.run(
            [*kustomize_command(), "--load-restrictor", "LoadRestrictionsNone", str(folder)],
            capture_output=True,
            check=True,
        )
    return time.perf_counter() - start, _child_cpu() - cpu


def checks_only(project: Path) -> float:
    """Seconds of validate's own work on a rendered fleet (this process renders it first)."""
    from eks_gpu_gitops.model import Scope
    from eks_gpu_gitops.render import platform
    from eks_gpu_gitops.render import repository as render
    from eks_gpu_gitops.render.locate import Locator
    from eks_gpu_gitops.schemas.checker import SchemaChecker, SchemaStore
    from eks_gpu_gitops.validate import lint, load, pipeline, plan

    environments = render.render_repository(project)
    start = time.perf_counter()
    chosen = plan.plan([project], None)
    lint_findings = lint.lint(chosen.sources, project, lambda line: None)
    settings = platform.load(project)
    scopes = [
        Scope(e.name, e.objects, e.cluster_config, e.kustomizations, complete=True, platform=settings)
        for e in environments
    ]
    for scope in scopes:
        scope.kubernetes_version, _ = load.kubernetes_version_of(scope.cluster_config, None)
    checker = SchemaChecker(SchemaStore(platform.schema_sources(project)))
    pipeline.evaluate(scopes, checker, Locator(project), lint_findings=lint_findings)
    return time.perf_counter() - start


def measure(project: Path, repeat: int) -> dict:
    from eks_gpu_gitops.render import repository as render
    from eks_gpu_gitops.render.output import write_rendered

    folders = overlays(project)
    rendered = Path(tempfile.mkdtemp(prefix="bench-rendered-"))
    environments = render.render_repository(project)
    write_rendered(environments, rendered / "out")
    files = sorted(str(p) for p in (rendered / "out").rglob("*.yaml"))
    version = str(environments[0].cluster_config.doc["metadata"]["version"])
    checker = [str(Path(sys.executable).with_name("kubernetes-validate")), "--strict", "--quiet", "-k", version, *files]
    # Every run does all of its work: no render or result cache (tools/bench_cache.py measures those).
    env = {**os.environ, "GITOPS_RENDER_CACHE": "off"}
    floors, validates, checkers, own = [], [], [], []
    for _ in range(repeat):
        floors.append(floor(folders))
        seconds, result = timed(
            [str(project / "scripts" / "validate"), "--format", "json", "--quiet"], cwd=project, env=env
        )
        if result.returncode not in (0, 1) or not result.stdout:
            raise SystemExit(f"bench: validate failed: {result.stderr.strip()}")
        validates.append(seconds)
        seconds, _ = timed(checker)
        checkers.append(seconds)
        _, result_own = timed([sys.executable, __file__, "--checks-only", str(project)], env=env)
        own.append(float(result_own.stdout))
    shutil.rmtree(rendered, ignore_errors=True)
    summary = json.loads(result.stdout)["summary"]
    # Best wall time of each, with the CPU time of that same run.
    return {
        "environments": len(environments),
        "overlays": len(folders),
        "objects": summary["objects"],
        "errors": summary["errors"],
        "warnings": summary["warnings"],
        "floor": min(floors),
        "validate": min(validates),
        "kubernetes_validate": min(checkers),
        "checks": min(own),
        "cores": os.cpu_count(),
        "load": os.getloadavg()[0],
    }


def report(f: dict) -> str:
    ratio = f["validate"][0] / f["floor"][0]
    verdict = "within" if ratio <= TARGET else "OVER"
    return "\n".join(
        [
            f"validate bench: {f['environments']} environments, {f['overlays']} overlays, {f['objects']} objects, "
            f"{f['cores']} cores, load {f['load']:.1f} ({f['errors']} errors, {f['warnings']} warnings found)",
            "                                        wall      CPU",
            f"  floor: kustomize alone, sequential    {f['floor'][0]:6.2f} s  {f['floor'][1]:6.2f} s",
            f"  scripts/validate (whole pipeline)     {f['validate'][0]:6.2f} s  {f['validate'][1]:6.2f} s",
            f"  kubernetes-validate CLI, strict       {f['kubernetes_validate'][0]:6.2f} s  "
            f"{f['kubernetes_validate'][1]:6.2f} s  (rendered files, built-in kinds only)",
            f"  validate's checks alone (no render)   {f['checks']:6.2f} s  (lint, schemas, rules, report)",
            f"  validate / floor                      {ratio:6.2f} x  ({verdict} the {TARGET} x target; "
            f"CPU {f['validate'][1] / f['floor'][1]:.2f} x)",
            f"  validate / kubernetes-validate        {f['validate'][0] / f['kubernetes_validate'][0]:6.2f} x",
            f"  checks alone / kubernetes-validate    {f['checks'] / f['kubernetes_validate'][0]:6.2f} x",
        ]
    )


@contextlib.contextmanager
def fleet(size: int, keep: Path | None):
    """A baked project grown to `size` environments, removed afterwards unless kept."""
    work = keep or Path(tempfile.mkdtemp(prefix="bench-validate-"))
    try:
        project = bake(work)
        grow(project, size)
        yield project
    finally:
        if keep is None:
            shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--environments", type=int, default=24, help="fleet size (default 24, at least 20)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per timing; the best counts (default 3)")
    parser.add_argument("--keep", type=Path, help="build the fleet in this folder and keep it")
    parser.add_argument("--checks-only", type=Path, help=argparse.SUPPRESS)  # one timing, in its own process
    args = parser.parse_args()
    if args.checks_only:
        print(checks_only(args.checks_only))
        return 0
    if args.environments < 20:
        parser.error("--environments must be at least 20")
    with fleet(args.environments, args.keep) as project:
        print(report(measure(project, args.repeat)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
